#!/usr/bin/env bash
# segments.sh — calibration per segment, one scenario. Model "seg" is
# calibrated as a whole but three of its 40 values of segment key
# "segment" are overconfident (labels from softmax(z / 2)), and labels come
# 0.2 s after their predictions: the segments must travel through the join
# table. calibd flags exactly those three, alerts once for each
# (segment_miscalibrated, naming the segment), exports the worst in
# /metrics, keeps the flags and figures across kill -9 (snapshot), and
# counts a bad "seg" map as bad_segment without losing the next message.
# With segment_refit = yes, more pairs give each of the three its own
# temperature (near 2), published in the params message, which a serving
# node (the Python Follower) applies to that segment's predictions only;
# the segments' parameters survive a restart with their version.
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
segment_refit = yes
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
# (/metrics is rendered in rounds beside the tick's pass, which flags: a
# scrape may show the tick before the status's; polled until it has them)
worst_prom() {
    curl -sS "$HTTP" > "$work/seg.prom" && # the metrics URL
        [ "$(grep -c "^calibd_segment_pairs{model=\"seg\"" "$work/seg.prom")" -eq 6 ] &&
        grep -q "^calibd_segment_flagged_total{model=\"seg\",key=\"segment\"} 3" "$work/seg.prom" &&
        grep -q "^calibd_segment_flagged{model=\"seg\",key=\"segment\",value=\"v1\"} 1" "$work/seg.prom"
}
check "/metrics: the 5 worst values of the key and (other), flags counted" 'wait_until worst_prom'

# a bad seg map: counted, the message after it taken
send_py "$PULL" <<'PY'
send("seg", {"v": 1, "type": "pred", "id": "bad", "p": 0.5, "seg": {"a b": "x"}})
send("seg", {"v": 1, "type": "pred", "id": "bad2", "seg": {"segment": "v7"},
             "logits": [0.0] * 10, "y": 3})
PY
check "a bad seg map is rejected as bad_segment; the next message is scored" \
    'wait_for "$work/s.json" "r[\"models\"][\"seg\"][\"rejected\"].get(\"bad_segment\") == 1 and r[\"models\"][\"seg\"][\"scored\"] == 20001"'

# values named like the other bucket: tracked as any value, and the other
# bucket still one, with a label no value can take
send_py "$PULL" <<'PY'
for v in ["other", "(other)", "v1"]:
    send("names", {"v": 1, "type": "pred", "id": v, "seg": {"segment": v},
                   "logits": [0.0] * 10, "y": 3})
PY
names() { echo "r['models']['names']['segments']['by_key']['segment']['segments']"; }
check "values \"other\" and \"(other)\" are values; the status's other bucket is one, value null" \
    'wait_for "$work/n.json" "r[\"models\"][\"names\"][\"scored\"] == 3" &&
     [ "$(json_get "$work/n.json" "sorted(str(s[\"value\"]) for s in $(names)) == [\"(other)\", \"None\", \"other\", \"v1\"] and [s[\"other\"] for s in $(names)] == [False] * 3 + [True]")" = True ]'
# (/metrics renders the tick's view: polled until it has the three pairs)
names_prom() {
    curl -sS "$HTTP" | grep '^calibd_segment_pairs{model="names"' > "$work/names.prom"
    [ "$(wc -l < "$work/names.prom")" -eq 4 ]
}
check "/metrics: four series of model names, none twice, the other bucket value=\"\"" \
    'wait_until names_prom &&
     [ -z "$(sed "s/}.*//" "$work/names.prom" | sort | uniq -d)" ] &&
     grep -q "value=\"\"}" "$work/names.prom" && grep -q "value=\"other\"}" "$work/names.prom" &&
     grep -q "value=\"(other)\"}" "$work/names.prom"'

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

# segment_refit: more of the stream; a serving node follows the versions
"$PY" - "$PUBLISH" "$work/follower.json" <<'PY' &
import json, sys, time
from calibd import Follower, LOGITS
with Follower(sys.argv[1], ["seg"]) as f:
    f.start()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and len(f.held("seg").segments) < 3:
        time.sleep(0.05)
    p = f.held("seg")
    z = [2.0, 0.5, -1.0, 0.0, 1.0, 0.3, -0.2, 1.5, -2.0, 0.1]
    out = {"version": p.version, "segments": [list(s[:2]) + [s[2][0]] for s in p.segments],
           "model": list(f.apply("seg", LOGITS, z)[1]),
           "v1": list(f.apply("seg", LOGITS, z, seg={"segment": "v1"})[1]),
           "v7": list(f.apply("seg", LOGITS, z, seg={"segment": "v7"})[1])}
    open(sys.argv[2], "w").write(json.dumps(out))
PY
follower=$!
track "$follower"
# (paced: a segment's fit waits for a tick, and its gate for pairs after
# it; the stream flows until the three versions are out, however long)
"$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 100 --count 0 \
    --rate 10000 --sigma 3 --segments 40 --miscal-segments 3 --label-delay 0.2 --model seg \
    --seed 2 2> /dev/null &
stream=$!
track "$stream"
segpar() { echo "r['models']['seg']['params']['segments']"; }
check "each of the three gets its own temperature, near 2, as versions 1 to 3" \
    'wait_for "$work/p.json" "len($(segpar)) == 3" 120 &&
     [ "$(json_get "$work/p.json" "sorted(s[\"value\"] for s in $(segpar)) == [\"v0\", \"v1\", \"v2\"] and all(1.5 < s[\"values\"][\"T\"] < 2.6 for s in $(segpar)) and r[\"models\"][\"seg\"][\"params\"][\"version\"] == 3")" = True ]'
check "no calibrated value got any" \
    '[ "$(json_get "$work/p.json" "sum(s[\"refit\"][\"fits\"] for s in $(seg)[\"segments\"][3:-1])")" = 0 ]'
check "the serving node applies a segment's temperature to its predictions only" \
    'wait_until "[ -s \"$work/follower.json\" ]" 120 && "$PY" - "$work/follower.json" "$work/p.json" <<'"'"'PY'"'"'
import json, math, sys
f = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
t = {s["value"]: s["values"]["T"] for s in r["models"]["seg"]["params"]["segments"]}
z = [2.0, 0.5, -1.0, 0.0, 1.0, 0.3, -0.2, 1.5, -2.0, 0.1]
def softmax(v, T):
    m = max(v); e = [math.exp((x - m) / T) for x in v]; s = sum(e); return [x / s for x in e]
assert f["version"] == 3, f
assert all(abs(a - b) < 1e-12 for a, b in zip(f["v1"], softmax(z, t["v1"]))), f
assert all(abs(a - b) < 1e-12 for a, b in zip(f["v7"], softmax(z, 1))), f
assert f["model"] == f["v7"], f
PY'
kill "$stream" 2> /dev/null
wait "$stream"
json_get "$work/p.json" "[(s['value'], s['values']['T']) for s in $(segpar)]" > "$work/segpar"
check "calibd stops cleanly" "stop_calibd"
start_calibd -c "$work/calibd.conf" --log-level info --http 127.0.0.1:0
check "restarted: version 3 and the segments' parameters, as stored" \
    'wait_for "$work/q.json" "r[\"models\"][\"seg\"][\"params\"][\"version\"] == 3" &&
     [ "$(json_get "$work/q.json" "[(s[\"value\"], s[\"values\"][\"T\"]) for s in $(segpar)]")" = "$(cat "$work/segpar")" ]'
check "calibd stops cleanly again" "stop_calibd"
finish
