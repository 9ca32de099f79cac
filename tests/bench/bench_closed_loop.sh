#!/usr/bin/env bash
# bench_closed_loop.sh [BUILD_DIR] [SEEDS] — the closed loop on calibd's
# defaults (no configuration file), issue 27's figures. One calibd; each
# seed is a model of its own, fed by examples/simulate over PUSH (nothing
# dropped), K = 10 logits with sigma 1.5:
#   over   10,000 pairs at 2,000/s, labels from softmax(z / 2) (the model
#          is overconfident from its first prediction): the T published
#          within them, which should be within 5% of 2;
#   calib  200,000 pairs, unpaced, labels from softmax(z): publishes (at
#          most 1 over all seeds, none with T outside [0.97, 1.03]);
#   shift  20,000 pairs at 2,000/s, T* = 2 for the first 2,600 and 4 after
#          (the shift lands about when the first candidate, T near 2, is
#          fit or in shadow; it would still improve on T = 1 after the
#          shift, and its publish once cleared the drift alarm): the T in
#          force at the end, which should be within 5% of 4 (fitted after
#          the shift), the candidates cancelled, and the loop's events.
# Each stream ends, then the script waits until its model has scored every
# pair and its loop is neither fitting nor storing: what was published was
# decided within the stream's pairs.
# Run: make -C build/plain && tests/bench/bench_closed_loop.sh build/plain 20
set -euo pipefail
[ -n "${BENCH_TRACE:-}" ] && set -x
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-build/plain}" && pwd)
seeds=${2:-20}
PY=/usr/bin/python3
. tests/bench/bench_lib.sh
defaults_calibd

# feed MODEL N SIMULATE-ARGS...: N pairs into MODEL, then waits until it has
# scored them and its loop has settled; prints one JSON line of its state
feed() {
    local model=$1 n=$2
    shift 2
    "$dir/examples/simulate" --endpoint ">$pull" --push --model "$model" --count "$n" \
        --batch 50 --linger-ms 60000 "$@" 2> /dev/null
    "$PY" - "$ctl" "$model" "$n" <<'PY'
import json, sys, time, msgpack, zmq
ep, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = zmq.Context().socket(zmq.REQ)
s.connect(ep)
def status():
    s.send(msgpack.packb({"v": 1, "cmd": "status", "model": model}))
    return msgpack.unpackb(s.recv(), raw=False)["models"][model]
deadline = time.monotonic() + 600
while True:
    m = status()
    if m["scored"] >= n and m["loop"]["phase"] not in ("fitting", "storing"):
        break
    if time.monotonic() > deadline:
        sys.exit("%s: not settled: %d scored, phase %s" % (model, m["scored"], m["loop"]["phase"]))
    time.sleep(0.1)
time.sleep(2.5) # two ticks: a store decided before the end is done
m = status()
l = m["loop"]
print(json.dumps({"model": model, "scored": m["scored"], "version": m["params"]["version"],
                  "T": m["params"]["values"].get("T"), "published": l["published"],
                  "refits": l["refits"], "rejected": l["rejected"], "cancelled": l["cancelled"],
                  "miscal": l["trigger"]["alarms"] if l["trigger"] else 0,
                  "drift": l["drift"]["alarms"] if l["drift"] else 0,
                  "events": [e["kind"] for e in m["events"]]}))
PY
}

# run KIND N JOBS SIMULATE-ARGS...: every seed, JOBS at a time
run() {
    local kind=$1 n=$2 jobs=$3 s p
    local -a feeds=()
    shift 3
    for s in $(seq "$seeds"); do
        feed "$kind$s" "$n" --seed "$s" "$@" > "$work/$kind$s.json" &
        feeds+=($!)
        # (calibd is a job too: the feeds running are those counted past it)
        while [ "$(jobs -rp | wc -l)" -gt "$jobs" ]; do sleep 0.2; done
    done
    for p in "${feeds[@]}"; do wait "$p"; done
    cat "$work/$kind"[0-9]*.json > "$work/$kind.all"
}

t0=$SECONDS
run over 10000 4 --temperature 2 --rate 2000
run calib 200000 2 --temperature 1 --rate 100000
run shift 20000 4 --temperature 2 --temperature-after 3.5 --switch-after 2300 --rate 500
"$PY" - "$work" "$seeds" <<'PY'
import json, sys
work, seeds = sys.argv[1], int(sys.argv[2])
def load(kind):
    return [json.loads(l) for l in open("%s/%s.all" % (work, kind))]
over, calib, shift = load("over"), load("calib"), load("shift")
ok = [r for r in over if r["T"] is not None and abs(r["T"] / 2 - 1) <= 0.05]
print("overconfident (T* = 2), 10,000 pairs each: %d of %d seeds published T within 5%% of 2"
      % (len(ok), len(over)))
print("  T:", " ".join("%.3f" % (r["T"] or 1) for r in over))
print("  refits:", " ".join(str(r["refits"]) for r in over))
pubs = sum(r["published"] for r in calib)
bad = [r for r in calib if r["version"] and not 0.97 <= r["T"] <= 1.03]
print("calibrated (T* = 1), 200,000 pairs each: %d publishes over %d seeds, %d with T "
      "outside [0.97, 1.03]; %d trigger alarms, %d drift alarms, %d refits"
      % (pubs, len(calib), len(bad), sum(r["miscal"] for r in calib),
         sum(r["drift"] for r in calib), sum(r["refits"] for r in calib)))
if pubs:
    print("  published T:", " ".join("%.3f" % r["T"] for r in calib if r["version"]))
after = [r for r in shift if r["T"] is not None and abs(r["T"] - 3.5) < abs(r["T"] - 2)]
good = [r for r in shift if r["T"] is not None and abs(r["T"] / 3.5 - 1) <= 0.1]
print("shift (T* 2 -> 3.5 after 2,300), 20,000 pairs at 500/s each: %d of %d seeds end with "
      "T nearer 3.5 than 2 (fitted after the shift), %d within 10%% of 3.5; stale candidates "
      "cancelled in %d seeds (%d)" % (len(after), len(shift), len(good),
      sum(1 for r in shift if r["cancelled"]), sum(r["cancelled"] for r in shift)))
print("  T at the end:", " ".join("%.3f" % (r["T"] or 1) for r in shift))
for r in shift:
    print("  %s: %s" % (r["model"], " ".join(k for k in r["events"] if k != "alert")))
PY
echo "($((SECONDS - t0)) s)"
