# lib.sh — shared by the integration tests: a calibd on ephemeral ports in a
# temporary state directory, and helpers to query it. Source it; it needs
# CALIBD, CALIBCTL and BUILDDIR in the environment (Makefile.am sets them).
# Each script has its own daemon and directory, and ends only the processes
# it started (their pids): the scripts run alone or side by side. Checks
# speak TAP (tap.sh): ok, bad, check, then finish.
set -u
: "${CALIBD:?}" "${CALIBCTL:?}" "${BUILDDIR:?}"
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
# built PATH: the build's program PATH itself where libtool made one (the
# tests' LD_LIBRARY_PATH finds its libraries), else libtool's wrapper
built() {
    local real="$BUILDDIR/$(dirname "$1")/.libs/$(basename "$1")"
    if [ -x "$real" ] && [ -n "${LD_LIBRARY_PATH:-}" ]; then echo "$real"; else echo "$BUILDDIR/$1"; fi
}
SIMULATE=$(built examples/simulate)
HOSTILE=$(built tests/integ/hostile)
work=$(mktemp -d) || exit 1
calibd_pid=
bg_pids=() # track PID: what cleanup ends if the script stops early

track() { bg_pids+=("$@"); }
# the helpers first, and at once: a producer stopped gently after calibd
# would linger for the receiver that is gone, holding the test's output
cleanup() {
    local p
    for p in "${bg_pids[@]}"; do
        kill -KILL "$p" 2>/dev/null
    done
    if [ -n "$calibd_pid" ] && kill "$calibd_pid" 2>/dev/null; then
        ends_within "$calibd_pid" "$(scaled 30)" || kill -KILL "$calibd_pid" 2>/dev/null
        wait "$calibd_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# TIME_SCALE: how many times longer than a plain build on a quiet machine
# anything may take here: a machine several times slower than the one the
# scripts were written on, loaded besides (3), and the sanitizers' 2-5x on
# top of that (10); CALIB_TIME_SCALE overrides. It scales ceilings only: a
# wait on a condition that holds ends when it holds, so a generous ceiling
# costs a passing check nothing, and a loaded machine or a sanitizer build
# only waits longer.
if [ -n "${CALIB_TIME_SCALE:-}" ]; then
    TIME_SCALE=$CALIB_TIME_SCALE
elif [ "${CALIB_SANITIZERS:-no}" = yes ]; then
    TIME_SCALE=10
else
    TIME_SCALE=3
fi
# scaled SECONDS: SECONDS (a whole number) times TIME_SCALE
scaled() { echo $(( $1 * TIME_SCALE )); }
WAIT_CEILING=30 # seconds, before scaling: what a wait allows by default
# every curl of the scripts gives up after a ceiling, however it is called
# (curl reads $CURL_HOME/.curlrc): a daemon that stops answering fails a
# check, it does not hang the suite
echo "max-time = $(scaled "$WAIT_CEILING")" > "$work/.curlrc"
export CURL_HOME=$work
# calibctl's wait for an answer to a control request (status, refit, ping,
# forget), where a script does not set --timeout itself
export CALIBD_TIMEOUT=$(scaled 10)
# ZMQ_LINGER for the test producers: they exit once calibd has taken what
# they queued, however slowly it reads (--linger-ms of examples/simulate)
LINGER_MS=$(( $(scaled 60) * 1000 ))

# start_calibd [EXTRA OPTIONS...]: sets INGEST, PULL, CONTROL, PUBLISH and
# HTTP (empty with --http off, lib.sh's default); waits until calibd has
# written its endpoints and answers a ping (or has died: Bail out!)
# CALIBD_PRELOAD, where set, is preloaded into calibd alone, never into
# the tools that wait on it
start_calibd() {
    rm -f "$work/state/endpoints" # a restart must not read the last run's
    # (without the script's own descriptor: nap's FIFO)
    LD_PRELOAD="${CALIBD_PRELOAD:-${LD_PRELOAD:-}}" "$CALIBD" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
        --control 'tcp://127.0.0.1:*' --http off --state-dir "$work/state" \
        --log-level warn "$@" 2> "$work/calibd.log" {nap_fd}>&- &
    calibd_pid=$!
    wait_until "[ -s '$work/state/endpoints' ] || ! kill -0 $calibd_pid 2> /dev/null"
    local name endpoint
    INGEST= PULL= CONTROL= PUBLISH= HTTP=
    while read -r name endpoint _; do
        case $name in
            ingest) INGEST=${INGEST:-$endpoint} ;;
            ingest_pull) PULL=${PULL:-$endpoint} ;;
            control) CONTROL=${CONTROL:-$endpoint} ;;
            publish) PUBLISH=${PUBLISH:-$endpoint} ;;
            http) HTTP=${HTTP:-$endpoint} ;;
        esac
    done 2> /dev/null < "$work/state/endpoints"
    [ -n "$CONTROL" ] && ASAN_OPTIONS=$probe_asan timeout "$(scaled 20)" "$CALIBCTL" ping --control "$CONTROL" --timeout "$(scaled 10)" > /dev/null || {
        sed 's/^/# /' "$work/calibd.log"
        echo "Bail out! calibd did not start"
        exit 1
    }
}

