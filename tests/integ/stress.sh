#!/usr/bin/env bash
# stress.sh [-b BUILDDIR] [-j JOBS] [--no-hog] [N] [SCRIPT...] — the
# flakiness harness: runs the chosen test scripts (every script test of
# Makefile.am by default) N times (5), JOBS at a time (the cores, as make -j
# check does), with one core kept busy by `yes > /dev/null` unless --no-hog,
# through the build tree's own `make check` (its environment, its TAP
# driver). Prints each script's failed runs and, at the end, the scripts that
# failed at least once; keeps the log of every failed run in
# BUILDDIR/stress/ROUND-SCRIPT.log. Exits 1 when any run failed.
#
#     tests/integ/stress.sh 5                         # everything, 5 times
#     tests/integ/stress.sh -b build/sanitizers 10 tests/integ/sink.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
build=build/plain jobs=$(nproc) hog=yes
while [ $# -gt 0 ]; do
    case $1 in
        -b) build=${2:?}; shift 2 ;;
        -j) jobs=${2:?}; shift 2 ;;
        --no-hog) hog=no; shift ;;
        -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done
rounds=5
case ${1:-} in ''|*[!0-9]*) ;; *) rounds=$1; shift ;; esac
[ -f "$build/Makefile" ] || { echo "stress: no build in $build (scripts/build.sh plain)" >&2; exit 2; }
scripts=("$@")
[ ${#scripts[@]} -gt 0 ] || read -ra scripts <<< "$(make -s -C "$build" list-script-tests)"
out="$build/stress"
mkdir -p "$out"
hog_pid=
if [ $hog = yes ]; then
    yes > /dev/null &
    hog_pid=$!
fi
trap '[ -n "$hog_pid" ] && kill $hog_pid 2> /dev/null' EXIT
declare -A failures=()
runs=0 failed=0
for round in $(seq "$rounds"); do
    start=$SECONDS
    make -s -C "$build" -j"$jobs" check TESTS="${scripts[*]}" > "$out/round-$round.out" 2>&1
    bad=()
    for s in "${scripts[@]}"; do
        runs=$((runs + 1))
        trs="$build/${s%.sh}.trs"
        if [ ! -f "$trs" ] || grep -q '^:test-result: \(FAIL\|ERROR\)' "$trs"; then
            failed=$((failed + 1))
            failures[$s]=$(( ${failures[$s]:-0} + 1 ))
            cp "$build/${s%.sh}.log" "$out/$round-$(basename "${s%.sh}").log" 2> /dev/null
            bad+=("$(basename "$s"): $(grep -h '^not ok\|^Bail out' "$build/${s%.sh}.log" 2> /dev/null | head -3 | tr '\n' ' ')")
        fi
    done
    echo "round $round of $rounds: ${#scripts[@]} scripts in $((SECONDS - start)) s, ${#bad[@]} failed"
    for b in "${bad[@]}"; do echo "  $b"; done
done
echo "stress: ${#scripts[@]} scripts x $rounds rounds (hog: $hog, jobs: $jobs, $build): $runs runs, $failed failed"
for s in "${!failures[@]}"; do
    echo "  $s: failed ${failures[$s]} of $rounds"
done
[ "$failed" -eq 0 ]
