#!/usr/bin/env bash
# bench_bias_loop.sh [BUILD_DIR] [SEEDS] — issue 40's closed loop on
# calibd's defaults (no configuration file): each seed is a Gaussian model
# of its own, fed by examples/simulate over PUSH (nothing dropped), 30,000
# pairs at 2,000/s, forecasts N(mu, 1) whose outcomes are N(mu, 1) for
# 5,000 pairs and N(mu + 0.5, 1) after (calibd-simulate --bias-after 0.5
# --switch-after 5000). Each stream ends, then the script waits until its
# model has scored every pair and its loop has settled, and reads the
# version in force and the pairs scored since it took over. On those pairs
# (the tail of the stream, which the simulator dumped) it computes the
# calibrated DSS under the published map, the oracle's (the true law,
# N(mu + 0.5, 1)) and the raw outputs'. Prints one line a seed and the
# summary: the seeds that ended with a location-scale version, and the
# largest |calibrated - oracle|.
# Run: make -C build/plain && tests/bench/bench_bias_loop.sh build/plain 20
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-build/plain}" && pwd)
seeds=${2:-20}
PY=/usr/bin/python3
. tests/bench/bench_lib.sh
defaults_calibd
n=30000
feeds=()
for s in $(seq "$seeds"); do
    "$dir/examples/simulate" --endpoint ">$pull" --push --model "bias$s" --seed "$s" \
        --form gaussian --bias-after 0.5 --switch-after 5000 --count "$n" --rate 2000 \
        --batch 50 --linger-ms 60000 --dump "$work/bias$s.csv" 2> /dev/null &
    feeds+=($!)
done
for p in "${feeds[@]}"; do wait "$p"; done
"$PY" - "$ctl" "$seeds" "$n" "$work" <<'PY'
import csv, json, math, sys, time, msgpack, zmq
ep, seeds, n, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = zmq.Context().socket(zmq.REQ)
s.connect(ep)
def status(model):
    s.send(msgpack.packb({"v": 1, "cmd": "status", "model": model}))
    return msgpack.unpackb(s.recv(), raw=False)["models"][model]
deadline = time.monotonic() + 600
for k in range(1, seeds + 1):
    while True:
        m = status("bias%d" % k)
        if m["scored"] >= n and m["loop"]["phase"] not in ("fitting", "storing"):
            break
        if time.monotonic() > deadline:
            sys.exit("bias%d: not settled" % k)
        time.sleep(0.1)
time.sleep(2.5) # two ticks: a store decided before the end is done
ok, worst = 0, 0.0
print("| seed | method | a | b | c | pairs after | calibrated DSS | oracle | raw | drift alarms | miscal alarms |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for k in range(1, seeds + 1):
    m = status("bias%d" % k)
    p, l = m["params"], m["loop"]
    after = m["calibrated_since_params"]["dss"]["n"]
    with open("%s/bias%d.csv" % (work, k)) as f:
        rows = [(float(r["y"]), float(r["mean"]), float(r["var"])) for r in csv.DictReader(f)]
    tail = rows[len(rows) - after:] if after else []
    v = p["values"]
    def dss(mu, var, y):
        return (y - mu) ** 2 / var + math.log(var)
    if p["method"] == "location_scale":
        cal = [dss(v["a"] + v["b"] * mu, v["c"] * var, y) for y, mu, var in tail]
    else:
        cal = []
    orc = [dss(mu + 0.5, 1.0, y) for y, mu, var in tail]
    raw = [dss(mu, var, y) for y, mu, var in tail]
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    good = p["method"] == "location_scale" and p["version"] >= 1 and after > 0
    if good:
        ok += 1
        worst = max(worst, abs(mean(cal) - mean(orc)))
    print("| %d | %s | %s | %s | %s | %d | %.4f | %.4f | %.4f | %d | %d |" % (
        k, p["method"], *("%.3f" % v[x] if x in v else "-" for x in "abc"), after,
        mean(cal), mean(orc), mean(raw), l["drift"]["alarms"],
        l["trigger"]["alarms"] if l["trigger"] else 0))
print()
print("%d/%d seeds end with a location-scale version; largest |calibrated - oracle| DSS on "
      "the pairs after it: %.4f" % (ok, seeds, worst))
PY
