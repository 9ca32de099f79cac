#!/usr/bin/env bash
# fuzz.sh [TARGET...] — runs the libFuzzer targets of tests/fuzz (protocol,
# pubmsg, control, cfg, csv, snapshot, json; all by default), each for
# FUZZ_SECONDS (20) over a fresh copy of its seeds (tests/fuzz/corpus/T).
# One TAP check per target (tests/integ/tap.sh): ok when it ran its time
# without a crash, a leak, a timeout or running out of memory; else not ok,
# with the end of its log and the input that did it, kept in
# BUILDDIR/tests/fuzz/work/T/ (crash-*, leak-*, timeout-*, oom-*).
#
# `make check` runs it (configure --enable-fuzzing CC=clang); for long:
#     make fuzz FUZZ_SECONDS=3600 [FUZZ_JOBS=2] [FUZZ_TARGETS_RUN="cfg csv"]
# or tests/fuzz/fuzz.sh with BUILDDIR (the build tree) and srcdir (the
# source tree) in the environment. The corpus a run grows stays in
# BUILDDIR/tests/fuzz/work/T/corpus; see README.md to fold it into the
# seeds. FUZZ_JOBS targets run at once (1); FUZZ_NICE (10) lowers their
# priority, so that the timed tests running beside them in `make -j check`
# keep their CPU; FUZZ_ARGS adds libFuzzer options.
set -u
here=$(cd "$(dirname "$0")" && pwd)
srcdir=${srcdir:-$here/../..}
BUILDDIR=${BUILDDIR:-.}
. "$srcdir/tests/integ/tap.sh"
seconds=${FUZZ_SECONDS:-20}
jobs=${FUZZ_JOBS:-1}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(protocol pubmsg control cfg csv snapshot json)
root="$BUILDDIR/tests/fuzz/work"
mkdir -p "$root" || exit 1
root=$(cd "$root" && pwd)
# leaks are errors; a crash's stack, symbolised
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# run TARGET: fuzzes in root/TARGET, the result in root/TARGET/status
run() {
    local t=$1 bin="$BUILDDIR/tests/fuzz/fuzz_$1" w="$root/$1"
    rm -rf "$w"
    mkdir -p "$w/corpus"
    cp "$srcdir/tests/fuzz/corpus/$t"/* "$w/corpus/" 2>/dev/null
    # libFuzzer's scratch files go to the run's own directory
    (cd "$w" && TMPDIR="$w" nice -n "${FUZZ_NICE:-10}" "$bin" \
        -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$w/" ${FUZZ_ARGS:-} corpus \
        > "$w/log" 2>&1)
    echo $? > "$w/status"
}

# report TARGET: one TAP line, with figures from libFuzzer's final stats
report() {
    local t=$1 w="$root/$1"
    local rc artifacts stats
    rc=$(cat "$w/status" 2>/dev/null || echo 127)
    artifacts=$(cd "$w" && ls -d crash-* leak-* timeout-* oom-* slow-unit-* 2>/dev/null | grep -v slow-unit)
    stats=$(awk '/^stat::number_of_executed_units:/ {r = $2}
                 /^stat::average_exec_per_sec:/ {s = $2}
                 /(INITED|NEW|REDUCE|pulse|DONE)[ \t]+cov:/ {
                     for (i = 1; i < NF; i++) {
                         if ($i == "cov:") c = $(i + 1); if ($i == "ft:") f = $(i + 1)
                         if ($i == "corp:") { split($(i + 1), a, "/"); n = a[1] } } }
                 END { printf "%s runs, %s/s, cov %s, ft %s, corpus %s", r, s, c, f, n }' "$w/log")
    if [ "$rc" -eq 0 ] && [ -z "$artifacts" ]; then
        ok "$t: $seconds s, $stats"
    else
        bad "$t: exit $rc${artifacts:+, input kept: $w/$artifacts}
$(grep -m1 '^INFO: Seed:' "$w/log")
$(grep -v '^#[0-9]' "$w/log" | tail -60)"
    fi
}

for t in "${targets[@]}"; do
    if [ ! -x "$BUILDDIR/tests/fuzz/fuzz_$t" ]; then
        echo "Bail out! no $BUILDDIR/tests/fuzz/fuzz_$t (configure --enable-fuzzing CC=clang)"
        exit 1
    fi
done
running=0
for t in "${targets[@]}"; do
    run "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait
for t in "${targets[@]}"; do
    report "$t"
done
finish
