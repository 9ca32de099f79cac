#!/usr/bin/env bash
# miscal.sh — the closed loop fixes a model wrong from its first pair, on
# the loop's defaults. Model "over" reports softmax(z) while its labels come
# from softmax(z / 2): overconfident from the start, so the drift detector
# (which compares with the model's own first pairs) sees nothing. The
# miscalibration trigger must reject, alert (kind miscalibration), refit
# with that reason, gate and publish T near 2 (its stream flows until
# then). Model "calm" is calibrated: its trigger tests and stays quiet.
# Model "held" (auto_publish = no) is overconfident too: its candidate
# passes and is withheld, and the trigger then rests for miscal_period
# pairs instead of refitting again at once.
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
miscal_period = 100000
EOF2
start_calibd -c "$work/calibd.conf" --log-level info
# sim NAME SEED COUNT [ARGS...] &: a stream in the background, where exec
# makes $! the simulator's own pid. "over" and "held" flow until their
# checks are done (COUNT 0), however long the loop takes on this machine.
sim() {
    exec "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 50 --rate 4000 \
        --model "$1" --seed "$2" --count "$3" "${@:4}" 2> /dev/null
}
sim calm 2 8000 &
calm=$!
sim held 3 0 --temperature 2 &
held=$!
sim over 1 0 --temperature 2 &
over=$!
track "$calm" "$held" "$over"

loop() { echo "r['models']['$1']['loop']"; }
# held: once its candidate is withheld, 8,000 more pairs bring no second
# alarm and no second refit. It rests for miscal_period pairs from the
# withheld outcome, which a poll sees some pairs late: 100,000 here, so
# that the 8,000 fall inside the rest however late the poll (it is first)
if wait_for "$work/h.json" "$(loop held)['withheld'] == 1"; then
    rest=$(json_get "$work/h.json" "r['models']['held']['scored'] + 8000")
    wait_for "$work/h2.json" "r['models']['held']['scored'] >= $rest"
    check "held: one alarm, its candidate withheld, then the trigger rests (no refit loop over 8,000 more pairs)
$(json_get "$work/h2.json" "r['models']['held']['scored'], $(loop held)")" \
        '[ "$(json_get "$work/h2.json" "$(loop held)[\"trigger\"][\"alarms\"] == 1 and $(loop held)[\"refits\"] == 1 and $(loop held)[\"withheld\"] == 1")" = True ]'
else
    bad "held: one alarm, its candidate withheld ($(json_get "$work/h.json" "$(loop held)"))"
fi
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
check "calm: its trigger tests a challenger (T near 1) and has not alarmed over its 8,000 pairs; no refit" \
    'wait_for "$work/c.json" "r[\"models\"][\"calm\"][\"scored\"] == 8000 and $(loop calm)[\"trigger\"][\"state\"] == \"testing\" and abs($(loop calm)[\"trigger\"][\"challenger\"][\"values\"][\"T\"] - 1) < 0.1 and $(loop calm)[\"trigger\"][\"alarms\"] == 0 and $(loop calm)[\"refits\"] == 0"'
check "the log says why the model was refit" \
    'log_has "over: miscalibrated: a recalibration (temperature T="'
kill "$over" "$held" 2> /dev/null
wait "$calm" "$over" "$held"

# a restart keeps the triggers: the challenger and the evidence so far
# (calm's, read a tick after its last pair)
uptime_past 1 "$work/c.json" || bad "calibd ticks"
json_get "$work/uptime.json" "$(loop calm)['trigger']['improvement']['n']" > "$work/n_before"
check "calibd stops cleanly" "stop_calibd"
start_calibd -c "$work/calibd.conf" --log-level info
check "restarted: calm's trigger resumes with its challenger and its evidence" \
    'wait_for "$work/r.json" "$(loop calm)[\"trigger\"][\"state\"] == \"testing\" and $(loop calm)[\"trigger\"][\"improvement\"][\"n\"] == $(cat "$work/n_before")"'
check "restarted: over keeps version 1 and its alarm count" \
    '[ "$(json_get "$work/r.json" "r[\"models\"][\"over\"][\"params\"][\"version\"] == 1 and $(loop over)[\"trigger\"][\"alarms\"] == 1")" = True ]'
check "calibd stops cleanly again" "stop_calibd"
finish