# nap SECONDS: sleeps (fractions too) without starting a process: a read
# that times out on a FIFO nothing writes to (the polls of a suite started
# about two thousand sleeps)
mkfifo "$work/.nap" && exec {nap_fd}<> "$work/.nap" || exit 1
nap() { read -r -t "$1" -u "$nap_fd" _; return 0; }

# ends_within PID SECONDS: PID, a child of this shell, has ended within
# SECONDS (polled; no wait that could hang)
ends_within() {
    local end=$((SECONDS + $2))
    while kill -0 "$1" 2> /dev/null; do
        [ "$SECONDS" -ge "$end" ] && return 1
        nap 0.05
    done
}

# stop_calibd: SIGTERM, and calibd's exit status once it has ended; one
# that has not ended within a generous ceiling is a failure: its threads'
# stacks (gdb, where installed) and its log go to the test's log, then
# SIGKILL
stop_calibd() {
    kill -TERM "$calibd_pid"
    if ! ends_within "$calibd_pid" "$(scaled 60)"; then
        echo "# calibd did not end within $(scaled 60) s of SIGTERM; its threads:"
        command -v gdb > /dev/null &&
            timeout 60 gdb -batch -p "$calibd_pid" -ex 'thread apply all bt' 2>&1 | sed 's/^/#   /'
        sed 's/^/# /' "$work/calibd.log"
        kill -KILL "$calibd_pid"
    fi
    wait "$calibd_pid"
    local rc=$?
    calibd_pid=
    return $rc
}

# status [OPTIONS]: calibctl status, printed. lib.sh's own probes (this and
# start_calibd's ping, hundreds a suite) skip LeakSanitizer's scan at exit,
# 50 of the 95 ms of CPU a calibctl takes under the sanitizers; every other
# calibctl a script starts, status and ping included (kafka.sh, curve.sh,
# ...), keeps the leak check.
probe_asan=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
status() { ASAN_OPTIONS=$probe_asan "$CALIBCTL" status --control "$CONTROL" "$@"; }

# ask CMD ARG...: the answer of the script's python helper
# (tests/integ/helper.py) to CMD, printed, and its status: each call a
# connection of its own (bash's /dev/tcp), so that background jobs may ask
# too and a long wait holds up no other call. A python started for each
# call cost 50 to 150 ms of CPU, and the scripts made 400 calls a variant.
# (The helper is started below, once PY is set, and is no job of the
# script's shell, so that a bare `wait` does not wait for it.) A helper
# that stops answering fails the call within a ceiling: the default wait's,
# beyond the wait's own SECONDS.
ask() {
    local LC_ALL=C fd rc nout nerr out= err= ceiling
    ceiling=$(scaled "$WAIT_CEILING")
    case $1 in one) ceiling=$((ceiling + $4)) ;; all) ceiling=$((ceiling + $3)) ;; esac
    exec {fd}<> "/dev/tcp/127.0.0.1/$helper_port" && printf '%s\0' "$#" "$@" >&"$fd" &&
        read -r -t "$ceiling" rc nout nerr <&"$fd" || {
        echo "ask $1: no answer from tests/integ/helper.py; its log:" >&2
        sed 's/^/# /' "$work/.helper.log" >&2
        [ -z "${fd:-}" ] || exec {fd}>&-
        return 1
    }
    [ "$nout" -eq 0 ] || IFS= read -r -d '' -N "$nout" out <&"$fd"
    [ "$nerr" -eq 0 ] || IFS= read -r -d '' -N "$nerr" err <&"$fd"
    exec {fd}>&-
    printf '%s' "$out"
    [ -z "$err" ] || printf '%s' "$err" >&2
    return "$rc"
}

# jq-like field access with python: json_get FILE EXPR prints print(EXPR)
# on r, FILE's JSON, and fails with python's traceback on stderr as
# `python3 -c "...; r = json.load(open(FILE)); print(EXPR)"` would
json_get() { ask get "$1" "$2"; }

