#!/usr/bin/env bash
# run.sh — the main job: builds calibd, starts it on its default endpoints,
# feeds it with the bundled simulator (a 10-class model, calibrated for the
# first 20 s; then its outcomes follow softmax(z / 2), so its softmax is
# overconfident), runs the example serving node, and shows calibctl status
# live: calibd detects the drift, refits a temperature, proves it in shadow
# and publishes it, and the serving node applies it. Ctrl-C stops
# everything. `run.sh --seconds N` stops after N seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=0
[ "${1:-}" = "--seconds" ] && seconds=${2:?}
scripts/deps.sh run # no test tools: no clang, Prometheus or Chromium
dir=$(BUILD_TARGETS="calibd calibctl examples/simulate examples/serving_node" scripts/build.sh plain)
state=build/run-state
mkdir -p "$state"
rm -f "$state"/model.*.params # each run starts from the identity (version 0)
pids=()
stop() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop EXIT
trap 'exit 0' INT TERM

"$dir/calibd" --state-dir "$state" 2> "$state/calibd.log" &
pids+=($!)
"$dir/calibctl" ping --timeout 5 > /dev/null ||
    { echo "calibd did not start:"; cat "$state/calibd.log"; exit 1; }
"$dir/examples/serving_node" --connect tcp://127.0.0.1:7451 --model sim \
    > "$state/serving_node.log" 2>&1 &
pids+=($!)
# predictions at 2000/s in batches of 100; labels follow 3 s later, 2% never;
# the true temperature moves from 1 to 2 after 40000 predictions (20 s)
"$dir/examples/simulate" --model sim --k 10 --temperature 1 --temperature-after 2 \
    --switch-after 40000 --rate 2000 --batch 100 --count 0 \
    --label-delay 3 --label-drop 0.02 --seed 7 2> "$state/simulate.log" &
pids+=($!)

echo "calibd on its defaults (log: $state/calibd.log), fed by examples/simulate; Ctrl-C stops."
echo "The page, with the reliability diagrams and U over time: http://127.0.0.1:7453/"
start=$(date +%s)
while :; do
    sleep 2
    "$dir/calibctl" status sim 2>/dev/null |
        python3 scripts/live_status.py sim "$state/serving_node.log" || true
    echo "  page: http://127.0.0.1:7453/   metrics: http://127.0.0.1:7453/metrics"
    if [ "$seconds" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$seconds" ]; then
        break
    fi
done
