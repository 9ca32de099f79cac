#!/bin/sh
# timed.sh TEST [ARGS...] — the tests' LOG_COMPILER (Makefile.am): runs TEST
# as it would have run, then appends "SECONDS CPU TEST" to CALIB_TEST_TIMES
# (CPU: the user and system seconds of TEST and of every process it waited
# for, daemons included; a loaded machine lengthens SECONDS, not CPU)
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
# the shell's `times`: its own line, then its children's "1m2.5s 0m3.1s"
# (run here, not in a pipe's subshell, which has no children)
t=$(mktemp) && times > "$t" &&
    cpu=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } print s }' "$t")
rm -f "$t"
awk -v a="$start" -v b="$end" -v c="${cpu:-0}" -v t="$1" 'BEGIN { sub(/^(\.\.\/)+/, "", t); printf "%.1f %.1f %s\n", b - a, c, t }' >> "${CALIB_TEST_TIMES:-test-times}"
exit $rc
