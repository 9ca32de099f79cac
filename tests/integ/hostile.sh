#!/usr/bin/env bash
# hostile.sh — every rejection class of the protocol, random bytes, truncated
# and oversized messages: each reason's counter moves by exactly what was
# sent, calibd stays up, and valid traffic is still scored afterwards.
. "$(dirname "$0")/lib.sh"

printf '[daemon]\nmax_msg_size = 1048576\ningest_pull = tcp://127.0.0.1:*\n' > "$work/calibd.conf"
start_calibd -c "$work/calibd.conf"

"$HOSTILE" --endpoint ">$INGEST" --random 50 --seed 3 --linger-ms "$LINGER_MS" > "$work/sent" ||
    { bad "hostile sender failed"; finish; exit; }
"$HOSTILE" --map > "$work/map"
# 39 classes + 50 random; the oversized one is dropped by ZeroMQ unseen
check all_received 'wait_for "$work/s.json" "r[\"messages\"] == 89"'
check still_alive '"$CALIBCTL" ping --control "$CONTROL" > /dev/null'
python3 - "$work/s.json" "$work/sent" "$work/map" <<'PY' && ok reasons_counted || bad reasons_counted
import collections, json, sys
r = json.load(open(sys.argv[1]))
sent = dict(l.split() for l in open(sys.argv[2]))
reason = dict(l.split() for l in open(sys.argv[3]))
want = collections.Counter()
for cls, n in sent.items():
    if reason[cls] not in ("varies", "none"):
        want[reason[cls]] += int(n)
got = collections.Counter(r["rejected"])
for m in r["models"].values():
    got.update(m["rejected"])
random_total = sum(got.values()) - sum(want.values())
bad = {k: (got[k], want[k]) for k in want if got[k] < want[k]}
if bad:
    sys.exit(f"reasons short of what was sent (got, want): {bad}")
# whatever is over comes from the 50 random payloads, every one rejected
if random_total != int(sent["random"]):
    sys.exit(f"random payloads: {random_total} extra rejections, want {sent['random']}: {dict(got)}")
PY

# every rejection line names the topic (escaped, cut), the reason and the key
check log_topic_escaped 'log_has "topic \"hostile/model name\\xff\" (no model): rejected (bad_topic)"'
check log_topic_cut 'log_has "topic \"$(printf "a%.0s" $(seq 64))...(129 bytes)\" (no model): rejected (bad_topic)"'
check log_key_named 'log_has "rejected (bad_version), key \"v\"" && log_has "rejected (key_type), key \"logits\""'
check log_record_key 'log_has "topic \"hostile\": rejected (bad_id), key \"id\": record 2 of 3"'
# an ambiguous row-form bin: its own reason, and the fix in the log
check log_bin_ambiguous 'log_has "topic \"hostile.ambiguous\" (no model): rejected (bin_ambiguous), key \"probs\": a bin of 16 bytes is 4 float32 or 2 float64" && log_has "send \"k\" (the number of classes) with the prediction, or configure k"'

# the log's rate limit is per reason: a burst of one reason does not hide
# the next line of another
send_py "$PULL" <<'PY'
for i in range(30):
    send("burst", {"v": 1, "type": "labels"})
kv = [("v", 1), ("type", "label"), ("id", 1), ("id", 2), ("y", 0)]  # "id" twice
send("burst", bytes([0x80 | len(kv)]) + b"".join(msgpack.packb(k) + msgpack.packb(v) for k, v in kv))
PY
check burst_received 'wait_for "$work/b.json" "r[\"rejected\"].get(\"duplicate_key\") == 1"'
check rate_limit_per_reason 'log_has "topic \"burst\" (no model): rejected (duplicate_key), key \"id\""'
n=$(grep -c 'rejected (bad_type)' "$work/calibd.log")
check "rate_limit_holds ($n bad_type lines of 33)" '[ "$n" -le 20 ]'

# valid traffic is still scored
"$SIMULATE" --endpoint ">$INGEST" --model after --count 200 --batch 20 \
    --linger-ms "$LINGER_MS" 2> /dev/null
check valid_after_hostile 'wait_for "$work/after.json" "r[\"models\"][\"after\"][\"scored\"] == 200 and not r[\"models\"][\"after\"][\"rejected\"]"'
stop_calibd
check sigterm_exit_0 '[ $? -eq 0 ]'
finish
