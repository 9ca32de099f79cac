#!/usr/bin/env bash
# kafka_scaling.sh [BUILD_DIR] — what a second calibd in the consumer group
# adds: the rate at which ONE calibd, then TWO in one group, score a topic
# that holds the whole stream before any of them starts.
#
# librdkafka's mock cluster (tests/kafka/mock, a process of its own) gets a
# topic "preds" of P partitions (PARTS, default "4 8": one cluster and topic
# each). tests/integ/kafka_feed.py loads it through the Python package's
# producer: N pairs (default 400,000) of 8 models km-0..7 (K = 4 logits,
# labels as separate messages two rounds late, joined by id), BATCH rows a
# message (default 50; 1: the row form), keyed by model. The mock cluster
# keeps 5 MiB a partition and drops the oldest beyond: 400,000 pairs of 50
# rows a message is about what 4 partitions hold; the script stops when a
# partition's first offset is not 0. Then, RUNS times
# (default 3), alternating: one calibd, then two, each time in a fresh
# group with a fresh shared state_dir (no snapshot, no committed offset:
# from the earliest), HTTP off, snapshot_interval 3600 (no periodic
# partition snapshot within a run), calibd's defaults otherwise (the closed
# loop on: these models are overconfident and get refitted).
#
# A poller (Python, below) sends {"v": 1, "cmd": "status"} — calibctl
# status's request — to every instance's control socket every POLL s (0.05). The
# clock starts at the first poll whose sum of r["kafka"]["messages"] is
# nonzero (so the mock cluster's ~3 s delay before a new group's first
# rebalance is not counted) and stops at the first whose sum of
# r["models"][*]["scored"] reaches N: rate = N / that time (± the poll
# interval at each end). CPU seconds of every process over the same interval, from
# /proc/PID/stat (utime + stime): each calibd (and its loop thread alone),
# the mock cluster, the poller. A run whose instances did not split the
# partitions evenly in one rebalance is flagged.
#
# Prints one line a run, then a table: median and range of pairs/s for one
# and two instances, the ratio of the medians (also with the pairs scored
# before the first poll left out of N), calibd's and the mock's CPU.
# Run: tests/bench/kafka_scaling.sh build/plain
#      (N=200000 pairs; RUNS=5; PARTS=4; BATCH=1 for the row form; KEEP=1
#      keeps the work directory: res.P.INSTANCES.RUN hold each run's polls;
#      TIMEOUT=120 seconds a run may take; POLL=0.01 polls every 10 ms;
#      MODELS=64 models instead of 8;
#      PY=/usr/bin/python3 needs zmq, msgpack and confluent_kafka)
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$(pwd)
dir=$(cd "${1:-build/plain}" && pwd)
n=${N:-400000}
runs=${RUNS:-3}
parts_list=${PARTS:-4 8}
batch=${BATCH:-50}
models=${MODELS:-8}
poll=${POLL:-0.05}
py=${PY:-/usr/bin/python3}
[ -x "$dir/tests/kafka/mock" ] || make -C "$dir" tests/kafka/mock > /dev/null
"$py" -c 'import zmq, msgpack, confluent_kafka' ||
    { echo "$py needs zmq, msgpack and confluent_kafka" >&2; exit 1; }
