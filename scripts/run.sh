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
"$dir/examples/simulate" --model sim --k 10 --temperature 2 --rate 2000 --batch 100 \
    --label-delay 3 --label-drop 0.02 --seed 7 2> "$state/simulate.log" &
pids+=($!)

echo "calibd on its defaults (log: $state/calibd.log), fed by examples/simulate; Ctrl-C stops."
start=$(date +%s)
while :; do
    sleep 2
    "$dir/calibctl" status sim 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
m = r["models"].get("sim")
if not m or m.get("raw") is None:
    print("waiting for the first labelled predictions..."); sys.exit()
def est(e):
    ci = e["ci"] or [float("nan")] * 2
    return f"{e[\"mean\"]:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]"
raw, win, j = m["raw"], m["window"]["raw"], m["join"]
print(f"\n{r[\"messages\"]} messages  predictions {m[\"predictions\"]}  labels {m[\"labels\"]}  "
      f"scored {m[\"scored\"]}  waiting {j[\"waiting_predictions\"]}  rejected {sum(m[\"rejected\"].values())}")
print(f"  upper bound U (mean Brier)  {est(raw[\"brier\"])}   RBS {raw[\"rbs\"]:.4f}")
print(f"  mean log score              {est(raw[\"log\"])}")
print(f"  window: U {est(win[\"brier\"])}   ECE {win[\"ece\"]:.4f} (binned lower bound)")
print(f"  cumulative ECE {raw[\"ece\"]:.4f}  TCE2 {raw[\"tce2\"]:.4f}   parameters: {m[\"params\"][\"method\"]} v{m[\"params\"][\"version\"]}")
'
    if [ "$seconds" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$seconds" ]; then
        break
    fi
done
