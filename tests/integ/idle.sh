#!/usr/bin/env bash
# idle.sh — nothing lost in ordinary operation: a model silent for longer
# than its window, then one more pair, is snapshotted and restored with
# every other model (once, its window's old panes made the whole file
# unusable at the next start: a busy model came back with nothing). A
# section that cannot be read costs its own model only: the others are
# restored, the file is kept aside without overwriting an earlier one, and
# calibctl snapshot prints what it can and names what it skipped.
. "$(dirname "$0")/lib.sh"

cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
[defaults]
form = logits
k = 10
[model a]
window = 4
window_panes = 4
[model b]
EOF2
start_calibd -c "$work/calibd.conf" --log-level info
sim() { "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 50 --seed "$2" --model "$1" --count "$3" 2> /dev/null; }
# a's pairs in two panes of its window (1 s each), b's meanwhile
sim a 1 50
wait_for "$work/s0.json" "r['models']['a']['scored'] == 50" || bad "a's first pairs are scored"
uptime_past 1 "$work/s0.json" || bad "a second"
sim a 4 50
sim b 2 2000
wait_for "$work/s1.json" "r['models']['a']['scored'] == 100 and r['models']['b']['scored'] == 2000" ||
    bad "the first pairs are scored"
# silent for longer than a's window (4 s), on calibd's own clock; then one
# pair, which takes one pane's place: the other pane is left behind
uptime_past 5 "$work/s1.json" || bad "5 s of silence"
sim a 3 1
wait_for "$work/s2.json" "r['models']['a']['scored'] == 101" || bad "the pair after the silence"
check "calibd stops cleanly, writing its snapshot" "stop_calibd"

start_calibd -c "$work/calibd.conf" --log-level info
status > "$work/r1.json"
check "after a restart, the idle model and the busy one hold their pairs (101 and 2000)
$(grep snapshot "$work/calibd.log" | sed 's/^/  /')" \
    '[ "$(json_get "$work/r1.json" "(r[\"models\"][\"a\"][\"scored\"], r[\"models\"][\"b\"][\"scored\"])")" = "(101, 2000)" ] &&
     ! log_has "cannot be used"'
check "calibd stops cleanly" "stop_calibd"

# a's section made unreadable (its window's head before its first pane);
# an earlier snapshot.bad is there already
# (its section framed again: tests/fixtures/snapfile.py, calibd(8) SNAPSHOTS)
"$PY" - "$work/state/snapshot" "$srcdir/tests/fixtures" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import snapfile
p = sys.argv[1]
head, models = snapfile.read(p)
for m in models:
    if m["name"] == "a":
        m["window"]["head"] = -7
open(p, "wb").write(snapfile.pack(head, models))
PY
echo "an earlier file kept aside" > "$work/state/snapshot.bad"
cp "$work/state/snapshot" "$work/damaged"
start_calibd -c "$work/calibd.conf" --log-level info
status > "$work/r2.json"
check "one model's section unreadable: that model starts afresh, the other keeps its 2000 pairs
$(grep snapshot "$work/calibd.log" | sed 's/^/  /')" \
    '[ "$(json_get "$work/r2.json" "(r[\"models\"][\"a\"][\"scored\"], r[\"models\"][\"b\"][\"scored\"])")" = "(0, 2000)" ] &&
     log_has "a: its section cannot be used (window: head -7)"'
check "the file is kept aside as snapshot.bad.1; the earlier snapshot.bad stays" \
    'cmp -s "$work/damaged" "$work/state/snapshot.bad.1" &&
     [ "$(cat "$work/state/snapshot.bad")" = "an earlier file kept aside" ] &&
     log_has "1 of 2 models could not be restored; the file is kept in $work/state/snapshot.bad.1"'
check "calibd stops cleanly" "stop_calibd"

"$CALIBCTL" snapshot "$work/damaged" > "$work/cs.json" 2> "$work/cs.err"
rc=$?
read_models=$(json_get "$work/cs.json" "' '.join('%s=%d' % (n, m['scored']) for n, m in sorted(r['models'].items()))")
check "calibctl snapshot prints the models it can read ($read_models), names the one it skipped, exits 2
$(cat "$work/cs.err")" \
    '[ $rc -eq 2 ] && grep -q "model a skipped: window: head -7" "$work/cs.err" &&
     [ "$read_models" = b=2000 ]'
finish
