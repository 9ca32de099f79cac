#!/usr/bin/env bash
# bench_refit.sh [BUILD_DIR] — what a refit costs calibd: for K = 10 and
# K = 1000, a model gets 10,000 pairs (outcomes inline), then `calibctl
# refit` fits its method (temperature) on them in a worker thread while
# `bench_rate ping` sends control pings back to back. Reports the refit's
# latency (from the model's events: the refit's start to the candidate in
# shadow) and the pings' latency meanwhile: how long the refit's share on the
# loop (copying the samples out of the ring, taking the result) kept a
# control reply waiting; the same pings before the refit for comparison;
# and calibd's log line of the candidate (the fit's time in the worker, the
# copy's on the loop and its longest slice). On two cores the pings also
# wait for the scheduler: a Python process starting beside them makes 8 ms.
# Run: make -C build/plain tests/bench/bench_rate && tests/bench/bench_refit.sh build/plain
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-build/plain}" && pwd)
rate=$dir/tests/bench/bench_rate
[ -x "$rate" ] || make -C "$dir" tests/bench/bench_rate > /dev/null
PY=/usr/bin/python3 # Debian's, with python3-zmq and python3-msgpack
work=$(mktemp -d)
pid=
trap '[ -z "$pid" ] || kill "$pid" 2> /dev/null; rm -rf "$work"' EXIT
# no drift detection: the only refit is the one asked for
printf '[defaults]\ndrift = no\nrefit_samples = 10000\n' > "$work/calibd.conf"
# (the log at info: the candidate's line says how the copy went)
. tests/bench/bench_lib.sh
start_calibd "$work/calibd.conf" info

# refit MODEL: asks for a refit, then polls until the phase leaves fitting;
# prints the seconds it took and the samples fitted
refit() {
    "$PY" - "$ctl" "$1" <<'PY'
import sys, time, msgpack, zmq
ep, model = sys.argv[1:3]
s = zmq.Context().socket(zmq.REQ)
s.connect(ep)
def ask(req):
    s.send(msgpack.packb(req))
    return msgpack.unpackb(s.recv(), raw=False)
t0 = time.monotonic()
r = ask({"v": 1, "cmd": "refit", "model": model})
if not r.get("ok"):
    sys.exit("refit refused: %r" % r)
# polled every 20 ms, not faster: a status reply of a K = 1000 model takes
# the loop a millisecond or more, which the pings would wait behind
while True:
    m = ask({"v": 1, "cmd": "status", "model": model})["models"][model]
    if m["loop"]["phase"] != "fitting":
        break
    time.sleep(0.02)
# the latency from the daemon's own events: the refit's start to the
# candidate in shadow (samples copied, fit, result taken)
ev = m["events"]
start = max(e["t"] for e in ev if e["kind"] == "refit")
end = max(e["t"] for e in ev if e["kind"] in ("shadow_start", "refit_error"))
print("refit_ms=%.1f samples=%d phase_after=%s" % ((end - start) * 1e3, r["samples"],
                                                   m["loop"]["phase"]))
PY
}

for k in 10 1000; do
    model=refit$k
    "$rate" send --endpoint "$pull" --model "$model" --k "$k" --batch 100 --count 10000 > /dev/null
    "$rate" wait --control "$ctl" --model "$model" --scored 10000 > /dev/null
    before=$("$rate" ping --control "$ctl" --seconds 1)
    "$rate" ping --control "$ctl" --seconds 2 > "$work/ping" &
    pp=$!
    out=$(refit "$model")
    wait "$pp"
    echo "K = $k: $out; pings during: $(cat "$work/ping"); before: $before"
    grep "$model: candidate" "$work/log" | tail -n 1 | sed 's/.*loop: /  /'
done
