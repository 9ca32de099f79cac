#!/usr/bin/env bash
# run.sh — the main job: builds calibd, starts it on its default endpoints,
# feeds it with the bundled simulator (a 10-class model whose softmax is
# overconfident: outcomes follow softmax(z / 2)), and shows calibctl status
# live. Ctrl-C stops everything. `run.sh --seconds N` stops after N seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=0
[ "${1:-}" = "--seconds" ] && seconds=${2:?}
scripts/deps.sh
dir=$(scripts/build.sh plain)
state=build/run-state
mkdir -p "$state"
pids=()
stop() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop EXIT
trap 'exit 0' INT TERM

"$dir/calibd" --state-dir "$state" 2> "$state/calibd.log" &
pids+=($!)
"$dir/calibctl" ping --timeout 5 > /dev/null ||
    { echo "calibd did not start:"; cat "$state/calibd.log"; exit 1; }
# predictions at 2000/s in batches of 100; labels follow 3 s later, 2% never
"$dir/examples/simulate" --model sim --k 10 --temperature 2 --rate 2000 --batch 100 --count 0 \
    --label-delay 3 --label-drop 0.02 --seed 7 2> "$state/simulate.log" &
pids+=($!)

echo "calibd on its defaults (log: $state/calibd.log), fed by examples/simulate; Ctrl-C stops."
start=$(date +%s)
while :; do
    sleep 2
    "$dir/calibctl" status sim 2>/dev/null | python3 scripts/live_status.py sim || true
    if [ "$seconds" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$seconds" ]; then
        break
    fi
done
