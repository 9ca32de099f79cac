#!/usr/bin/env bash
# subscribers.sh — serving nodes that never read cannot grow calibd without
# bound: each subscriber's queue holds at most publish_memory bytes (the
# send high-water mark is sized by the largest message calibd writes,
# CALIB_PUBMSG_MAX_BYTES). 20 subscribers connect and read nothing while
# calibd republishes 300 models' parameters ten times a second for 10 s;
# its resident memory grows by less than 8 MB (the earlier calibd: 20 MB
# and more, its queues still filling). (Before, a queue held 100,000 messages: 200 such
# subscribers took calibd from 630 MB to 2.85 GB.)
. "$(dirname "$0")/lib.sh"
if [ "${CALIB_SANITIZERS:-no}" = yes ]; then
    skip_all "under the sanitizers (their memory is not calibd's)"
fi
{
    printf '[daemon]\ntick = 0.05\nparams_interval = 0.1\npublish_memory = 65536\n'
    printf '[defaults]\nform = binary\n'
    for i in $(seq 300); do printf '[model m%d]\n' "$i"; done
} > "$work/calibd.conf"
start_calibd -c "$work/calibd.conf" --log-level info
rss() { awk '/^VmRSS/ {print $2}' "/proc/$calibd_pid/status"; }
# waits on calibd's clock through one model's status (all 300 are 6 MB)
uptime_of() { status m1 --timeout "$(scaled 5)" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["uptime"])'; }
past() { local t; t=$(uptime_of) && wait_until "\"$PY\" -c 'import sys; sys.exit(not float(sys.argv[1]) >= float(sys.argv[2]) + $1)' \"\$(uptime_of)\" $t"; }
past 1 || bad "a second of republishing"
rss0=$(rss)
# 20 subscribers that read nothing, with the smallest buffers their side
"$PY" - "$PUBLISH" "$work/subscribed" <<'PY' &
import sys, time, zmq
ctx = zmq.Context()
socks = []
for _ in range(20):
    s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.RCVHWM, 1)
    s.setsockopt(zmq.RCVBUF, 4096)
    s.setsockopt(zmq.SUBSCRIBE, b"")
    s.connect(sys.argv[1])
    socks.append(s)
open(sys.argv[2], "w").write("20\n")
time.sleep(300)
PY
track $!
wait_until '[ -s "$work/subscribed" ]' || bad "the subscribers connected"
# 10 s of calibd's clock: 100 rounds of 300 messages for each subscriber
past 10 || bad "ten seconds of republishing"
rss1=$(rss)
echo "# resident memory: $rss0 kB before the subscribers, $rss1 kB after 10 s of them"
check "20 subscribers that read nothing grow calibd by less than 8 MB ($(( (rss1 - rss0) / 1024 )) MB)" \
    '[ $((rss1 - rss0)) -lt $((8 * 1024)) ]'
check "the send high-water mark is logged: 64 KiB / 10 KiB = 6 messages" \
    'log_has "publish: at most 6 messages (publish_memory = 65536 bytes) queued for a subscriber"'
check "calibd stops cleanly" "stop_calibd"
finish
