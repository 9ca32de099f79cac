#!/usr/bin/env bash
# miscal.sh — the closed loop fixes a model wrong from its first pair, on
# the loop's defaults. Model "over" reports softmax(z) while its labels come
# from softmax(z / 2): overconfident from the start, so the drift detector
# (which compares with the model's own first pairs) sees nothing. The
# miscalibration trigger must reject, alert (kind miscalibration), refit
# with that reason, gate and publish T near 2. Model "calm" is calibrated:
# its trigger tests and stays quiet. Model "held" (auto_publish = no) is
# overconfident too: its candidate passes and is withheld, and the trigger
# then rests for miscal_period pairs instead of refitting again at once.
# A restart keeps the triggers.
. "$(dirname "$0")/lib.sh"

make_sink
cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
alert_exec = $work/sink.sh
[defaults]
form = logits
k = 10
[model held]
auto_publish = no
EOF2
start_calibd -c "$work/calibd.conf" --log-level info
sim() { "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 50 --rate 4000 "$@" 2> /dev/null; }
(exec "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 50 --rate 4000 \
    --model calm --seed 2 --count 8000 2> /dev/null) &
calm=$!
track "$calm"
(exec "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 50 --rate 4000 \
    --model held --seed 3 --temperature 2 --count 16000 2> /dev/null) &
held=$!
track "$held"
sim --model over --seed 1 --temperature 2 --count 8000
wait "$calm" "$held"

loop() { echo "r['models']['$1']['loop']"; }
check "over: version 1 published, T within 10% of 2" \
    'wait_for "$work/s.json" "r[\"models\"][\"over\"][\"params\"][\"version\"] == 1 and abs(r[\"models\"][\"over\"][\"params\"][\"values\"][\"T\"] / 2 - 1) < 0.1"'
check "over: one trigger alarm, one refit, no drift alarm" \
    '[ "$(json_get "$work/s.json" "$(loop over)[\"trigger\"][\"alarms\"] == 1 and $(loop over)[\"refits\"] == 1 and $(loop over)[\"drift\"][\"alarms\"] == 0")" = True ]'
# kinds FILE MODEL: the model's event kinds, but alerts, space-separated
kinds() { json_get "$1" "' '.join(e['kind'] for e in r['models']['$2']['events'] if e['kind'] != 'alert')"; }
check "over: its events tell the story in order: $(kinds "$work/s.json" over)" \
    'kinds "$work/s.json" over | grep -q "miscalibration refit shadow_start publish" &&
     json_get "$work/s.json" "[e[\"text\"] for e in r[\"models\"][\"over\"][\"events\"] if e[\"kind\"] == \"refit\"][0]" |
         grep -q "(miscalibration)"'
check "over: an alert of kind miscalibration reached the sink" \
    'wait_until "grep -q \"\\\"kind\\\": *\\\"miscalibration\\\"\" \"$work/alerts.jsonl\""'
check "calm: its trigger tests a challenger (T near 1) and has not alarmed; no refit" \
    '[ "$(json_get "$work/s.json" "$(loop calm)[\"trigger\"][\"state\"] == \"testing\" and abs($(loop calm)[\"trigger\"][\"challenger\"][\"values\"][\"T\"] - 1) < 0.1 and $(loop calm)[\"trigger\"][\"alarms\"] == 0 and $(loop calm)[\"refits\"] == 0")" = True ]'
check "held: one alarm, its candidate withheld, then the trigger rests (no refit loop over 16,000 pairs)" \
    'wait_for "$work/s.json" "$(loop held)[\"withheld\"] == 1 and r[\"models\"][\"held\"][\"scored\"] == 16000" &&
     [ "$(json_get "$work/s.json" "$(loop held)[\"trigger\"][\"alarms\"] == 1 and $(loop held)[\"refits\"] == 1")" = True ]'
check "the log says why the model was refit" \
    'log_has "over: miscalibrated: a recalibration (temperature T="'

# a restart keeps the triggers: the challenger and the evidence so far
json_get "$work/s.json" "$(loop calm)['trigger']['improvement']['n']" > "$work/n_before"
check "calibd stops cleanly" "stop_calibd"
start_calibd -c "$work/calibd.conf" --log-level info
check "restarted: calm's trigger resumes with its challenger and its evidence" \
    'wait_for "$work/r.json" "$(loop calm)[\"trigger\"][\"state\"] == \"testing\" and $(loop calm)[\"trigger\"][\"improvement\"][\"n\"] == $(cat "$work/n_before")"'
check "restarted: over keeps version 1 and its alarm count" \
    '[ "$(json_get "$work/r.json" "r[\"models\"][\"over\"][\"params\"][\"version\"] == 1 and $(loop over)[\"trigger\"][\"alarms\"] == 1")" = True ]'
check "calibd stops cleanly again" "stop_calibd"
finish
