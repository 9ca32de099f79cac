#!/bin/sh
# timed.sh TEST [ARGS...] — the tests' LOG_COMPILER (Makefile.am): runs TEST
# as it would have run, then appends "SECONDS TEST" to test-times in the
# current directory (the build tree's top, where make check runs tests).
# scripts/test.sh prints the slowest. One short line a write: appends from
# tests running side by side do not interleave.
start=$(date +%s.%N)
"$@"
rc=$?
end=$(date +%s.%N)
awk -v a="$start" -v b="$end" -v t="$1" 'BEGIN { sub(/^(\.\.\/)+/, "", t); printf "%.1f %s\n", b - a, t }' >> test-times
exit $rc
