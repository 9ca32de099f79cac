#!/usr/bin/env bash
# bench_snapshot.sh [BUILD_DIR] — what snapshots cost: MODELS models (K =
# 10, default ring and reservoir of 10,000) get PAIRS pairs each, and as
# many predictions whose labels never come wait in the join tables; then
# calibd writes a snapshot every second while one more model is fed at full
# speed. Reported from /metrics after SNAPS snapshots: the longest the loop
# packed without taking a message (calibd_snapshot_slice_max_seconds), a
# snapshot's duration to its file written (the worker's write included),
# its size, the resident memory before the snapshots and the most while
# they ran; and the restore time at the next start.
# Run: tests/bench/bench_snapshot.sh build/plain   (MODELS=50 PAIRS=10000 SNAPS=5)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-build/plain}" && pwd)
models=${MODELS:-50} pairs=${PAIRS:-10000} snaps=${SNAPS:-5}
work=$(mktemp -d)
printf '[daemon]\nsnapshot_interval = 1\ntick = 0.2\n[defaults]\nform = logits\nk = 10\n' \
    > "$work/calibd.conf"
pid=
start() {
    rm -f "$work/endpoints"
    "$dir/calibd" -c "$work/calibd.conf" --ingest 'tcp://127.0.0.1:*' \
        --ingest-pull 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
        --control 'tcp://127.0.0.1:*' --http 127.0.0.1:0 --state-dir "$work" \
        --log-level info 2> "$work/log" &
    pid=$!
    until [ -s "$work/endpoints" ]; do sleep 0.05; done
    pull=$(awk '$1 == "ingest_pull" {print $2}' "$work/endpoints")
    ctl=$(awk '$1 == "control" {print $2}' "$work/endpoints")
    http=$(awk '$1 == "http" {print $2}' "$work/endpoints")
    http=${http%/metrics}
    "$dir/calibctl" ping --control "$ctl" > /dev/null
}
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
start
metric() { curl -s "$http/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
sims=()
for i in $(seq "$models"); do
    "$dir/examples/simulate" --push --endpoint ">$pull" --model "m$i" --seed "$i" \
        --count "$pairs" --batch 100 --label-delay 1 --label-drop 1 \
        --warmup-ms 0 --linger-ms 5000 2> /dev/null &
    sims+=($!)
    # and as many pairs with inline outcomes: statistics, ring, reservoir
    "$dir/examples/simulate" --push --endpoint ">$pull" --model "m$i" --seed "$((i + 100000))" \
        --count "$pairs" --batch 100 --warmup-ms 0 --linger-ms 5000 2> /dev/null &
    sims+=($!)
    if [ ${#sims[@]} -ge 8 ]; then
        wait "${sims[@]}"
        sims=()
    fi
done
[ ${#sims[@]} -eq 0 ] || wait "${sims[@]}"
"$dir/examples/simulate" --push --endpoint ">$pull" --model busy --count 0 --batch 100 \
    2> /dev/null &
sim=$!
# the peak resident memory from here on: the snapshots' share
echo 5 > "/proc/$pid/clear_refs"
rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
w0=$(metric calibd_snapshot_writes_total)
until [ "$(metric calibd_snapshot_writes_total)" -ge $((w0 + snaps)) ]; do sleep 0.2; done
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
echo "models: $(metric calibd_snapshot_models), snapshot bytes: $(metric calibd_snapshot_bytes)"
echo "resident before the snapshots: $((rss0 / 1024)) MB; the most while they ran: $((hwm / 1024)) MB"
echo "longest loop slice packing: $(metric calibd_snapshot_slice_max_seconds) s"
echo "last snapshot, packing to written: $(metric calibd_snapshot_duration_seconds) s"
kill "$sim"
kill -TERM "$pid"
wait "$pid" || true
t0=$(date +%s.%N)
start
t1=$(date +%s.%N)
grep "snapshot: restored" "$work/log" | sed 's/^[^ ]* //'
python3 -c "import sys; print(f'start with restore (to ping): {float(sys.argv[2]) - float(sys.argv[1]):.2f} s')" "$t0" "$t1"
