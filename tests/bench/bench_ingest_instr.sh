#!/usr/bin/env bash
# bench_ingest_instr.sh [BUILD_DIR] — instructions calibd's ingest path
# (ingest_on_message and all it calls) executes for N pairs (default
# 100,000; K = 10, float32 bins, batches of 1000, PUSH -> PULL; K=, BATCH=
# set others: BATCH=1 is the row form), counted by
# callgrind, so that the figure does not depend on the machine's load. Two
# cases: outcomes inline with identity parameters, and outcomes inline for
# a model whose stored parameters (T = 1.5) are applied, so both views are
# scored; and inline again for a model warmed up first (its first 20,000
# pairs not counted) until its miscalibration trigger tests a challenger,
# so each pair is also scored under the challenger: the trigger's cost is
# that case's count less the first's; and a fourth whose labels come 0.2 s
# after their predictions (the join path). Needs valgrind (Debian's
# valgrind package).
# Run: tests/bench/bench_ingest_instr.sh build/plain
# CONF=FILE passes calibd a configuration: a capability's cost is the
# count on the defaults less the count with it off, from one build. On the
# defaults the counts of one build move by several per cent from run to
# run: the closed loop's trigger fits a challenger in its worker and tests
# it on the pairs that come after, and how many that are depends on the
# threads' timing. STILL=1 holds the loop still (miscal_trigger = no,
# drift = no, on top of CONF; the warmed case, which needs the trigger, is
# left out): the counts then repeat to 0.1%, and a capability's cost is
# the difference of two such runs. KEEP=DIR keeps each case's callgrind
# profile as DIR/cg.CASE (callgrind_annotate --inclusive=yes DIR/cg.joined
# shows where a pair's instructions go); CASES="joined" runs some cases.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-build/plain}" && pwd)
n=${N:-100000} k=${K:-10} batch=${BATCH:-1000}
work=$(mktemp -d)
# calibd writes its state at exit: wait for it before removing its directory
trap '[ -n "${pid:-}" ] && { kill $pid; wait $pid; } 2>/dev/null; rm -rf "$work"' EXIT
printf 'version 1\nmethod temperature\nparam T 1.5\n' > "$work/model.calibrated.params"
cases="inline calibrated warmed joined"
if [ "${STILL:-0}" = 1 ]; then
    { [ -n "${CONF:-}" ] && cat "$CONF"; printf '\n[defaults]\nmiscal_trigger = no\ndrift = no\n'; } \
        > "$work/still.conf"
    CONF=$work/still.conf
    cases="inline calibrated joined"
fi
cases=${CASES:-$cases}
# calibd in the build tree is libtool's wrapper: valgrind the program
"$dir/libtool" --mode=execute valgrind --tool=callgrind --toggle-collect=ingest_on_message \
    --callgrind-out-file="$work/cg.out" \
    "$dir/calibd" ${CONF:+-c "$CONF"} --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' \
    --publish 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' --http off \
    --state-dir "$work" --log-level warn 2> "$work/log" &
pid=$!
until [ -s "$work/endpoints" ]; do sleep 0.1; done
pull=$(awk '$1 == "ingest_pull" {print $2}' "$work/endpoints")
ctl=$(awk '$1 == "control" {print $2}' "$work/endpoints")

scored() {
    "$dir/calibctl" status --timeout 30 --control "$ctl" "$1" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["models"][sys.argv[1]]["scored"])' "$1" ||
        echo 0
}

# One case at a time: each dump holds the counts since the last one.
count() {
    callgrind_control --dump "$pid" > /dev/null 2>&1
    local f
    f=$(ls -t "$work"/cg.out* | head -1)
    [ -n "${KEEP:-}" ] && cp "$f" "$KEEP/cg.$model"
    callgrind_annotate --inclusive=yes "$f" 2> /dev/null |
        awk '/ingest_on_message/ && !done {gsub(",", "", $1); print $1; done = 1}'
}

trigger_state() {
    "$dir/calibctl" status --timeout 30 --control "$ctl" "$1" 2>/dev/null |
        python3 -c 'import json,sys; t=json.load(sys.stdin)["models"][sys.argv[1]]["loop"]["trigger"]; print(t["state"] if t else "off")' "$1" ||
        echo none
}

for model in $cases; do
    extra=()
    # joined: the labels come after their predictions (0.2 s), so each
    # prediction waits in the join table, as in production
    [ "$model" = joined ] && extra=(--label-delay 0.2 --flush-labels-now)
    if [ "$model" = warmed ]; then
        "$dir/examples/simulate" --push --endpoint ">$pull" --model "$model" --count 20000 \
            --batch "$batch" --k "$k" --encoding f32 --seed 2 --linger-ms 600000 2> /dev/null
        until [ "$(trigger_state "$model")" = testing ]; do sleep 0.2; done
        count > /dev/null # the warm-up's counts are not this case's
        n0=$(scored "$model")
    else
        n0=0
    fi
    # calibd under callgrind drains slowly: the sender waits until its
    # queue is delivered (the default linger, 2 s, would drop its tail)
    "$dir/examples/simulate" --push --endpoint ">$pull" --model "$model" --count "$n" \
        --batch "$batch" --k "$k" --encoding f32 --linger-ms 600000 "${extra[@]}" 2> /dev/null
    until [ "$(scored "$model")" -ge $((n0 + n)) ]; do sleep 0.2; done
    ir=$(count)
    echo "$model: $(( ir / n )) instructions a pair ($ir for $n pairs)"
done
