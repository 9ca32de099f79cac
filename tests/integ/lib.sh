# lib.sh — shared by the integration tests: a calibd on ephemeral ports in a
# temporary state directory, and helpers to query it. Source it; it needs
# CALIBD, CALIBCTL and BUILDDIR in the environment (Makefile.am sets them).
set -u
: "${CALIBD:?}" "${CALIBCTL:?}" "${BUILDDIR:?}"
SIMULATE="$BUILDDIR/examples/simulate"
HOSTILE="$BUILDDIR/tests/integ/hostile"
work=$(mktemp -d) || exit 1
calibd_pid=
pass=0 fail=0

cleanup() {
    [ -n "$calibd_pid" ] && kill "$calibd_pid" 2>/dev/null && wait "$calibd_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

ok()  { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# start_calibd [EXTRA OPTIONS...]: sets INGEST, PULL, CONTROL, PUBLISH
start_calibd() {
    rm -f "$work/state/endpoints" # a restart must not read the last run's
    "$CALIBD" --ingest 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
        --control 'tcp://127.0.0.1:*' --http off --state-dir "$work/state" \
        --log-level warn "$@" 2> "$work/calibd.log" &
    calibd_pid=$!
    for _ in $(seq 100); do
        [ -s "$work/state/endpoints" ] && break
        sleep 0.05
    done
    INGEST=$(awk '$1 == "ingest" {print $2; exit}' "$work/state/endpoints")
    PULL=$(awk '$1 == "ingest_pull" {print $2; exit}' "$work/state/endpoints")
    CONTROL=$(awk '$1 == "control" {print $2; exit}' "$work/state/endpoints")
    PUBLISH=$(awk '$1 == "publish" {print $2; exit}' "$work/state/endpoints")
    "$CALIBCTL" ping --control "$CONTROL" --timeout 5 > /dev/null ||
        { echo "calibd did not start:"; cat "$work/calibd.log"; exit 1; }
}

stop_calibd() {
    kill -TERM "$calibd_pid"
    wait "$calibd_pid"
    local rc=$?
    calibd_pid=
    return $rc
}

status() { "$CALIBCTL" status --control "$CONTROL" "$@"; }

# jq-like field access with python: json_get FILE EXPR (EXPR on r)
json_get() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

# wait_for FILE EXPR: polls status into FILE until the python EXPR on r holds
# (10 s at most); gives up at once if calibd has died
wait_for() {
    local f=$1 expr=$2
    for _ in $(seq 200); do
        if ! kill -0 "$calibd_pid" 2>/dev/null; then
            echo "calibd is not running; its log:"
            cat "$work/calibd.log"
            return 1
        fi
        status --timeout 1 > "$f" 2>/dev/null &&
            [ "$(json_get "$f" "bool($expr)" 2>/dev/null)" = True ] && return 0
        sleep 0.05
    done
    return 1
}

# send_py ENDPOINT < CODE: runs the python CODE with send(topic, payload)
# (payload: bytes, or an object msgpack packs) and f32(values) (little-endian
# float32 bytes) at hand, over a PUSH socket connected to ENDPOINT (calibd's
# PULL socket: nothing is dropped, and the order is kept); returns once
# everything is delivered
PY=/usr/bin/python3 # Debian's, with python3-zmq and python3-msgpack
send_py() {
    "$PY" -c '
import struct, sys, msgpack, zmq
ctx = zmq.Context()
sock = ctx.socket(zmq.PUSH)
sock.setsockopt(zmq.LINGER, 20000)
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
' "$1"
}

# log_has FIXED-STRING: calibd's log has a line containing it
log_has() { grep -qF -- "$1" "$work/calibd.log"; }

finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
