#!/usr/bin/env bash
# hostile.sh — every rejection class of the protocol, random bytes, truncated
# and oversized messages: each reason's counter moves by exactly what was
# sent, calibd stays up, and valid traffic is still scored afterwards.
. "$(dirname "$0")/lib.sh"

printf '[daemon]\nmax_msg_size = 1048576\n' > "$work/calibd.conf"
start_calibd -c "$work/calibd.conf"

"$HOSTILE" --endpoint ">$INGEST" --random 50 --seed 3 --warmup-ms 300 > "$work/sent" ||
    { bad "hostile sender failed"; finish; exit; }
"$HOSTILE" --map > "$work/map"
# 38 classes + 50 random; the oversized one is dropped by ZeroMQ unseen
check all_received 'wait_for "$work/s.json" "r[\"messages\"] == 88"'
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

# valid traffic is still scored
"$SIMULATE" --endpoint ">$INGEST" --model after --count 200 --batch 20 --warmup-ms 300 \
    --linger-ms 1000 2> /dev/null
check valid_after_hostile 'wait_for "$work/after.json" "r[\"models\"][\"after\"][\"scored\"] == 200 and not r[\"models\"][\"after\"][\"rejected\"]"'
stop_calibd
check sigterm_exit_0 '[ $? -eq 0 ]'
finish
