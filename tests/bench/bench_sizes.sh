#!/usr/bin/env bash
# bench_sizes.sh [BUILD_DIR] — `calibctl sizes` on 10^5 rows with K = 10
# (100 subsamples at each default size, tests/cli/sizes_cli.sh's large
# file): wall time, CPU time and peak memory of three runs.
# Run: tests/bench/bench_sizes.sh build/plain
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/plain}
f=$(mktemp /tmp/calibd-bench-XXXXXX.csv)
trap 'rm -f "$f"' EXIT
/usr/bin/python3 - "$f" <<'PY'
import random, sys
r = random.Random(1)
with open(sys.argv[1], "w") as f:
    f.write("y," + ",".join("z%d" % k for k in range(10)) + "\n")
    f.write("\n".join("%d," % r.randrange(10) + ",".join("%.4f" % r.gauss(0, 1.5) for _ in range(10))
                      for _ in range(100000)) + "\n")
PY
echo "file: $(wc -l < "$f") lines, $(du -m "$f" | cut -f1) MiB"
for i in 1 2 3; do
    /usr/bin/time -f "run $i: %e s wall, %U s user, %M KiB peak RSS" "$dir/calibctl" sizes "$f" > /dev/null
done
