#!/usr/bin/env bash
# budget.sh — every capability within its cost budget (issue 41): calibd
# under callgrind (instructions, which do not depend on the machine's load),
# fed the same pre-encoded messages as bench_floor.sh (bench_rate send:
# float32 logits, PUSH -> PULL), four cases: K = 10 rows, K = 10 batches of
# 64, K = 1000 rows (outcomes inline), and K = 10 batches of 64 whose labels
# come in messages of their own (the join). Each model has stored
# parameters (T = 1.5), so both views are scored. calibd runs on its
# defaults but for the two capabilities whose per-pair work depends on
# threads' timing (the miscalibration trigger's challenger and the drift
# detector's refits: BENCHMARKS.md, "What the estimates cost a pair"), and
# periodic snapshots. Each capability's instructions a pair
# (tests/integ/budget.py: the inclusive counts of the functions that do it)
# must be within its budget in tests/budget.tsv plus 10%. The budgets were
# measured with the AVX2 builds of the vector kernels (CALIB_CLONES): on a
# CPU without AVX2 other code runs, and the check is skipped.
. "$(dirname "$0")/lib.sh"
[ "${CALIB_SANITIZERS:-no}" = yes ] && skip_all "under the sanitizers (their instructions are not calibd's)"
command -v valgrind > /dev/null && command -v callgrind_annotate > /dev/null ||
    skip_all "no valgrind (Debian's valgrind package)"
grep -qw avx2 /proc/cpuinfo || skip_all "no AVX2: the budgets count the AVX2 kernels"
# the budgets are a toolchain's counts: its compiler, flags and libraries
# (glibc's exp and memcpy, libzmq, msgpack-c) are in budget.tsv's first
# line; another toolchain skips, saying what to record
toolchain() {
    printf '%s; CFLAGS %s; %s; libzmq %s; msgpack-c %s\n' "$("${CALIB_CC:-cc}" --version | head -1)" \
        "${CALIB_CFLAGS:-}" "$(ldd --version | head -1)" \
        "$(dpkg-query -W -f='${Version}' libzmq5 2> /dev/null)" \
        "$(dpkg-query -W -f='${Version}' libmsgpackc2 2> /dev/null)"
}
here=$(toolchain)
counted=$(sed -n 's/^# toolchain: //p' "$srcdir/tests/budget.tsv")
# CALIB_BUDGET_RECORD=FILE: this run's counts, as a new tests/budget.tsv's lines
[ -z "${CALIB_BUDGET_RECORD:-}" ] || echo "# toolchain: $here" > "$CALIB_BUDGET_RECORD"
[ "$here" = "$counted" ] || [ -n "${CALIB_BUDGET_RECORD:-}" ] ||
    skip_all "budgets counted with '$counted', this build is '$here' (CALIB_BUDGET_RECORD=FILE records new ones)"
rate=$BUILDDIR/tests/bench/bench_rate
[ -x "$rate" ] || { echo "Bail out! no $rate (make check builds it)"; exit 1; }

# calibd as callgrind runs it, counting ingest_on_message and what it calls
cat > "$work/calibd-cg" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --toggle-collect=ingest_on_message \
    --callgrind-out-file='$work/cg.out' '$CALIBD' "\$@"
EOF
chmod +x "$work/calibd-cg"
mkdir -p "$work/state"
cases="k10-b1 k10-b64 k1000-b1 k10-b64-joined"
for c in $cases; do
    printf 'version 1\nmethod temperature\nparam T 1.5\n' > "$work/state/model.$c.params"
done
printf '[daemon]\nsnapshot_interval = 0\n[defaults]\nmiscal_trigger = no\ndrift = no\nlabel_free_interval = 30\n' \
    > "$work/calibd.conf"
CALIBD=$work/calibd-cg start_calibd -c "$work/calibd.conf"

# poll_scored MODEL N: its pairs scored are N and its label-free figures
# have been updated once (a poll a second: a status of a K = 1000 model
# under callgrind costs seconds, and holds the loop meanwhile)
scored_is() {
    [ "$(json_get "$work/s.json" "(lambda m: m.get('scored') == $2 and ((m.get('label_free') or {}).get('figures_seen') or 0) > 0)(r['models'].get('$1', {}))")" = True ]
}
poll_scored() {
    local end=$((SECONDS + $(scaled 300)))
    while [ "$SECONDS" -lt "$end" ]; do
        status "$1" > "$work/s.json" 2> /dev/null && scored_is "$1" "$2" && return 0
        nap 1
    done
    return 1
}
# dump: the counts since the last dump, in a file of their own; prints its name
dump() {
    local before
    before=$(ls "$work"/cg.out.* 2> /dev/null | wc -l)
    callgrind_control --dump "$calibd_pid" > /dev/null 2>&1
    wait_until "[ \$(ls '$work'/cg.out.* 2> /dev/null | wc -l) -gt $before ]"
    ls -t "$work"/cg.out.* | head -1
}

for c in $cases; do
    IFS=- read -r k b joined <<< "$c"
    k=${k#k} b=${b#b}
    case $k in 1000) n=1000 ;; *) n=$((b == 1 ? 4000 : 12800)) ;; esac
    labels=()
    [ -n "$joined" ] && labels=(--labels)
    # a warm-up of n / 4 pairs first, not counted: the model made, its
    # label-free figures updated once (their corrected sums then go with
    # each prediction), so that the counts do not depend on when the
    # first update comes (the first comes at the first tick after a
    # prediction). label_free_interval = 30: an update's EM over a ring of
    # K = 1000 records under callgrind takes seconds of the loop, which at
    # a shorter interval starved the ingest of a loaded machine
    warm=$((n / 4 / b * b))
    "$rate" send --endpoint "$PULL" --model "$c" --k "$k" --batch "$b" --count "$warm" \
        "${labels[@]}" > /dev/null
    check "$c: a warm-up of $warm pairs scored" "poll_scored $c $warm"
    dump > /dev/null
    "$rate" send --endpoint "$PULL" --model "$c" --k "$k" --batch "$b" --count "$n" \
        --first $((warm + 1)) "${labels[@]}" > /dev/null
    check "$c: $n pairs scored" "poll_scored $c $((warm + n))"
    profile=$(dump)
    python3 "$srcdir/tests/integ/budget.py" measure "$profile" "$n" > "$work/$c.counts" ||
        : > "$work/$c.counts" # nothing counted: the check below fails
    [ -z "${CALIB_BUDGET_RECORD:-}" ] || grep -v "^growth " "$work/$c.counts" | sed "s/^/$c /" >> "$CALIB_BUDGET_RECORD"
    check "$c: every capability within its budget + 10% (tests/budget.tsv)
$(python3 "$srcdir/tests/integ/budget.py" check "$c" "$work/$c.counts" "$srcdir/tests/budget.tsv")" \
        "python3 '$srcdir/tests/integ/budget.py' check '$c' '$work/$c.counts' '$srcdir/tests/budget.tsv' > /dev/null"
done
check "calibd stops cleanly" "stop_calibd"
finish
