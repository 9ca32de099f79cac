#!/usr/bin/env bash
# ingest.sh — calibd driven by the C producer (examples/simulate) through
# every form and encoding, row and batch, string and integer ids, with labels
# inline, delayed, shuffled, duplicated and never arriving, over SUB and PULL.
# The figures of `calibctl status` must equal libcalib's offline results
# (`calibctl score`) on the same pairs, which the producer dumps.
. "$(dirname "$0")/lib.sh"

# label_ttl: far longer than the labels' delay (0.1 s) could become on a
# loaded machine, between calibd's reading of a prediction and its label's
printf '[daemon]\ningest_pull = tcp://127.0.0.1:*\n[model ttl]\nlabel_ttl = %s\n' "$(scaled 2)" > "$work/calibd.conf"
start_calibd -c "$work/calibd.conf" --log-level info # the expiry line is info

# run NAME SIMULATE-OPTIONS...: sends, then compares status with the dump
run() {
    local name=$1
    shift
    local dump="$work/$name.csv" summary
    "$SIMULATE" --endpoint ">$INGEST" --model "$name" --seed "${#name}" --count 300 \
        --linger-ms "$LINGER_MS" --dump "$dump" "$@" 2> "$work/$name.err" ||
        { bad "$name: simulate failed: $(cat "$work/$name.err")"; return; }
    summary=$(tail -1 "$work/$name.err")
    local pairs=$(( $(wc -l < "$dump") - 1 ))
    # a label's second copy may come after the last pair is scored (in a
    # message of its own, the last): wait for the duplicates too
    local dups=$(sed -n 's/.* \([0-9]*\) duplicated.*/\1/p' <<< "$summary")
    # the window is the one the last tick summed: wait for the tick too
    if ! wait_for "$work/$name.json" "r['models']['$name']['scored'] >= $pairs and r['models']['$name']['join']['duplicate_labels'] == ${dups:-0} and (r['models']['$name']['window'] or {}).get('scored') == r['models']['$name']['scored']"; then
        bad "$name: scored, duplicate labels $(json_get "$work/$name.json" "(lambda m: (m.get('scored'), m.get('join', {}).get('duplicate_labels')))(r['models'].get('$name', {}))") of $pairs pairs, ${dups:-0} duplicated ($summary)"
        return
    fi
    "$CALIBCTL" score "$dump" > "$work/$name.ref" || { bad "$name: calibctl score"; return; }
    # f32 outputs are dumped with 9 significant digits: equal to ~1e-9
    local tol=1e-8
    case "$*" in *"--encoding f64"*|*"--encoding array"*) tol=1e-12 ;; esac
    python3 - "$work/$name.json" "$work/$name.ref" "$name" "$tol" "$summary" <<'PY' && ok "$name" || bad "$name"
import json, re, sys
status, ref, name, tol, summary = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
m = json.load(open(status))["models"][name]
r = json.load(open(ref))
def close(a, b, what):
    if not abs(a - b) <= tol * max(1.0, abs(b)):
        sys.exit(f"{name}: {what}: calibd {a!r} vs calibctl score {b!r}")
assert m["scored"] == r["n"], (m["scored"], r["n"])
assert not m["rejected"], m["rejected"]
if r["form"] == "gaussian":
    close(m["raw"]["dss"]["mean"], r["dss"], "dss")
    close(m["raw"]["dss"]["ci"][0], r["dss_ci"][0], "dss ci")
else:
    for key in ("brier", "log"):
        close(m["raw"][key]["mean"], r[key], key)
        close(m["raw"][key]["ci"][1], r[key + "_ci"][1], key + " ci")
    close(m["raw"]["rbs"], r["rbs"], "rbs")
    close(m["raw"]["ece"], r["ece"], "ece")
    close(m["raw"]["tce2"], r["tce2_15"], "tce2")
    close(m["raw"]["cwce2"], r["cwce2_15"], "cwce2")
    # identity parameters: the calibrated view is the raw one
    close(m["calibrated"]["brier"]["mean"], r["brier"], "calibrated brier")
    close(m["window"]["raw"]["brier"]["mean"], r["brier"], "window brier")
j = m["join"]
dropped = int(re.search(r"(\d+) dropped", summary).group(1)) if "dropped" in summary else 0
duplicated = int(re.search(r"(\d+) duplicated", summary).group(1)) if "duplicated" in summary else 0
assert j["duplicate_labels"] == duplicated, (j, summary)
if name != "ttl":
    assert j["waiting_predictions"] == dropped, (j, summary)