# wait_for FILE EXPR [SECONDS]: polls status into FILE until the python EXPR
# on r holds (WAIT_CEILING s at most, or SECONDS, scaled); gives up at once
# if calibd has died. The helper polls over a REQ socket of its own
# (tests/integ/status.py), or with calibctl where CURVE keys are set
# (CALIBD_KEY: a python of its own then, which reads them); FILE holds the
# last answer as `calibctl status` prints it.
wait_for() {
    local args=(one "$1" "$2" "$(scaled "${3:-$WAIT_CEILING}")" "$calibd_pid" "$CONTROL" "$TIME_SCALE")
    if [ -n "${CALIBD_KEY:-}" ]; then "$PY" "$srcdir/tests/integ/status.py" "${args[@]}"; else ask "${args[@]}"; fi
    case $? in
        0) return 0 ;;
        2) echo "# calibd is not running; its log:"
           sed 's/^/# /' "$work/calibd.log"
           return 1 ;;
        *) return 1 ;;
    esac
}

# wait_until SHELL-CONDITION [SECONDS]: polls the condition until it holds
# (WAIT_CEILING s at most, or SECONDS, scaled): every 50 ms in the first
# second, every 100 ms to the fifth, every 250 ms to the fifteenth, then
# every 500 ms. A condition may start processes (calibctl, python: 80 ms
# of CPU each under the sanitizers), and one that waits long waits on
# something slow (a rebalance, a timeout), which a poll more or less in a
# second does not delay much but a loaded machine feels.
wait_until() {
    local start=$SECONDS end=$((SECONDS + $(scaled "${2:-$WAIT_CEILING}"))) waited
    while :; do
        eval "$1" && return 0
        [ "$SECONDS" -ge "$end" ] && return 1
        waited=$((SECONDS - start))
        if [ "$waited" -lt 1 ]; then nap 0.05
        elif [ "$waited" -lt 5 ]; then nap 0.1
        elif [ "$waited" -lt 15 ]; then nap 0.25
        else nap 0.5
        fi
    done
}

# send_py ENDPOINT < CODE: runs the python CODE with send(topic, payload)
# (payload: bytes, or an object msgpack packs) and f32(values) (little-endian
# float32 bytes) at hand, over a PUSH socket connected to ENDPOINT (calibd's
# PULL socket: nothing is dropped, and the order is kept); returns once
# everything is delivered
PY=/usr/bin/python3 # Debian's, with python3-zmq and python3-msgpack
# the calibd package (python/) from this source tree, as `pip install ./python`
# would install it
export PYTHONPATH="$srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1 # the source tree stays as checked out
("$PY" "$srcdir/tests/integ/helper.py" "$work/.helper.port" "$$" \
    > /dev/null 2> "$work/.helper.log" {nap_fd}>&- & echo $! > "$work/.helper.pid")
track "$(cat "$work/.helper.pid")"
wait_until "[ -s '$work/.helper.port' ] || ! kill -0 $(cat "$work/.helper.pid") 2> /dev/null" ||
    { echo "Bail out! tests/integ/helper.py did not start"; exit 1; }
read -r helper_port < "$work/.helper.port" ||
    { sed 's/^/# /' "$work/.helper.log"; echo "Bail out! tests/integ/helper.py did not start"; exit 1; }
send_py() {
    "$PY" -c '
import struct, sys, msgpack, zmq
ctx = zmq.Context()
sock = ctx.socket(zmq.PUSH)
sock.setsockopt(zmq.LINGER, int(sys.argv[2]))
sock.connect(sys.argv[1])
def send(topic, payload):
    if not isinstance(payload, bytes):
        payload = msgpack.packb(payload, use_bin_type=True)
    sock.send_multipart([topic if isinstance(topic, bytes) else topic.encode(), payload])
def f32(values):
    return struct.pack("<%df" % len(values), *values)
exec(compile(sys.stdin.read(), "send_py", "exec"))
sock.close()
ctx.term()
' "$1" "$LINGER_MS"
}

# make_sink: $work/sink.sh, an alert sink for alert_exec that appends each
# alert to $work/alerts.jsonl; while $work/hang exists it hangs in a child
# whose pid it writes to $work/sink_child.pid (the kill must take it too)
make_sink() {
    cat > "$work/sink.sh" <<SINK
#!/bin/sh
cat >> "$work/alerts.jsonl"
if [ -e "$work/hang" ]; then
    sleep 4321 &
    echo \$! > "$work/sink_child.pid"
    wait
fi
exit 0
SINK
    chmod +x "$work/sink.sh"
    : > "$work/alerts.jsonl"
}

# uptime_past SECONDS STATUS-FILE: waits until calibd's uptime is SECONDS
# past the one in STATUS-FILE (ticks, on calibd's clock, rather than a sleep)
uptime_past() {
    local t
    t=$(json_get "$2" "r['uptime'] + $1") || return 1
    wait_for "$work/uptime.json" "r['uptime'] >= $t"
}

# log_has FIXED-STRING: calibd's log has a line containing it
log_has() { grep -qF -- "$1" "$work/calibd.log"; }
