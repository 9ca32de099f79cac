#!/usr/bin/env bash
# bench_rss.sh [BUILD_DIR] — calibd's memory over a long run at full rate:
# SECONDS_TOTAL (default 600) of K = 10 predictions sent as fast as calibd
# takes them (bench_rate send in a loop, rows with outcomes inline to one
# model, batches of 64 joined by labels to another), VmRSS sampled every
# STEP (10) seconds; prints the curve and the growth from the first minute's
# end to the last sample. Memory must go flat once the rings, reservoirs
# and join tables have filled.
# Run: make -C build/plain tests/bench/bench_rate && tests/bench/bench_rss.sh build/plain
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-build/plain}" && pwd)
rate=$dir/tests/bench/bench_rate
[ -x "$rate" ] || make -C "$dir" tests/bench/bench_rate > /dev/null
total=${SECONDS_TOTAL:-600} step=${STEP:-10}
work=$(mktemp -d)
pid='' feeders=()
cleanup() {
    for f in "${feeders[@]}"; do kill "$f" 2> /dev/null || true; done
    [ -z "$pid" ] || kill "$pid" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
"$dir/calibd" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' \
    --publish 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' --http 127.0.0.1:0 \
    --state-dir "$work" --log-level warn 2> "$work/log" &
pid=$!
until [ -s "$work/endpoints" ]; do sleep 0.05; done
pull=$(awk '$1 == "ingest_pull" {print $2}' "$work/endpoints")
http=$(awk '$1 == "http" {print $2}' "$work/endpoints")
feed() { # MODEL COUNT ARGS...: sends until killed; ids go on from run to run
    local model=$1 n=$2 first=1
    shift 2
    while :; do
        "$rate" send --endpoint "$pull" --model "$model" --count "$n" --first "$first" "$@" \
            > /dev/null || return
        first=$((first + n))
    done
}
feed rows 1000000 --k 10 --batch 1 &
feeders+=($!)
feed joined 640000 --k 10 --batch 64 --labels &
feeders+=($!)
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
scored() { curl -s "$http" | awk '$1 ~ /^calibd_scored_total\{/ {s += $2} END {print s + 0}'; }
echo "seconds rss_kib scored"
t=0 ref=
while [ "$t" -lt "$total" ]; do
    sleep "$step"
    t=$((t + step))
    kill -0 "$pid" || { echo "calibd died"; tail "$work/log"; exit 1; }
    r=$(rss)
    [ "$t" -ne 60 ] || ref=$r
    echo "$t $r $(scored)"
done
last=$(rss)
[ -z "$ref" ] || echo "growth from 60 s to $total s: $((last - ref)) KiB"