assert m["scored"] == j["joined"] + m["scored_inline"], m
PY
}

run logits_f32_batch_delayed --form logits --encoding f32 --batch 50 --label-delay 0.2 \
    --label-shuffle --label-dup 0.1 --label-drop 0.1
run logits_f64_row_intids --form logits --encoding f64 --ids int --label-delay 0.1
run logits_array_batch_inline --form logits --encoding array --batch 20 --k 5
run probs_f64_batch_shuffled --form probs --encoding f64 --batch 25 --label-delay 0.1 --label-shuffle
run probs_array_row_inline --form probs --encoding array --ids int --k 3
run probs_f32_k1000 --form probs --encoding f32 --batch 10 --k 1000 --count 50 --label-delay 0.1
run binary_f32_batch_dup --form binary --encoding f32 --ids int --batch 10 --label-delay 0.1 --label-dup 0.3
run binary_array_row_inline --form binary --encoding array
run gaussian_f64_batch_dropped --form gaussian --encoding f64 --batch 30 --label-delay 0.1 --label-drop 0.2
run gaussian_array_row_inline --form gaussian --encoding array --ids int

# PUSH to the PULL socket: back-pressure instead of drops
dump="$work/pull.csv"
"$SIMULATE" --push --endpoint ">$PULL" --model pull --count 500 --batch 7 --label-delay 0.1 \
    --dump "$dump" --linger-ms "$LINGER_MS" 2> /dev/null
pairs=$(( $(wc -l < "$dump") - 1 ))
check pull_socket 'wait_for "$work/pull.json" "r[\"models\"][\"pull\"][\"scored\"] == $pairs"'

# labels that never arrive expire after the model's TTL (6 s here, 20 s
# under the sanitizers); those that arrive do not
"$SIMULATE" --endpoint ">$INGEST" --model ttl --count 200 --batch 10 --label-delay 0.1 \
    --label-drop 0.25 --linger-ms "$LINGER_MS" 2> "$work/ttl.err"
dropped=$(sed -n 's/.* \([0-9]*\) dropped.*/\1/p' "$work/ttl.err")
check ttl_expiry 'wait_for "$work/ttl.json" "r[\"models\"][\"ttl\"][\"join\"][\"expired_predictions\"] == $dropped and r[\"models\"][\"ttl\"][\"join\"][\"waiting_predictions\"] == 0"'
# and said in the log, not only counted (the line follows the count: a tick)
ttl_said() { grep -qE "ttl: [1-9][0-9]* predictions and [0-9]+ labels expired unmatched" "$work/calibd.log"; }
check ttl_expiry_logged 'wait_until ttl_said'

# a model's shape is fixed: another K or regression is rejected, counted
"$SIMULATE" --endpoint ">$INGEST" --model logits_f64_row_intids --k 4 --count 5 \
    --linger-ms "$LINGER_MS" 2> /dev/null
"$SIMULATE" --endpoint ">$INGEST" --model logits_f64_row_intids --form gaussian --count 3 \
    --linger-ms "$LINGER_MS" 2> /dev/null
check shape_mismatch 'wait_for "$work/shape.json" "r[\"models\"][\"logits_f64_row_intids\"][\"rejected\"].get(\"shape_mismatch\") == 8"'
# but probabilities for a logits model of the same K are the same shape
"$SIMULATE" --endpoint ">$INGEST" --model logits_f64_row_intids --form probs --count 4 \
    --ids int --seed 99 --linger-ms "$LINGER_MS" 2> /dev/null
check mixed_forms_same_k 'wait_for "$work/mixed.json" "r[\"models\"][\"logits_f64_row_intids\"][\"scored_inline\"] == 4"'

# labels before the first prediction of a model nobody configured wait for
# it: 800 labels first, then their predictions (float32 bins with "k"), in
# batches; the Brier score must be that of the right pairs
send_py "$PULL" > "$work/lf.brier" <<'PY'
import math, random
rng = random.Random(5)
n, k = 800, 4
ys = [rng.randrange(k) for _ in range(n)]
z = [[rng.gauss(0, 1.5) for _ in range(k)] for _ in range(n)]
for b in range(0, n, 100):
    send("labels_first", {"v": 1, "type": "label", "n": 100, "id": list(range(b, b + 100)),
                          "y": ys[b:b + 100]})
