#!/usr/bin/env bash
# snapshot.sh — what calibd knew survives kill -9. A stream at T* = 2 with
# labels 0.3 s late is cut by kill -9 at 20 random moments (a random number
# of pairs scored); after each restart the model holds exactly what the
# last snapshot on disk says (pairs, waiting items, mean score, joined
# pairs), the loss since the last status seen is at most one snapshot
# interval of pairs, and the parameter version never goes back (manual
# refits in some rounds publish versions; a kill may cut one short).
# Predictions waiting at a kill join with labels sent after the restart.
# A truncated, bit-flipped, foreign-version or unreadable snapshot is moved
# aside with one log line, and calibd starts without it.
. "$(dirname "$0")/lib.sh"

RATE=2000      # pairs per second
INTERVAL=0.5   # snapshot_interval
cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.1
snapshot_interval = $INTERVAL
ingest_pull = tcp://127.0.0.1:*
[defaults]
form = logits
k = 10
drift_reference = 1000
refit_min_samples = 2000
refit_samples = 4000
ring = 5000
reservoir = 2000
EOF2

# snap FIELD...: model m of $work/state/snapshot, read here from its bytes
# (the format of calibd(8), SNAPSHOTS), in one read: each FIELD of scored,
# waiting, mean (raw Brier), joined, version, space-separated; or "none"
snap() {
    "$PY" - "$work/state/snapshot" "$srcdir/tests/fixtures" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import snapfile
try:
    head, models = snapfile.read(sys.argv[1])
except OSError:
    print("none"); sys.exit()
for m in models:
    if m["name"] != "m":
        continue
    a = m["cum"][0]   # the raw view's Brier accumulator (calib_save(3))
    n = a["n"]
    j = m["join"]
    f = {"scored": m["counters"]["scored"], "waiting": len(j["items"]),
         "joined": j["joined"],
         "mean": repr((a["sum"] + a["sum_c"]) / n) if n else "nan",
         "version": m["params"]["version"]}
    print(" ".join(str(f[k]) for k in sys.argv[3:]))
    break
else:
    print("none")
PY
}
field() { json_get "$1" "$2"; }

kill9() {
    kill -9 "$calibd_pid"
    wait "$calibd_pid" 2> /dev/null
    calibd_pid=
}

# ---------------------------------------------------------------- 20 kills
seed=0
want=0 # the pairs the last snapshot held (none before the first daemon)
last_scored=0 last_version=0
exact=0 loss_ok=0 versions_ok=0 max_loss=0
for round in $(seq 20); do
    start_calibd -c "$work/calibd.conf"
    if [ "$round" -gt 1 ]; then
        status > "$work/r.json"
        want=$(snap scored waiting mean joined)
        # the same four figures from the status, and the version
        got=$(field "$work/r.json" "(lambda m, j: '%d %d %r %d %d' % (m['scored'], j['waiting_predictions'] + j['waiting_labels'], m['raw']['brier']['mean'], j['joined'], m['params']['version']))(r['models']['m'], r['models']['m']['join'])")
        v=${got##* } got=${got% *}
        if [ "$got" = "$want" ]; then
            exact=$((exact + 1))
        else
            echo "# round $round: restored '$got', the snapshot says '$want'"
            sed 's/^/#   /' "$work/calibd.log"
        fi
        [ "$v" -ge "$last_version" ] && versions_ok=$((versions_ok + 1)) ||
            echo "# round $round: version $v after $last_version"
    fi
    seed=$((seed + 1))
    # (--linger-ms 0: what it still holds when calibd is killed is lost
    # anyway, and its end need not wait for a reader that is gone)
    "$SIMULATE" --endpoint ">$INGEST" --model m --seed "$seed" --temperature 2 \
        --temperature-after 3 --switch-after 6000 --count 0 --rate "$RATE" --batch 20 \
        --label-delay 0.3 --linger-ms 0 2> /dev/null &
    sim_pid=$!
    track "$sim_pid"
    # in some rounds a manual refit: the kill may come while it fits, runs
    # in shadow or stores its version
    case $round in 3|8|13) "$CALIBCTL" refit --control "$CONTROL" m > /dev/null 2>&1 ;; esac
    # a random moment: between 0.5 and 1.5 s of pairs after this restart
    # (one to three snapshot intervals), counted from what the restored
    # model holds (the snapshot's pairs)
    held=${want%% *}
    target=$(( ${held/none/0} + RATE / 2 + RANDOM % RATE ))
    wait_for "$work/k.json" "r['models']['m']['scored'] >= $target" 20 ||
        bad "round $round: $target pairs scored"
    read -r last_scored last_version <<< "$(field "$work/k.json" "'%d %d' % (r['models']['m']['scored'], r['models']['m']['params']['version'])")"
    kill9
    kill "$sim_pid" 2> /dev/null
    wait "$sim_pid" 2> /dev/null
    # the snapshot on disk now is what the next daemon must hold
    s=$(snap scored)
    loss=$(( last_scored - s ))
    [ "$loss" -gt "$max_loss" ] && max_loss=$loss
    # at most one interval (and a tick) of pairs older than the last status seen
    [ "$s" != none ] && [ "$loss" -le $(( RATE * 2 )) ] && loss_ok=$((loss_ok + 1)) ||
        echo "# round $round: $last_scored pairs seen, $s in the snapshot"
