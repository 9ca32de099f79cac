#!/usr/bin/env bash
# restart.sh — what calibd publishes outlives it. A first daemon publishes
# version 1 of a model after a manual refit on a stream at T* = 2 and stops;
# the next restores it from the state directory, republishes it to a late
# serving node, and numbers its next version 2: first refused by the state
# directory (not published), then published after another manual refit on
# a stream at T* = 4, while a second refit of the same model is refused and
# a model with auto_publish = no withholds its passing candidate.
. "$(dirname "$0")/lib.sh"
SERVING=$(built examples/serving_node)

cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
params_interval = 1
[defaults]
form = logits
k = 10
# manual refits only: the drift detector, restored from the snapshot, and
# the miscalibration trigger would catch T* = 4 and refit on their own first
drift = no
miscal_trigger = no
drift_reference = 2000
refit_min_samples = 15000
refit_samples = 15000
ring = 20000
gate_max_samples = 30000
[model drift]
[model held]
auto_publish = no
EOF2
# sim ARGS... &: always in the background, where exec makes $! the
# simulator's own pid (for kill -STOP, -CONT and the end), not a subshell's
sim() { exec "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 100 "$@"; }

# ---------------------------------------------------------------- version 1
start_calibd -c "$work/calibd.conf"
# (the stream flows until the version is published, however long that takes)
sim --model drift --seed 31 --temperature 2 --count 0 --rate 15000 2> /dev/null &
sim_pid=$!
track $sim_pid
wait_for "$work/s0.json" "r['models']['drift']['samples']['ring'] >= 15000" ||
    bad "ring filled (first daemon)"
"$CALIBCTL" refit --control "$CONTROL" drift > "$work/refit.json" ||
    bad "calibctl refit (first daemon): $(cat "$work/refit.json")"
check "first daemon: version 1 published after a manual refit" \
    'wait_for "$work/s1.json" "r[\"models\"][\"drift\"][\"params\"][\"version\"] == 1"'
kill "$sim_pid" 2> /dev/null
wait "$sim_pid"
T=$(json_get "$work/s1.json" "r['models']['drift']['params']['values']['T']")
echo "# version 1: T = $T"
check "calibd stops cleanly" "stop_calibd"
check "version 1 stored durably" "grep -qx 'version 1' $work/state/model.drift.params"

# ---------------------------------------------------------------- restart
start_calibd -c "$work/calibd.conf"
check "restart: version 1 restored" \
    'wait_for "$work/s2.json" "r[\"models\"][\"drift\"][\"params\"][\"version\"] == 1"'
check "restart: same T" "[ \"$(json_get "$work/s2.json" "r['models']['drift']['params']['values']['T']")\" = \"$T\" ]"
"$SERVING" --connect "$PUBLISH" --model drift --until-version 1 --timeout "$(scaled 10)" > "$work/late.out" 2>&1
check "a late serving node converges through republishing" "[ $? -eq 0 ] && grep -q '^drift 1 temperature' $work/late.out"

# a manual refit on a stream at T* = 4 publishes version 2
sim --model drift --seed 21 --temperature 4 --count 0 --rate 10000 2> /dev/null &
sim_pid=$!
# and one with auto_publish = no: its candidate passes but is withheld
sim --model held --seed 22 --temperature 4 --count 0 --rate 10000 2> /dev/null &
sim_held=$!
track $sim_pid $sim_held
wait_for "$work/s3.json" "r['models']['drift']['samples']['ring'] >= 15000 and r['models']['held']['samples']['ring'] >= 15000" ||
    bad "ring filled"
"$CALIBCTL" refit --control "$CONTROL" held > /dev/null || bad "calibctl refit held"
# first the state directory refuses the new version: nothing is published
mkdir "$work/state/model.drift.params.tmp"
"$CALIBCTL" refit --control "$CONTROL" drift > "$work/refit.json" && ok "calibctl refit" || bad "calibctl refit: $(cat "$work/refit.json")"
wait_for "$work/s3b.json" "r['models']['drift']['loop']['store_errors'] == 1" &&
    [ "$(json_get "$work/s3b.json" "r['models']['drift']['params']['version']")" = 1 ] &&
    grep -q "version 2 (.*) not published" "$work/calibd.log" &&
    ok "a version the state directory refuses is not published" ||
    bad "a version the state directory refuses is not published"
rmdir "$work/state/model.drift.params.tmp"
# the streams paused and drained: no new pair can decide the candidate
# between the two requests, however long the second takes to come
kill -STOP $sim_pid $sim_held
drained() {
    status > "$work/d1.json" && uptime_past 1 "$work/d1.json" &&
        [ "$(json_get "$work/d1.json" "r['messages']")" = "$(json_get "$work/uptime.json" "r['messages']")" ]
}
wait_until drained || bad "calibd drained the paused streams"
"$CALIBCTL" refit --control "$CONTROL" drift > "$work/refit.json" || bad "calibctl refit again: $(cat "$work/refit.json")"
check "a second refit of the same model does not start while one runs" \
    "! $CALIBCTL refit --control $CONTROL drift > $work/refit2.json && grep -q 'running\|shadow' $work/refit2.json"
kill -CONT $sim_pid $sim_held
# the streams go on until the candidates are decided, not to their end
wait_for "$work/s4.json" "r['models']['drift']['params']['version'] == 2 and r['models']['held']['loop']['withheld'] == 1" 30 &&
    ok "versions continue: 2 after the stored 1" || bad "versions continue: 2 after the stored 1 ($(json_get "$work/s4.json" "r['models']['drift']['loop']"))"
json_get "$work/s4.json" "'# version 2: ' + str(r['models']['drift']['params'])"
check "auto_publish = no: the candidate passed, withheld, nothing published" \
    "json_get $work/s4.json \"(r['models']['held']['params']['version'], r['models']['held']['loop']['published'], r['models']['held']['loop']['withheld'])\" | grep -qx '(0, 0, 1)'"
check "version 2 has T near 4" "json_get $work/s4.json \"abs(r['models']['drift']['params']['values']['T'] - 4) < 0.4\" | grep -q True"
kill $sim_pid $sim_held 2> /dev/null
wait $sim_pid $sim_held
check "version 2 stored" "grep -qx 'version 2' $work/state/model.drift.params"
check "calibd stops cleanly after version 2" "stop_calibd"
finish
