#!/usr/bin/env bash
# bench_ingest.sh [BUILD_DIR] — calibd's ingest throughput: examples/simulate
# pushes N predictions (K = 10, float32 bins, batches of 1000) to calibd's
# PULL socket (back-pressure, so nothing is dropped); the time runs until
# `calibctl status` shows every pair scored. Three cases: outcomes inline (no
# join); labels sent as separate messages (every pair goes through the join
# table); and inline again for a model whose stored parameters (T = 1.5) are
# not the identity, so the calibrated view is computed and scored apart.
# Run: tests/bench/bench_ingest.sh build/plain
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-build/plain}" && pwd)
n=${N:-1000000}
work=$(mktemp -d)
printf 'version 1\nmethod temperature\nparam T 1.5\n' > "$work/model.calibrated.params"
"$dir/calibd" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' \
    --publish 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' --http off \
    --state-dir "$work" --log-level warn 2> "$work/log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$work"' EXIT
until [ -s "$work/endpoints" ]; do sleep 0.05; done
pull=$(awk '$1 == "ingest_pull" {print $2}' "$work/endpoints")
ctl=$(awk '$1 == "control" {print $2}' "$work/endpoints")
"$dir/calibctl" ping --control "$ctl" > /dev/null

scored() {
    "$dir/calibctl" status --control "$ctl" "$1" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["models"][sys.argv[1]]["scored"])' "$1" ||
        echo 0
}

bench() {
    local model=$1
    shift
    local t0=$(date +%s.%N)
    "$dir/examples/simulate" --push --endpoint ">$pull" --model "$model" --count "$n" \
        --batch 1000 --k 10 --encoding f32 "$@" 2> /dev/null
    until [ "$(scored "$model")" -ge "$n" ]; do sleep 0.02; done
    local t1=$(date +%s.%N)
    python3 -c "import sys; t=float(sys.argv[2])-float(sys.argv[1]); print(f'$model: {$n} pairs in {t:.2f} s: {$n/t:,.0f} pairs/s')" "$t0" "$t1"
}

bench inline                     # y in the prediction messages
bench joined --label-shuffle     # labels as separate messages, joined by id
bench calibrated                 # y inline; T = 1.5 applied for the calibrated view
