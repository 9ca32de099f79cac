#!/usr/bin/env bash
# clock.sh — a step of the wall clock loses nothing (clock.h). calibd runs
# under libfaketime, whose wall clock the test steps while the monotonic
# clock goes on: an hour forward (longer than the window), then two hours
# back. The window still holds every pair of its last minute, the history
# keeps a point every step, and label TTLs are untouched; a restart after
# the clock was put right again loses nothing either (the time calibd was
# down is measured on CLOCK_BOOTTIME within a boot). Before, pairs were
# dated by the wall clock: a step forward emptied the window, a step back
# stopped the history for the step's length, and a restart read the step
# as downtime and expired whatever was waiting.
. "$(dirname "$0")/lib.sh"
# Not under the sanitizers: clang's ASan runtime starts before any shared
# library's constructor and calls clock_gettime while it starts, which
# libfaketime then serves uninitialised; it re-enters its own start-up
# ("Unexpected recursive calls to clock_gettime()") and can spin for ever.
# It did, twice, in CI. The clock's logic has unit tests (test_window,
# test_join, test_snapshot) that the sanitizers do run.
if [ "${CALIB_SANITIZERS:-no}" = yes ]; then
    skip_all "under the sanitizers (libfaketime cannot start inside ASan's start-up)"
fi
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
[ -r "$FAKETIME_LIB" ] || { bad "libfaketime is not installed (scripts/deps.sh installs it)"; finish; exit 1; }

# the wall clock's offset, read on every call; the monotonic clock is real.
# Replaced whole (a rename), never rewritten in place: a read between the
# truncation and the write would see an empty or partial offset
step_clock() { echo "$1" > "$work/faketime.new" && mv "$work/faketime.new" "$work/faketime"; }
step_clock +0
export FAKETIME_TIMESTAMP_FILE="$work/faketime" FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1
cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
history_step = 0.2
[defaults]
form = logits
k = 10
window = 60
window_panes = 6
label_ttl = 600
EOF2
CALIBD_PRELOAD="$FAKETIME_LIB" start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0
base=${HTTP%/metrics}
sim() { "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --model m --batch 50 "$@" 2> /dev/null; }
points() {
    curl -sS --max-time "$(scaled 5)" "$base/history?model=m" |
        "$PY" -c 'import json, sys; print(len(json.load(sys.stdin)["points"]))' 2> /dev/null || echo 0
}
# the window's pairs, as the last tick summed them, once it has summed n
window_has() { wait_for "$work/w.json" "(r['models']['m']['window'] or {}).get('scored') == $1"; }

sim --seed 1 --count 500
check "500 pairs in the window" 'window_has 500'

step_clock +3600
# the probe ran: calibd's wall clock (its uptime is wall now - wall start) moved
check "calibd's wall clock is an hour on" 'wait_for "$work/u.json" "r[\"uptime\"] >= 3600"'
sim --seed 2 --count 500
check "an hour forward, longer than the window: the window holds all 1000 pairs of its last minute" \
    'window_has 1000'

n=$(points)
step_clock -7200
check "and then an hour behind its start" 'wait_for "$work/u.json" "r[\"uptime\"] < -3000"'
sim --seed 3 --count 500
check "two hours back: the window holds all 1500" 'window_has 1500'
check "and the history goes on: points after the step back ($n before)" \
    'wait_until "[ \$(points) -ge $((n + 5)) ]"'
check "the points are in order" \
    'curl -sS "$base/history?model=m" | "$PY" -c "import json, sys; p = [q[0] for q in json.load(sys.stdin)[\"points\"]]; sys.exit(not all(a < b for a, b in zip(p, p[1:])))"'

# predictions whose labels have not come yet (label_ttl 600 s); a stop, the
# wall clock put right (two hours forward again), a restart: calibd was
# down for seconds (CLOCK_BOOTTIME says so, within one boot), not the two
# hours the wall clock says: nothing waiting expires, the window goes on
sim --seed 4 --count 100 --label-drop 1
check "100 predictions wait for their labels" \
    'wait_for "$work/w.json" "r[\"models\"][\"m\"][\"join\"][\"waiting_predictions\"] == 100"'
check "calibd stops cleanly" "stop_calibd"
step_clock +0
CALIBD_PRELOAD="$FAKETIME_LIB" start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0 --log-level info
check "restarted with the wall clock two hours on: the 100 still wait, the window holds its 1500
$(grep "snapshot: restored" "$work/calibd.log" | sed 's/^/  /')" \
    'wait_for "$work/r.json" "r[\"models\"][\"m\"][\"join\"][\"waiting_predictions\"] == 100 and (r[\"models\"][\"m\"][\"window\"] or {}).get(\"scored\") == 1500"'
sim --seed 5 --count 500
check "and new pairs count in it: 2000" 'window_has 2000'
check "calibd stops cleanly again" "stop_calibd"
finish
