#!/usr/bin/env bash
# segments.sh — calibration per segment, one scenario. Model "seg" is
# calibrated as a whole but three of its 40 values of segment key
# "segment" are overconfident (labels from softmax(z / 2)), and labels come
# 0.2 s after their predictions: the segments must travel through the join
# table. calibd flags exactly those three, alerts once for each
# (segment_miscalibrated, naming the segment), exports the worst in
# /metrics, keeps the flags and figures across kill -9 (snapshot), and
# counts a bad "seg" map as bad_segment without losing the next message.
. "$(dirname "$0")/lib.sh"

make_sink
cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
snapshot_interval = 0.5
alert_exec = $work/sink.sh
ingest_pull = tcp://127.0.0.1:*
[defaults]
miscal_trigger = no
segment_metrics = 5
EOF2
start_calibd -c "$work/calibd.conf" --log-level info --http 127.0.0.1:0
"$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 100 --count 20000 \
    --sigma 3 --segments 40 --miscal-segments 3 --label-delay 0.2 --model seg \
    --dump "$work/pairs.csv" 2> /dev/null

seg() { echo "r['models']['seg']['segments']['by_key']['segment']"; }
flagged() { json_get "$1" "' '.join(sorted(s['value'] for s in $(seg)['segments'] if s.get('flagged')))"; }
check "all 20000 pairs scored, through the join table" \
    'wait_for "$work/s.json" "r[\"models\"][\"seg\"][\"scored\"] == 20000 and r[\"models\"][\"seg\"][\"scored_inline\"] == 0"'
check "exactly the three overconfident values are flagged" \
    'wait_for "$work/s.json" "$(seg)[\"flagged\"] >= 3" && [ "$(flagged "$work/s.json")" = "v0 v1 v2" ]'
check "they rank first (by the lower end of |confidence - accuracy|), each of 40 values tracked" \
    '[ "$(json_get "$work/s.json" "sorted(s[\"value\"] for s in $(seg)[\"segments\"][:3]) == [\"v0\", \"v1\", \"v2\"] and $(seg)[\"tracked\"] == 40 and all(s[\"gap_lo\"] > 0.05 for s in $(seg)[\"segments\"][:3])")" = True ]'
check "the model as a whole looks calibrated (ECE under 0.03)" \
    '[ "$(json_get "$work/s.json" "r[\"models\"][\"seg\"][\"calibrated\"][\"ece\"] < 0.03")" = True ]'
check "one segment_miscalibrated alert each, naming the segment" \
    'wait_until "[ \$(grep -c segment_miscalibrated \"$work/alerts.jsonl\") -eq 3 ]" &&
     for v in v0 v1 v2; do grep segment_miscalibrated "$work/alerts.jsonl" | grep -q "segment=$v " || exit 1; done'
metrics=$(curl -sS "$HTTP") # the metrics URL
check "/metrics: the 5 worst values of the key and (other), flags counted" \
    '[ "$(grep -c "^calibd_segment_pairs{model=\"seg\"" <<<"$metrics")" -eq 6 ] &&
     grep -q "^calibd_segment_flagged_total{model=\"seg\",key=\"segment\"} 3" <<<"$metrics" &&
     grep -q "^calibd_segment_flagged{model=\"seg\",key=\"segment\",value=\"v1\"} 1" <<<"$metrics"'

# a bad seg map: counted, the message after it taken
send_py "$PULL" <<'PY'
send("seg", {"v": 1, "type": "pred", "id": "bad", "p": 0.5, "seg": {"a b": "x"}})
send("seg", {"v": 1, "type": "pred", "id": "bad2", "seg": {"segment": "v7"},
             "logits": [0.0] * 10, "y": 3})
PY
check "a bad seg map is rejected as bad_segment; the next message is scored" \
    'wait_for "$work/s.json" "r[\"models\"][\"seg\"][\"rejected\"].get(\"bad_segment\") == 1 and r[\"models\"][\"seg\"][\"scored\"] == 20001"'

# kill -9 after a snapshot that holds them: flags and figures come back
json_get "$work/s.json" "[(s['value'], s['pairs'], s.get('flagged')) for s in $(seg)['segments']]" > "$work/before"
# snapped: a snapshot on disk holds every pair
snapped() {
    "$CALIBCTL" snapshot "$work/state/snapshot" seg > "$work/snap.json" 2> /dev/null &&
        [ "$(json_get "$work/snap.json" "r['models']['seg']['scored'] == 20001")" = True ]
}
check "a snapshot holds every pair" 'wait_until snapped'
kill -KILL "$calibd_pid"
wait "$calibd_pid" 2>/dev/null
calibd_pid=
start_calibd -c "$work/calibd.conf" --log-level info --http 127.0.0.1:0
check "after kill -9: every value's pairs and flag as before" \
    'wait_for "$work/r.json" "r[\"models\"][\"seg\"][\"scored\"] == 20001" &&
     [ "$(json_get "$work/r.json" "[(s[\"value\"], s[\"pairs\"], s.get(\"flagged\")) for s in $(seg)[\"segments\"]]")" = "$(cat "$work/before")" ]'
check "no alert sent again for the flags restored" \
    'uptime_past 1 "$work/r.json" && [ "$(grep -c segment_miscalibrated "$work/alerts.jsonl")" -eq 3 ]'
check "calibd stops cleanly" "stop_calibd"
finish
