#!/usr/bin/env bash
# capacity.sh — a join just past its capacity degrades, never collapses.
# max_pending = 1000, predictions at 2,100/s with their labels 0.5 s late:
# 1,050 would wait, 5% more than the table holds. Before, each orphan label
# (its prediction evicted) evicted the prediction whose label came next, and
# nothing joined; now the table keeps a uniform sample of ids, and most of
# what its capacity allows joins (tests/bench/bench_join_load has the exact
# figures, >= 95%; the check asks for 80%). What sets the load is the
# order of the stream, not calibd's speed: the simulator sends each label
# 1,050 predictions after its own, however it is scheduled (its labels keep
# to the rate's timetable and its order), and PUSH to the PULL socket drops
# nothing, however slowly calibd reads. The sample, and what it dropped,
# show in status and on /metrics.
. "$(dirname "$0")/lib.sh"

cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
ingest_pull = tcp://127.0.0.1:*
[defaults]
form = logits
k = 10
max_pending = 1000
EOF2
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0
COUNT=8400 # 4 s at 2,100/s
"$SIMULATE" --push --endpoint ">$PULL" --linger-ms "$LINGER_MS" --model m --seed 3 --count $COUNT \
    --rate 2100 --batch 30 --label-delay 0.5 2> "$work/sim.err" ||
    bad "the simulator ran: $(cat "$work/sim.err")"
wait_for "$work/s.json" "r['models']['m']['labels'] == $COUNT and r['models']['m']['join']['waiting_predictions'] == 0" ||
    bad "every label is in"
scored=$(json_get "$work/s.json" "r['models']['m']['scored']")
read -r sample out_p out_l evicted <<< "$(json_get "$work/s.json" \
    "' '.join(str(j.get(k)) for j in [r['models']['m']['join']] for k in ('sample', 'sampled_out_predictions', 'sampled_out_labels', 'evicted'))")"
echo "# $scored of $COUNT pairs joined; sample $sample; sampled out: $out_p predictions, $out_l labels; evicted $evicted"
# capacity allows 1000 / 1050 of the pairs
check "5% over capacity, the join keeps most of what capacity allows ($scored of $COUNT pairs)" \
    '"$PY" -c "import sys; sys.exit(not $scored >= 0.8 * $COUNT * 1000 / 1050)"'
# items are sampled out only while the sample is less than all: counts,
# not a reading taken at the right moment, show that it sampled
check "over capacity it kept a sample: what it dropped counted, nothing evicted" \
    '"$PY" -c "import sys; sys.exit(not ($out_p > 0 and $out_l > 0 and $evicted == 0))"'
# the last 1,050 labels come after the last prediction: a table's worth of
# arrivals with the table emptying, and the sample grows back to all
check "the sample grows back to all once the load has passed ($sample)" '[ "$sample" = 1 ]'
# /metrics is the text of the last rendering round, which may predate the
# last labels (the sample grows back with them): scraped until it shows
# what the status above showed
sample_exported() {
    curl -sS --max-time "$(scaled 5)" "$HTTP" > "$work/metrics.txt" &&
        grep -q "^calibd_join_sample_fraction{model=\"m\"} 1$" "$work/metrics.txt" &&
        grep -q "^calibd_join_sampled_out_total{model=\"m\",kind=\"prediction\"} [1-9]" "$work/metrics.txt"
}
check "/metrics has the sample and what it dropped" 'wait_until sample_exported'
check "calibd stops cleanly" "stop_calibd"
finish