done
start_calibd -c "$work/calibd.conf" --log-level info
status > "$work/r.json"
[ "$(field "$work/r.json" "r['models']['m']['scored']")" = "$(snap scored)" ] && exact=$((exact + 1))
check "after each of 20 kills -9 the restarted model holds what the last snapshot held: pairs, waiting items, mean score, joined pairs ($exact of 20)" \
    '[ "$exact" -eq 20 ]'
check "each snapshot lost at most one interval of pairs against the last status seen before the kill (most: $max_loss pairs at $RATE pairs/s)" \
    '[ "$loss_ok" -eq 20 ]'
check "the parameter version never went back ($versions_ok of 19; last $(field "$work/r.json" "r['models']['m']['params']['version']"))" \
    '[ "$versions_ok" -eq 19 ]'
check "the restore is logged (info): models, pairs, waiting items" \
    'grep -q "snapshot: restored 1 models" "$work/calibd.log"'

# ---------------------------------------------------------------- waiting predictions
# 50 predictions without labels wait; a snapshot takes them; kill -9; the
# labels come to the next daemon and join them. (Predictions of the killed
# streams whose labels never came wait too: w0 of them.)
w0=$(field "$work/r.json" "r['models']['m']['join']['waiting_predictions']")
send_py "$PULL" <<'PY'
for i in range(50):
    send("m", {"v": 1, "type": "pred", "id": "w-%d" % i,
               "logits": [0.1 * j for j in range(10)]})
PY
check "50 more predictions wait ($w0 before), and a snapshot holds them" \
    'wait_for "$work/w0.json" "r[\"models\"][\"m\"][\"join\"][\"waiting_predictions\"] == $w0 + 50" &&
     wait_until "[ \"\$(snap waiting)\" = $((w0 + 50)) ]" 10'
kill9
start_calibd -c "$work/calibd.conf"
check "after kill -9 and a restart, they still wait" \
    'wait_for "$work/w.json" "r[\"models\"][\"m\"][\"join\"][\"waiting_predictions\"] == $w0 + 50"'
base=$(field "$work/w.json" "r['models']['m']['scored']")
send_py "$PULL" <<'PY'
for i in range(50):
    send("m", {"v": 1, "type": "label", "id": "w-%d" % i, "y": i % 10})
PY
check "labels sent after the restart join them: 50 more pairs scored ($base before)" \
    'wait_for "$work/w2.json" "r[\"models\"][\"m\"][\"scored\"] == $base + 50 and r[\"models\"][\"m\"][\"join\"][\"waiting_predictions\"] == $w0"'
# a status whose window was summed after the last pair (the next tick)
at=$(field "$work/w2.json" "r['models']['m']['window']['at']")
wait_for "$work/w3.json" "r['models']['m']['window']['at'] > $at" || bad "a tick after the labels"
check "calibd stops cleanly and writes a snapshot at exit" \
    'stop_calibd && [ "$(snap scored)" = "$(field "$work/w3.json" "r[\"models\"][\"m\"][\"scored\"]")" ]'

# ---------------------------------------------------------------- calibctl snapshot
# the file read without a daemon: what status said before the stop
"$CALIBCTL" snapshot "$work/state/snapshot" > "$work/cs.json" 2> "$work/cs.err"
check "calibctl snapshot prints the snapshot as status showed it (but uptime, the window's time and the memory held, this process's, and the label-free estimates, which snapshots do not keep)
$(cat "$work/cs.err")" \
    '"$PY" - "$work/w3.json" "$work/cs.json" <<'"'"'PY'"'"'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for r in (a, b):
    r.pop("uptime")
    r.pop("memory")
    for m in r["models"].values():
        m.get("window", {}).pop("at", None)
        m.pop("memory")
        m.pop("label_free", None)
