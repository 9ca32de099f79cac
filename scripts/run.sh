#!/usr/bin/env bash
# run.sh — the main job: builds calibd, starts it on its default endpoints,
# feeds it with the bundled simulator (a 10-class model whose outcomes
# follow softmax(z / 2): overconfident from its first prediction, as
# networks ship; after 40 s softmax(z / 3.5), a drift; after 100 s a label
# shift, class 0 four times as frequent), runs the example serving node,
# and shows calibctl status live. Labels come 15 s after their
# predictions. calibd's miscalibration trigger finds the first fault, its
# drift detector the second; each time it refits a temperature, proves it
# in shadow and publishes it, and the serving node applies it. The third
# it sees from the predictions alone, before their labels: its label-free
# estimate of U moves 15 s before the realized U does, and with
# label_shift_adapt it publishes the prior correction without a label.
# Ctrl-C stops everything. `run.sh --seconds N` stops after N seconds.
# `run.sh --ports P` (or CALIBD_PORTS=P) puts calibd's five endpoints on
# P..P+4 (ingest, publish, control, HTTP, ingest_pull) instead of its
# defaults, 7450..7454, so that the demo runs beside another calibd.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=0
ports=${CALIBD_PORTS:-7450}
while [ $# -gt 0 ]; do
    case $1 in
    --seconds) seconds=${2:?--seconds N}; shift 2 ;;
    --ports) ports=${2:?--ports P}; shift 2 ;;
    *) echo "usage: scripts/run.sh [--seconds N] [--ports P]" >&2; exit 2 ;;
    esac
done
case $ports in
'' | *[!0-9]*) echo "run.sh: --ports takes a port number, not '$ports'" >&2; exit 2 ;;
esac
[ "$ports" -ge 1024 ] && [ "$ports" -le 65531 ] ||
    { echo "run.sh: --ports takes 1024..65531, not $ports" >&2; exit 2; }
ingest=tcp://127.0.0.1:$ports publish=tcp://127.0.0.1:$((ports + 1))
control=tcp://127.0.0.1:$((ports + 2)) http=127.0.0.1:$((ports + 3))
pull=tcp://127.0.0.1:$((ports + 4))
scripts/deps.sh run # no test tools: no clang, Prometheus or Chromium
dir=$(BUILD_TARGETS="calibd calibctl examples/simulate examples/serving_node" scripts/build.sh plain)
state=build/run-state
mkdir -p "$state"
rm -f "$state"/model.*.params # each run starts from the identity (version 0)
pids=()
stop() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop EXIT
trap 'exit 0' INT TERM

# calibd's defaults, but a history point every 2 s (rather than 60) so
# that the page's U over time fills within seconds, the label-free figures
# every second (rather than 5), and label_shift_adapt on (off by default)
printf '[daemon]\nhistory_step = 2\n[defaults]\nlabel_free_interval = 1\nlabel_shift_adapt = yes\n' \
    > build/run-demo.conf
"$dir/calibd" -c build/run-demo.conf --state-dir "$state" --ingest "@$ingest" \
    --ingest-pull "@$pull" \
    --publish "@$publish" --control "@$control" --http "$http" 2> "$state/calibd.log" &
pids+=($!)
"$dir/calibctl" ping --control "$control" --timeout 5 > /dev/null ||
    { echo "calibd did not start:"; cat "$state/calibd.log"; exit 1; }
"$dir/examples/serving_node" --connect "$publish" --model sim \
    > "$state/serving_node.log" 2>&1 &
pids+=($!)
# predictions at 2000/s in batches of 100, logits of standard deviation 4;
# labels follow 15 s later, 2% never;
# the true temperature is 2 from the start and 3.5 after 80000 predictions
# (40 s); class 0 is kept 4 times as often after 200000 (100 s)
"$dir/examples/simulate" --endpoint ">$ingest" --model sim --k 10 --temperature 2 --temperature-after 3.5 \
    --switch-after 80000 --label-shift 4 --label-shift-after 200000 --sigma 4 --rate 2000 \
    --batch 100 --count 0 --label-delay 15 --label-drop 0.02 --seed 7 \
    2> "$state/simulate.log" &
pids+=($!)

echo "calibd on its defaults (log: $state/calibd.log), fed by examples/simulate; Ctrl-C stops."
echo "The page, with the reliability diagrams and U over time: http://$http/"
start=$(date +%s)
while :; do
    sleep 2
    "$dir/calibctl" status --control "$control" sim 2>/dev/null |
        python3 scripts/live_status.py sim "$state/serving_node.log" || true
    echo "  page: http://$http/   metrics: http://$http/metrics"
    if [ "$seconds" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$seconds" ]; then
        break
    fi
done
