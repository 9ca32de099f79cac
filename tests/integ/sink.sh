#!/usr/bin/env bash
# sink.sh — an exec alert sink that hangs: calibd keeps answering, kills it
# at alert_exec_timeout with the children it started, counts and logs it.
. "$(dirname "$0")/lib.sh"

make_sink
touch "$work/hang"
cat > "$work/calibd.conf" <<EOF
[daemon]
tick = 0.2
alert_exec = $work/sink.sh
alert_exec_timeout = $(scaled 3)
[model starved]
form = logits
k = 10
drift = no
label_starvation = 1
EOF
start_calibd -c "$work/calibd.conf"

# the starved model starves: its alert goes to the sink, which hangs
"$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 100 --model starved \
    --seed 15 --count 500 --rate 5000 --label-delay 1 --label-drop 1 2> /dev/null
check "the sink runs, and hangs" 'wait_until "[ -s \"$work/sink_child.pid\" ]"'
child=$(cat "$work/sink_child.pid" 2> /dev/null)
[ -n "$child" ] && track "$child"

# ping while the sink hangs, until calibd has killed it. A ping proves
# calibd free when it is answered before the status that follows it still
# counts no kill (an order, not a time: the sink hung before the first);
# every ping is answered (within a ceiling longer than the hang). One
# python asks both (a calibctl and a python for each took 200 ms of CPU
# under the sanitizers).
read -r pings during blocked < <("$PY" - "$CONTROL" "$(scaled 10)" <<'PY'
import sys, time, msgpack, zmq
control, timeout = sys.argv[1], float(sys.argv[2])
ctx = zmq.Context()
def ask(cmd):
    s = ctx.socket(zmq.REQ)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(control)
    s.send(msgpack.packb({"v": 1, "cmd": cmd}))
    r = msgpack.unpackb(s.recv(), raw=False) if s.poll(int(timeout * 1000)) else None
    s.close()
    return r
pings = during = blocked = 0
while pings < 100:
    blocked += ask("ping") is None
    pings += 1
    st = ask("status")
    k = st["alerts"]["sink_killed"] if st else None
    if k == 1:
        break
    during += k == 0
    time.sleep(0.1)
print(pings, during, blocked)
PY
)
echo "# $pings pings, $during of them answered while the sink hung, $blocked unanswered"
check "calibd answers while the sink hangs" '[ $during -ge 1 ] && [ $blocked -eq 0 ]'
check "a hanging exec sink is killed at its timeout" \
    'wait_for "$work/s.json" "r[\"alerts\"][\"sink_killed\"] == 1 and r[\"alerts\"][\"sent\"] == 1"'
check "the alert reached the sink before it hung" 'grep -q "label_starvation" "$work/alerts.jsonl"'
check "the sink's own children are killed with it" \
    '[ -n "$child" ] && wait_until "! kill -0 $child 2> /dev/null" 5'
rm -f "$work/hang"
check "calibd stops cleanly after the sink" "stop_calibd"
check "the kill is logged" 'grep -q "killed" "$work/calibd.log"'
finish