def diff(x, y, p=""):
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            diff(x.get(k), y.get(k), p + "/" + k)
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (u, v) in enumerate(zip(x, y)):
            diff(u, v, "%s/%d" % (p, i))
    elif x != y:
        print("# %s: status %r, snapshot %r" % (p, x, y))
diff(a, b)
sys.exit(0 if a == b else 1)
PY'
check "calibctl snapshot FILE MODEL: that model only" \
    '"$CALIBCTL" snapshot "$work/state/snapshot" m | "$PY" -c "import json,sys; sys.exit(0 if list(json.load(sys.stdin)[\"models\"]) == [\"m\"] else 1)"'
"$CALIBCTL" snapshot "$work/state/snapshot" nosuch > /dev/null 2> "$work/cs2.err"
rc=$?
check "calibctl snapshot of a model it does not hold: exit 2, saying so" \
    '[ $rc -eq 2 ] && grep -q "no model nosuch" "$work/cs2.err"'
"$CALIBCTL" snapshot "$work/calibd.conf" > /dev/null 2> "$work/cs3.err"
rc=$?
check "calibctl snapshot of a file that is no snapshot: exit 2, saying why ($(cat "$work/cs3.err"))" \
    '[ $rc -eq 2 ] && [ -s "$work/cs3.err" ]'

