#!/usr/bin/env bash
# core.sh — the daemon's core does no I/O of its own (HACKING.md): no object
# of libcalibd_core calls libuv, ZeroMQ or libmicrohttpd, and calibctl,
# which links it alone, loads neither libuv nor libmicrohttpd.
set -u
: "${CALIBCTL:?}" "${BUILDDIR:?}"
. "$(dirname "$0")/../integ/tap.sh"
core="$BUILDDIR/.libs/libcalibd_core.a"
ctl="$BUILDDIR/.libs/calibctl"
check "libcalibd_core.a is built" '[ -s "$core" ]'
defined=$(nm -g --defined-only "$core" 2> /dev/null | grep -c ' T ')
check "and defines functions ($defined)" '[ "$defined" -gt 50 ]'
io=$(nm -u "$core" | awk '{print $NF}' | grep -E '^(uv_|zmq_|MHD_)' | sort -u | tr '\n' ' ')
check "none of its objects calls libuv, ZeroMQ or libmicrohttpd${io:+: $io}" '[ -z "$io" ]'
[ -x "$ctl" ] || ctl=$CALIBCTL # an installed layout: no libtool wrapper
loads=$(ldd "$ctl" | awk '{print $1}' | tr '\n' ' ')
check "ldd calibctl shows ZeroMQ (calibctl status speaks to calibd)" '[[ "$loads" == *libzmq* ]]'
check "and neither libuv nor libmicrohttpd" '[[ "$loads" != *libuv* && "$loads" != *libmicrohttpd* ]]'
finish
