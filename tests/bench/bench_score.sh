#!/usr/bin/env bash
# bench_score.sh [BUILD_DIR] — `calibctl score` on 10^6 rows with K = 10:
# wall time and peak memory. Run: tests/bench/bench_score.sh build/plain
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/plain}
f=$(mktemp /tmp/calibd-bench-XXXXXX.csv)
trap 'rm -f "$f"' EXIT
python3 examples/make_example.py --n 1000000 --k 10 --seed 1 > "$f"
echo "file: $(wc -l < "$f") lines, $(du -m "$f" | cut -f1) MiB"
for i in 1 2 3; do
    /usr/bin/time -f "run $i: %e s wall, %M KiB peak RSS" "$dir/calibctl" score "$f" > /dev/null
done
