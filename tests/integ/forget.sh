#!/usr/bin/env bash
# forget.sh — a model can go: calibctl forget MODEL drops a model and its
# statistics at the next tick, while the others keep theirs; and a flood of
# model names that never made a pair does not hold memory_limit for ever:
# with model_idle_ttl, such a model goes after that long without a message
# (a configured model, or one that scored a pair, stays).
. "$(dirname "$0")/lib.sh"

cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
model_idle_ttl = 2
ingest_pull = tcp://127.0.0.1:*
[defaults]
form = logits
k = 10
[model quiet]
EOF2
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0
sim() { "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 50 "$@" 2> /dev/null; }
metric() { curl -sS --max-time "$(scaled 5)" "$HTTP" | awk -v m="$1" '$1 == m {print $2; found = 1} END {if (!found) print 0}'; }
sim --model a --seed 1 --count 1000
sim --model b --seed 2 --count 1000
wait_for "$work/s1.json" "r['models']['a']['scored'] == 1000 and r['models']['b']['scored'] == 1000" ||
    bad "the pairs are scored"

"$CALIBCTL" forget --control "$CONTROL" a > "$work/forget.json"
check "calibctl forget a: accepted" 'grep -q "\"forgetting\": \"a\"" "$work/forget.json"'
check "a is gone at the next tick, b keeps its 1000 pairs" \
    'wait_for "$work/s2.json" "\"a\" not in r[\"models\"] and r[\"models\"][\"b\"][\"scored\"] == 1000 and r[\"models_forgotten\"] == 1"'
"$CALIBCTL" forget --control "$CONTROL" nosuch > "$work/nosuch.json" 2>&1
rc=$?
check "forgetting a model calibd does not hold: an error, said" '[ $rc -ne 0 ] && grep -q "no such model" "$work/nosuch.json"'
sim --model a --seed 3 --count 200
check "a model forgotten comes back afresh with its traffic" \
    'wait_for "$work/s3.json" "r[\"models\"][\"a\"][\"scored\"] == 200"'

# a flood of names, predictions without labels: no pair, so no statistics
# worth keeping; they go after model_idle_ttl = 2 s without a message
send_py "$PULL" <<'PY'
for i in range(50):
    send("flood-%d" % i, {"v": 1, "type": "pred", "id": "x%d" % i,
                          "logits": [0.1 * j for j in range(10)]})
PY
# (made, whether they still are or have expired by the time a slow poll
# looks: the two together only grow)
check "50 models made by traffic" \
    'wait_for "$work/s4.json" "sum(n.startswith(\"flood-\") for n in r[\"models\"]) + r[\"models_expired\"] == 50"'
check "they expire after model_idle_ttl; the configured model without pairs, and the ones with pairs, stay" \
    'wait_for "$work/s5.json" "not any(n.startswith(\"flood-\") for n in r[\"models\"]) and r[\"models_expired\"] == 50 and sorted(r[\"models\"]) == [\"a\", \"b\", \"quiet\"]"'
# (/metrics is the text of the last rendering round, which may predate the
# tick that expired the last of them: polled until it counts them)
removed_counted() {
    [ "$(metric "calibd_models_removed_total{reason=\"expired\"}")" = 50 ] &&
        [ "$(metric "calibd_models_removed_total{reason=\"forgotten\"}")" = 1 ]
}
check "/metrics counts them" 'wait_until removed_counted'
check "calibd stops cleanly" "stop_calibd"
finish