# ---------------------------------------------------------------- damaged files
# A file calibd cannot read at all (its header, its format): moved aside to
# snapshot.bad with one error line, a fresh start. A damaged section (a
# flipped bit, a file cut short) costs its model only: here the file's one
# model, which starts afresh; the file is kept aside as snapshot.bad.
# No periodic snapshot while it is judged: the file absent is the proof.
sed 's/^snapshot_interval = .*/snapshot_interval = 3600/' "$work/calibd.conf" > "$work/quiet.conf"
damaged() { # NAME moved|lost: the snapshot is damaged; calibd must start without it
    rm -f "$work/state/snapshot.bad"
    rm -rf "$work/state/snapshot.bad"
    start_calibd -c "$work/quiet.conf" --log-level info
    status > "$work/d.json"
    local lines
    if [ "$2" = moved ]; then
        lines=$(grep -c "snapshot.*moved aside" "$work/calibd.log")
        check "$1: moved aside to snapshot.bad with one log line, calibd starts afresh
$(grep snapshot "$work/calibd.log" | sed 's/^/  /')" \
            '[ "$lines" -eq 1 ] && [ -e "$work/state/snapshot.bad" ] && [ ! -e "$work/state/snapshot" ] &&
             [ "$(field "$work/d.json" "r[\"models\"].get(\"m\", {}).get(\"scored\", 0)")" = 0 ]'
    else
        lines=$(grep -c "snapshot: .*section.*: its model is lost" "$work/calibd.log")
        check "$1: its one model is lost (one line says where), the file kept aside as snapshot.bad, m starts afresh
$(grep snapshot "$work/calibd.log" | sed 's/^/  /')" \
            '[ "$lines" -eq 1 ] && cmp -s "$work/state/snapshot" "$work/state/snapshot.bad" &&
             log_has "1 of 1 models could not be restored; the file is kept in $work/state/snapshot.bad" &&
             [ "$(field "$work/d.json" "r[\"models\"].get(\"m\", {}).get(\"scored\", 0)")" = 0 ]'
    fi
    stop_calibd > /dev/null
    rm -f "$work/state/snapshot"
}
cp "$work/state/snapshot" "$work/good"
size=$(stat -c %s "$work/good")
head -c $((size / 2)) "$work/good" > "$work/state/snapshot"
damaged "a truncated snapshot" lost
head -c 100 "$work/good" > "$work/state/snapshot"
damaged "a snapshot cut in its header" moved
cp "$work/good" "$work/state/snapshot"
"$PY" - "$work/state/snapshot" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) * 3 // 4] ^= 0x10   # one bit in the body
open(p, "wb").write(b)
PY
damaged "a bit-flipped snapshot" lost
"$PY" - "$work/good" "$work/state/snapshot" <<'PY'
import sys, msgpack
data = open(sys.argv[1], "rb").read()
u = msgpack.Unpacker(raw=False)
u.feed(data)
head = next(u)
off = u.tell()
head["v"] = 99   # a version this calibd does not read,
head["compat"] = 99   # written not to be read by it
open(sys.argv[2], "wb").write(msgpack.packb(head, use_bin_type=True) + data[off:])
PY
damaged "a snapshot of another format version" moved
rm -f "$work/state/snapshot"
mkdir "$work/state/snapshot"
damaged "an unreadable snapshot (a directory)" moved
rmdir "$work/state/snapshot"

# ---------------------------------------------------------------- one model's bytes
# Four models, each 100 pairs and 500 predictions waiting, in the file
# calibd writes at its stop; one byte flipped in m1's section, then the
# file cut 1,000 bytes short: the other models keep every pair and every
# waiting prediction.
printf '[daemon]\nsnapshot_interval = 3600\ningest_pull = tcp://127.0.0.1:*\n[defaults]\nform = binary\n' > "$work/four.conf"
start_calibd -c "$work/four.conf" --log-level info
send_py "$PULL" <<'PY'
for m in range(4):
    for i in range(600):
        send("m%d" % m, {"v": 1, "type": "pred", "id": "p%d" % i, "p": 0.2 + 0.001 * i})
    for i in range(100):
        send("m%d" % m, {"v": 1, "type": "label", "id": "p%d" % i, "y": i % 2})
PY
four() { # the (scored, waiting) of m0..m3 in status FILE
    field "$1" "' '.join('%d/%d' % (r['models'][m]['scored'], r['models'][m]['join']['waiting_predictions']) if m in r['models'] else '-' for m in ('m0', 'm1', 'm2', 'm3'))"
}
wait_for "$work/f0.json" "all(r['models'].get('m%d' % m, {}).get('scored') == 100 and r['models']['m%d' % m]['join']['waiting_predictions'] == 500 for m in range(4))" ||
    bad "four models, 100 pairs and 500 waiting each"
stop_calibd
cp "$work/state/snapshot" "$work/four"
# where each model's section is: tests/fixtures/snapfile.py
sections() {
    "$PY" - "$1" "$srcdir/tests/fixtures" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import snapfile
head, models = snapfile.split(open(sys.argv[1], "rb").read())
for m, a, b in models:
    print(m["name"], a, b)
PY
}
sections "$work/four" > "$work/four.sections"
read -r _ a b <<< "$(grep '^m1 ' "$work/four.sections")"
"$PY" - "$work/state/snapshot" "$(( (a + b) / 2 ))" <<'PY'
import sys
p, at = sys.argv[1], int(sys.argv[2])
f = bytearray(open(p, "rb").read())
f[at] ^= 0x04
open(p, "wb").write(f)
PY
cp "$work/state/snapshot" "$work/four.flipped"
start_calibd -c "$work/four.conf" --log-level info
status > "$work/f1.json"
check "one byte flipped in m1's section: m1 is lost (made afresh by its next message), m0, m2 and m3 keep 100 pairs and 500 waiting each ($(four "$work/f1.json"))
$(grep snapshot "$work/calibd.log" | sed 's/^/  /')" \
    '[ "$(four "$work/f1.json")" = "100/500 - 100/500 100/500" ] &&
     log_has "1 of 4 models could not be restored"'
stop_calibd
"$CALIBCTL" snapshot "$work/four.flipped" > "$work/f1c.json" 2> "$work/f1c.err"
rc=$?
check "calibctl snapshot of it: m0, m2 and m3 printed, m1 left out with a line saying where, exit 2 ($(cat "$work/f1c.err"))" \
    '[ $rc = 2 ] && [ "$(field "$work/f1c.json" "\" \".join(sorted(r[\"models\"]))")" = "m0 m2 m3" ] &&
     grep -q "a model skipped: the section at body byte $((a - $(sed -n 1p "$work/four.sections" | cut -d" " -f2))) .*checksum does not match" "$work/f1c.err"'
"$CALIBCTL" merge "$work/four.flipped" "$work/four" -o "$work/merged" > /dev/null 2> "$work/f1m.err"
rc=$?
check "calibctl merge refuses it: exit 2, saying why, nothing written" \
    '[ $rc = 2 ] && grep -q "checksum does not match" "$work/f1m.err" && [ ! -e "$work/merged" ]'
last=$(tail -n 1 "$work/four.sections" | cut -d" " -f1)
size=$(stat -c %s "$work/four")
head -c $((size - 1000)) "$work/four" > "$work/state/snapshot"
start_calibd -c "$work/four.conf" --log-level info
status > "$work/f2.json"
want=$(for m in m0 m1 m2 m3; do [ "$m" = "$last" ] && printf -- '- ' || printf '100/500 '; done)
check "the file cut 1,000 bytes short: the last section's model ($last) is lost, the others keep theirs ($(four "$work/f2.json"))
$(grep snapshot "$work/calibd.log" | sed 's/^/  /')" \
    '[ "$(four "$work/f2.json") " = "$want" ] && log_has "1 of 4 models could not be restored"'
stop_calibd
finish