work=$(mktemp -d)
mock=
insts=()
cleanup() {
    # an instance whose cluster is gone does not leave its group: -KILL
    for p in "${insts[@]}"; do kill -KILL "$p" 2> /dev/null || true; done
    [ -z "$mock" ] || kill "$mock" 2> /dev/null || true
    wait 2> /dev/null || true
    if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# The poller: poll.py N OUT MOCK_PID (CONTROL PID)... — the timing, the CPU
# times, each instance's share; one line of JSON to OUT.
cat > "$work/poll.py" <<'PY'
import json, os, sys, time
import msgpack, zmq

n, out, mock = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctls, pids = sys.argv[4::2], [int(p) for p in sys.argv[5::2]]
hz = os.sysconf("SC_CLK_TCK")


def cpu(pid, tid=None):
    """utime + stime in seconds of a process (or of one of its threads)."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / hz


def cpus():
    c = {"mock": cpu(mock), "poller": sum(os.times()[:2])}
    for i, p in enumerate(pids):
        c[f"calibd{i}"] = cpu(p)
        c[f"loop{i}"] = cpu(p, p)  # the main thread: calibd's loop
    return c


ctx = zmq.Context()
socks = []
for c in ctls:
    s = ctx.socket(zmq.REQ)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(c)
    socks.append(s)
req = msgpack.packb({"v": 1, "cmd": "status"})


def status():
    rs = []
    for s in socks:
        s.send(req)
        if not s.poll(10000):
            raise SystemExit("no status answer within 10 s")
        rs.append(msgpack.unpackb(s.recv(), raw=False, strict_map_key=False))
    return rs


t0 = c0 = None
polls, trace = 0, []
deadline = time.monotonic() + float(os.environ.get("TIMEOUT", 120))
while time.monotonic() < deadline:
    tick = time.monotonic()
    rs = status()
    t = time.monotonic()
    polls += 1
    msgs = sum(r["kafka"]["messages"] for r in rs)
    scored = sum(m["scored"] for r in rs for m in r["models"].values())
    if msgs:
        trace.append((round(t, 3), msgs, scored))
    if t0 is None and msgs:
        t0, c0, first = t, cpus(), {"messages": msgs, "scored": scored, "polls": polls}
    if t0 is not None and scored >= n:
        t1, c1 = t, cpus()
        break
    time.sleep(max(0.0, tick + float(os.environ.get("POLL", 0.05)) - time.monotonic()))
else:
    json.dump({"timeout": True, "trace": trace, "status": rs}, open(out + ".timeout", "w"))
    raise SystemExit("timed out: %d of %d pairs scored, %d messages" % (scored, n, msgs))
res = {
    "seconds": t1 - t0, "rate": n / (t1 - t0), "scored": scored, "first": first,
    "cpu": {k: c1[k] - c0[k] for k in c0},
    "inst": [{"messages": r["kafka"]["messages"],
              "scored": sum(m["scored"] for m in r["models"].values()),
              "models": len(r["models"]),
              "partitions": sorted(p["partition"] for p in r["kafka"]["partitions"]),
              "assigned": r["kafka"]["assigned"], "revoked": r["kafka"]["revoked"]}
             for r in rs],
    "load": open("/proc/loadavg").read().split()[0],
    "trace": trace,
}
json.dump(res, open(out, "w"))
PY

# instance NAME GROUP SHARED: calibd NAME in $work/NAME, a member of GROUP;
# sets ctl and appends its pid to insts
instance() {
    local d=$work/$1
    mkdir -p "$d/state"
    cat > "$d/calibd.conf" <<EOF
[daemon]
snapshot_interval = 3600
[defaults]
form = logits
k = 4
[kafka]
brokers = $boot
topics = preds
group = $2
state_dir = $3
EOF
    "$dir/calibd" -c "$d/calibd.conf" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
        --control 'tcp://127.0.0.1:*' --http off --state-dir "$d/state" \
        --log-level warn 2> "$d/log" &
    insts+=($!)
}

# measure P INSTANCES RUN: one measurement; its JSON in $work/res.P.INSTANCES.RUN
measure() {
    local p=$1 k=$2 r=$3 g=g$1-$2-$3 i args=()
    mkdir -p "$work/$g"
    insts=()
    for ((i = 0; i < k; i++)); do
        instance "$g-$i" "$g" "$work/$g"
    done
    for ((i = 0; i < k; i++)); do
        until [ -s "$work/$g-$i/state/endpoints" ]; do
            kill -0 "${insts[$i]}" 2> /dev/null || { cat "$work/$g-$i/log" >&2; exit 1; }
            sleep 0.05
        done
        args+=("$(awk '$1 == "control" {print $2}' "$work/$g-$i/state/endpoints")" "${insts[$i]}")
    done
    POLL=$poll TIMEOUT=${TIMEOUT:-120} "$py" "$work/poll.py" "$n" "$work/res.$p.$k.$r" "$mock" "${args[@]}"
    for i in "${insts[@]}"; do kill -TERM "$i"; done
    for i in "${insts[@]}"; do wait "$i" || true; done
    insts=()
    "$py" - "$work/res.$p.$k.$r" "$p" "$k" "$n" <<'PY'
import json, sys
r, p, k, n = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
c, s = r["cpu"], r["seconds"]
parts = [i["partitions"] for i in r["inst"]]
even = all(len(i["partitions"]) == i["assigned"] == p // k and not i["revoked"] for i in r["inst"])
share = " + ".join(f"{i['scored']}" for i in r["inst"])
cal = ", ".join(f"calibd{i} {c[f'calibd{i}']:.2f} (loop {c[f'loop{i}']:.2f})" for i in range(k))
print(f"P={p} instances={k}: {r['rate']:,.0f} pairs/s ({s:.2f} s; scored {share}; "
      f"partitions {parts}{'' if even else ' UNEVEN, or not in one rebalance'}); "
      f"CPU s: {cal}, mock {c['mock']:.2f}, poller {c['poller']:.2f}; "
      f"first poll: {r['first']['messages']} messages, {r['first']['scored']} pairs; load {r['load']}",
      flush=True)
PY
}

for p in $parts_list; do
    mkdir -p "$work/pairs.$p"
    "$dir/tests/kafka/mock" "preds:$p" > "$work/boot.$p" 2> "$work/mock.$p.log" &
    mock=$!
    until [ -s "$work/boot.$p" ]; do sleep 0.05; done
    boot=$(cat "$work/boot.$p")
    t=$(date +%s.%N)
    "$py" "$src/tests/integ/kafka_feed.py" "$boot" preds "$work/pairs.$p" --pairs "$n" \
        --models "$models" --batch "$batch" 2> "$work/feed.$p.log" || { cat "$work/feed.$p.log" >&2; exit 1; }
    echo "P=$p: loaded $n pairs, $batch rows a message, in $(echo "$(date +%s.%N) - $t" | bc) s: $(cat "$work/feed.$p.log")"
    "$py" - "$boot" "$p" <<'PY'
import sys
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "watermarks"})
w = [c.get_watermark_offsets(TopicPartition("preds", i), timeout=10) for i in range(int(sys.argv[2]))]
c.close()
print("P=%s: messages a partition: %s" % (sys.argv[2], " ".join(str(hi) for lo, hi in w)))
# the mock cluster keeps 5 MiB (and 100,000 message sets) a partition and
# drops the oldest beyond: a stream that does not fit is not all there
if any(lo for lo, hi in w):
    sys.exit("P=%s: the mock cluster dropped the oldest messages (first offsets %s): "
             "lower N" % (sys.argv[2], " ".join(str(lo) for lo, hi in w)))
PY
    for ((r = 1; r <= runs; r++)); do
        measure "$p" 1 "$r"
        measure "$p" 2 "$r"
    done
    kill "$mock"
    wait "$mock" 2> /dev/null || true
    mock=
done

# shellcheck disable=SC2086 # the list of partition counts, split
"$py" - "$work" "$runs" "$n" $parts_list <<'PY'
import json, statistics, sys
work, runs, n, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
print()
print(f"{n:,} pairs, {runs} runs a cell: median (range) pairs/s; CPU s a run, median")
print("| partitions | 1 instance | 2 instances | ratio (medians) | ratio, first poll's pairs left out | CPU 1: calibd / mock | CPU 2: calibd+calibd / mock |")
print("|---|---|---|---|---|---|---|")
for p in parts:
    rates, adj, cpu = {}, {}, {}
    for k in (1, 2):
        rs = [json.load(open(f"{work}/res.{p}.{k}.{r}")) for r in range(1, runs + 1)]
        rates[k] = [r["rate"] for r in rs]
        # the pairs scored before the first poll that saw a message, and
        # their time, left out: (N - those) / the same seconds
        adj[k] = statistics.median((n - r["first"]["scored"]) / r["seconds"] for r in rs)
        cal = statistics.median(sum(r["cpu"][f"calibd{i}"] for i in range(k)) for r in rs)
        each = " + ".join("%.2f" % statistics.median(r["cpu"][f"calibd{i}"] for r in rs)
                          for i in range(k))
        cpu[k] = "%s / %.2f" % (each if k > 1 else "%.2f" % cal,
                                statistics.median(r["cpu"]["mock"] for r in rs))
    m = {k: statistics.median(v) for k, v in rates.items()}
    print("| %s | %s (%s–%s) | %s (%s–%s) | %.2f | %.2f | %s | %s |" % (
        p, f"{m[1]:,.0f}", f"{min(rates[1]):,.0f}", f"{max(rates[1]):,.0f}",
        f"{m[2]:,.0f}", f"{min(rates[2]):,.0f}", f"{max(rates[2]):,.0f}", m[2] / m[1],
        adj[2] / adj[1], cpu[1], cpu[2]))
PY