def brier(row, y):
    row = struct.unpack("<%df" % k, f32(row))  # what calibd reads
    m = max(row)
    e = [math.exp(v - m) for v in row]
    return sum((x / sum(e) - (j == y)) ** 2 for j, x in enumerate(e))
print(sum(brier(z[i], ys[i]) for i in range(n)) / n)
PY
check labels_first_wait 'wait_for "$work/lf1.json" "r[\"models\"][\"labels_first\"][\"join\"][\"waiting_labels\"] == 800 and r[\"models\"][\"labels_first\"][\"form\"] is None and not r[\"models\"][\"labels_first\"][\"rejected\"]"'
send_py "$PULL" <<'PY'
import random
rng = random.Random(5)
n, k = 800, 4
ys = [rng.randrange(k) for _ in range(n)]
z = [[rng.gauss(0, 1.5) for _ in range(k)] for _ in range(n)]
for b in range(0, n, 200):
    send("labels_first", {"v": 1, "type": "pred", "n": 200, "k": k,
                          "id": list(range(b, b + 200)),
                          "logits": f32([v for row in z[b:b + 200] for v in row])})
PY
check labels_first_scored 'wait_for "$work/lf2.json" "r[\"models\"][\"labels_first\"][\"scored\"] == 800"'
python3 - "$work/lf2.json" "$(cat "$work/lf.brier")" <<'PY' && ok labels_first_pairs || bad labels_first_pairs
import json, sys
m = json.load(open(sys.argv[1]))["models"]["labels_first"]
j = m["join"]
assert m["k"] == 4 and m["labels"] == 800 and not m["rejected"], m
assert j["joined"] == 800 and j["waiting_labels"] == 0 and j["waiting_predictions"] == 0, j
want = float(sys.argv[2])
assert abs(m["raw"]["brier"]["mean"] - want) < 1e-9, (m["raw"]["brier"], want)
PY

# a waiting label's y meets K when it joins: out of range, the pair is
# rejected as label_range; a y that is not finite is rejected at once
send_py "$PULL" <<'PY'
for i, y in (("a", 1), ("b", 7), ("c", 1.5), ("d", float("nan"))):
    send("late_range", {"v": 1, "type": "label", "id": i, "y": y})
PY
check late_range_wait 'wait_for "$work/lr1.json" "r[\"models\"][\"late_range\"][\"join\"][\"waiting_labels\"] == 3 and r[\"models\"][\"late_range\"][\"rejected\"] == {\"nonfinite\": 1}"'
send_py "$PULL" <<'PY'
for i in "abc":
    send("late_range", {"v": 1, "type": "pred", "id": i, "logits": [0.1, 0.2, 0.3]})
PY
check late_range_rejected 'wait_for "$work/lr2.json" "r[\"models\"][\"late_range\"][\"rejected\"] == {\"nonfinite\": 1, \"label_range\": 2} and r[\"models\"][\"late_range\"][\"scored\"] == 1 and r[\"models\"][\"late_range\"][\"join\"][\"joined\"] == 3"'
check late_range_logged 'log_has "topic \"late_range\": rejected (label_range), key \"y\": a label that waited for its prediction: y = 7 is not a class in [0, 3)"'

# string "5" and integer 5 are different ids: a label whose value waits as
# a prediction's of the other kind is counted and said; a label before
# its prediction is not looked at (labels wait rarely, predictions as a
# rule); a label of the same kind still joins
send_py "$PULL" <<'PY'
send("kinds", {"v": 1, "type": "pred", "id": "5", "logits": [0.1, 0.2, 0.3]})
send("kinds", {"v": 1, "type": "label", "id": 5, "y": 1})
send("kinds", {"v": 1, "type": "label", "id": "9", "y": 2})
send("kinds", {"v": 1, "type": "pred", "id": 9, "logits": [0.3, 0.2, 0.1]})
send("kinds", {"v": 1, "type": "label", "id": "5", "y": 0})
PY
check id_kind_mismatch_counted 'wait_for "$work/kinds.json" "r[\"models\"][\"kinds\"][\"join\"][\"id_kind_mismatches\"] == 1 and r[\"models\"][\"kinds\"][\"join\"][\"joined\"] == 1"'
check id_kind_mismatch_logged 'log_has "kinds: a label'"'"'s id 5 is an integer, and its prediction waits with the same value as a string: string and integer ids never join"'

stop_calibd
check sigterm_exit_0 '[ $? -eq 0 ]'
finish
