#!/usr/bin/env bash
# shards.sh — shards add up. Two calibd instances own models by topic
# prefix (subscribe): A takes a-* and p-*, B takes b-* and p-*, and a third,
# W, takes everything. The same pairs go to the owners and to W: model a-1
# to A, b-1 to B, and p-1 split in two halves, one to A and one to B (a
# model whose traffic is split between shards). A producer of b-1 also
# publishes to A, which never sees it. After a stop, `calibctl merge` of
# A's and B's snapshots holds what W holds: the same pairs, means, ECE and
# reliability bins.
. "$(dirname "$0")/lib.sh"

declare -A pid ctl ing
# one NAME SUBSCRIBE: a calibd in $work/NAME
one() {
    local name=$1 dir=$work/$1
    mkdir -p "$dir"
    {
        printf '[daemon]\n'
        [ -n "$2" ] && printf 'subscribe = %s\n' "$2"
        printf '[defaults]\nform = logits\nk = 10\nring = 4000\nreservoir = 2000\n'
    } > "$dir/calibd.conf"
    "$CALIBD" -c "$dir/calibd.conf" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
        --control 'tcp://127.0.0.1:*' --http off --state-dir "$dir/state" \
        --log-level warn 2> "$dir/calibd.log" &
    pid[$name]=$!
    track "${pid[$name]}"
    wait_until "[ -s '$dir/state/endpoints' ]" 10
    ctl[$name]=$(awk '$1 == "control" {print $2; exit}' "$dir/state/endpoints")
    ing[$name]=$(awk '$1 == "ingest" {print $2; exit}' "$dir/state/endpoints")
    "$CALIBCTL" ping --control "${ctl[$name]}" --timeout "$(scaled 5)" > /dev/null ||
        { echo "Bail out! calibd $name did not start"; exit 1; }
}
one A "a-, p-"
one B "b-, p-"
one W ""

# send NAME MODEL SEED [OPTION]: 3000 pairs of MODEL from SEED to instance
# NAME, once NAME has subscribed to MODEL's topic. A never subscribes to
# b-1's: that sender goes on after 2 s, when A's own subscriptions are in.
send() {
    "$SIMULATE" --endpoint ">${ing[$1]}" --model "$2" --seed "$3" --temperature 2 \
        --count 3000 --batch 50 --linger-ms "$LINGER_MS" "${@:4}" 2> /dev/null
}
senders=()
for s in "A a-1 1" "W a-1 1" "B b-1 2" "W b-1 2" "A p-1 3" "W p-1 3" "B p-1 4" "W p-1 4" \
         "A b-1 5 --warmup-ms=2000"; do
    send $s &
    senders+=($!)
    track $!
done
wait_n() { # NAME MODEL N: NAME has scored N pairs of MODEL
    "$CALIBCTL" status --control "${ctl[$1]}" "$2" 2> /dev/null |
        "$PY" -c "import json,sys; sys.exit(0 if json.load(sys.stdin)['models']['$2']['scored'] == $3 else 1)" \
            2> /dev/null # the model does not exist yet: not yet
}
check "every owner scored its pairs: A a-1 and p-1, B b-1 and p-1, W all (3000 or 6000 each)" \
    'wait_until "wait_n A a-1 3000 && wait_n A p-1 3000 && wait_n B b-1 3000 && wait_n B p-1 3000 && wait_n W a-1 3000 && wait_n W b-1 3000 && wait_n W p-1 6000" 30'
wait "${senders[@]}"
"$CALIBCTL" status --control "${ctl[A]}" > "$work/a.json"
check "A, subscribed to a- and p-, never saw b-1 (no model, no rejection)" \
    '"$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if sorted(r[\"models\"]) == [\"a-1\", \"p-1\"] and not r[\"rejected\"] else 1)" "$work/a.json"'
for n in A B W; do
    kill -TERM "${pid[$n]}"
    wait "${pid[$n]}"
done
"$CALIBCTL" merge "$work/A/state/snapshot" "$work/B/state/snapshot" -o "$work/merged" \
    > "$work/merge.out" 2> "$work/merge.err"
check "calibctl merge A B -o merged: $(cat "$work/merge.out" "$work/merge.err")" \
    '[ -s "$work/merged" ] && grep -q "\"models\": 3" "$work/merge.out"'
"$CALIBCTL" snapshot "$work/merged" > "$work/m.json"
"$CALIBCTL" snapshot "$work/W/state/snapshot" > "$work/w.json"
"$PY" - "$work/m.json" "$work/w.json" > "$work/cmp.out" <<'PY'
import json, sys
m, w = (json.load(open(f))["models"] for f in sys.argv[1:3])
bad = []
if sorted(m) != sorted(w):
    bad.append("models %s vs %s" % (sorted(m), sorted(w)))
for name in sorted(set(m) & set(w)):
    a, b = m[name], w[name]
    def close(x, y):
        return x == y or abs(x - y) <= 1e-12 * abs(y)
    if a["scored"] != b["scored"]:
        bad.append("%s scored %s vs %s" % (name, a["scored"], b["scored"]))
    for view in ("raw", "calibrated"):
        for score in ("brier", "log"):
            x, y = a[view][score]["mean"], b[view][score]["mean"]
            if not close(x, y):
                bad.append("%s %s %s mean %r vs %r" % (name, view, score, x, y))
        if not close(a[view]["ece"], b[view]["ece"]):
            bad.append("%s %s ece %r vs %r" % (name, view, a[view]["ece"], b[view]["ece"]))
        rc, wc = a["reliability"]["cumulative"][view], b["reliability"]["cumulative"][view]
        if rc["count"] != wc["count"] or rc["correct"] != wc["correct"]:
            bad.append("%s %s reliability bins differ" % (name, view))
    if a["samples"]["reservoir"] != min(2000, b["scored"]):
        bad.append("%s reservoir %s" % (name, a["samples"]["reservoir"]))
    print("# %s: %d pairs, Brier %.15g (merged) %.15g (whole), ECE %.6g" % (
        name, a["scored"], a["raw"]["brier"]["mean"], b["raw"]["brier"]["mean"], a["raw"]["ece"]))
for line in bad:
    print("# " + line)
sys.exit(1 if bad else 0)
PY
rc=$?
cat "$work/cmp.out"
check "the merged snapshot of A and B equals W's: pairs, means (1e-12), ECE, reliability bins, reservoirs" \
    '[ $rc -eq 0 ]'
finish
