#!/usr/bin/env bash
# test.sh — every test, twice: a plain build (then `make distcheck`) and a
# build with AddressSanitizer + UndefinedBehaviorSanitizer (with
# float-cast-overflow; clang, where installed). Installs what it
# needs. Ends with one line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh || exit 1
passed=0 failed=0 status=0

run_variant() {
    local variant=$1
    shift
    local dir
    dir=$(scripts/build.sh "$variant" --enable-werror "$@") || { status=1; return; }
    echo "== $variant: make check"
    (cd "$dir" && make -j"$(nproc)" check) || status=1
    local log="$dir/test-suite.log"
    if [ -f "$log" ]; then
        passed=$((passed + $(sed -n 's/^# PASS: *//p' "$log")))
        failed=$((failed + $(sed -n 's/^# FAIL: *//p' "$log") + $(sed -n 's/^# ERROR: *//p' "$log")))
        grep -q '^# FAIL: *0$' "$log" && grep -q '^# ERROR: *0$' "$log" || cat "$log"
    else
        failed=$((failed + 1))
    fi
}

run_variant plain
# clang where it is (deps.sh installs it): its UBSan checks more than GCC's
san_cc=()
command -v clang > /dev/null && san_cc=(CC=clang)
run_variant sanitizers --enable-sanitizers "${san_cc[@]}"
echo "== plain: make distcheck"
(cd build/plain && make -j"$(nproc)" distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror > distcheck.log 2>&1) ||
    { tail -50 build/plain/distcheck.log; status=1; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
exit $status
