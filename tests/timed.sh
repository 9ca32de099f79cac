#!/bin/sh
# timed.sh TEST [ARGS...] — the tests' LOG_COMPILER (Makefile.am): runs TEST
# as it would have run, then appends "SECONDS TEST" to CALIB_TEST_TIMES
# (scripts/test.sh sets it), else to test-times in the current directory
# (the build tree's top, where make check runs tests).
# scripts/test.sh prints the slowest. One short line a write: appends from
# tests running side by side do not interleave.
#
# No test may hang the suite: TEST runs under timeout(1), which ends it and
# every process it started (its process group) after CALIB_TEST_CEILING
# seconds (900: six times the slowest test under the sanitizers), and kills
# what is left 20 s later. A test ended so fails with a line saying so; a
# script's TAP plan is then missing, and the driver counts it an error.
ceiling=${CALIB_TEST_CEILING:-900}
start=$(date +%s.%N)
timeout --kill-after=20 "$ceiling" "$@"
rc=$?
end=$(date +%s.%N)
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "Bail out! $1 did not end within $ceiling s (CALIB_TEST_CEILING): ended"
fi
awk -v a="$start" -v b="$end" -v t="$1" 'BEGIN { sub(/^(\.\.\/)+/, "", t); printf "%.1f %s\n", b - a, t }' >> "${CALIB_TEST_TIMES:-test-times}"
exit $rc
