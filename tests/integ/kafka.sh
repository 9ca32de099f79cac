#!/usr/bin/env bash
# kafka.sh — a consumer group of calibd instances on librdkafka's mock
# cluster (tests/kafka/mock), and a crash in the middle of the stream.
#
# Topic "preds" has 4 partitions; 100,000 pairs of 8 models (km-0..7) go
# in through the Python package's Kafka producer (kafka_feed.py), each
# message keyed by its model. W, alone in group "w", reads the whole stream
# without interruption. A and B share group "g" and its state directory:
# A reads part 1 alone; B joins (A writes its 4 partitions, each takes 2);
# part 2 flows while A is killed -9 past its last partition snapshots; B
# takes A's partitions from their snapshots and reads on from their
# offsets; part 3 goes in while A is down; A restarts and takes 2 back.
# Then:
# - the partitions' snapshots merged (calibctl merge) hold, model by model,
#   the figures of W's uninterrupted run and of `calibctl score` on the
#   same pairs, exactly (floats compared as they are), and the same join
#   table (joined, waiting, duplicates);
# - every params message (kafka_watch.py on every PUB socket) shows no
#   version going back, and no model published by two instances at once;
# - an idle member stays one: polled within max.poll.interval.ms, it keeps
#   its partitions through a silence longer than that;
# - a partition file that cannot be used is read again from the earliest
#   offset: C, started alone on the group's files, holds W's figures.
# One model (km-0) has a [model] section: it is made by its first message
# or its partition's snapshot, never ahead of them.
# KAFKA_STRATEGY: the group's partition.assignment.strategy (unset:
# librdkafka's default, eager; kafka_cooperative.sh: cooperative-sticky).
. "$(dirname "$0")/lib.sh"

MOCK=$BUILDDIR/tests/kafka/mock
FEED="$PY $srcdir/tests/integ/kafka_feed.py"
"$PY" -c 'import confluent_kafka' 2> /dev/null ||
    skip_all "python3-confluent-kafka is not installed (scripts/deps.sh installs it)"

"$MOCK" preds:4 > "$work/boot" 2> "$work/mock.log" &
track $!
wait_until "[ -s '$work/boot' ]" 10 || { echo "Bail out! the mock cluster did not start"; exit 1; }
BOOT=$(cat "$work/boot")
mkdir -p "$work/pairs" "$work/shared" "$work/wshared"

declare -A pid ctl pull http
# one NAME GROUP SHARED INTERVAL [RUN]: calibd NAME in $work/NAME, a member
# of GROUP, writing its snapshots every INTERVAL seconds; group g's PUB
# sockets are watched, labelled NAME RUN
one() {
    local name=$1 dir=$work/$1
    mkdir -p "$dir"
    cat > "$dir/calibd.conf" <<EOF
[daemon]
ingest_pull = tcp://127.0.0.1:*
snapshot_interval = $4
params_interval = 1
tick = 0.2
[defaults]
form = logits
k = 4
[kafka]
brokers = $BOOT
topics = preds
group = $2
state_dir = $3
session.timeout.ms = 6000
heartbeat.interval.ms = 500
max.poll.interval.ms = 8000
${KAFKA_STRATEGY:+partition.assignment.strategy = $KAFKA_STRATEGY}
[model km-0]
label_ttl = 7200
EOF
    rm -f "$dir/state/endpoints"
    "$CALIBD" -c "$dir/calibd.conf" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
        --control 'tcp://127.0.0.1:*' --http 127.0.0.1:0 --state-dir "$dir/state" \
        --log-level info 2>> "$dir/calibd.log" &
    pid[$name]=$!
    track "${pid[$name]}"
    wait_until "[ -s '$dir/state/endpoints' ]" 20 || { echo "Bail out! calibd $name did not start"; exit 1; }
    ctl[$name]=$(awk '$1 == "control" {print $2; exit}' "$dir/state/endpoints")
    pull[$name]=$(awk '$1 == "ingest_pull" {print $2; exit}' "$dir/state/endpoints")
    http[$name]=$(awk '$1 == "http" {print $2; exit}' "$dir/state/endpoints")
    [ "$2" = g ] &&
        echo "$name${5:-} $(awk '$1 == "publish" {print $2; exit}' "$dir/state/endpoints")" >> "$work/pubs"
    return 0
}
st() { "$CALIBCTL" status --control "${ctl[$1]}" --timeout "$TIME_SCALE" 2> /dev/null; }
# q NAME EXPR: the python EXPR on NAME's status r (fails while it does not answer)
q() { st "$1" > "$work/$1.json" && json_get "$work/$1.json" "$2" 2> /dev/null; }
# kwait "NAME..." EXPR SECONDS: polls the named instances' status in the
# script's helper (tests/integ/status.py) until the python EXPR holds: s[NAME] the
# status, parts("NAME") the partitions held, scored("NAME") the pairs.
# (q starts a calibctl and a python, 80 ms of CPU each under the
# sanitizers: polled so, a wait on two instances took a core)
kwait() {
    local named=() n
    for n in $1; do named+=("$n=${ctl[$n]}"); done
    ask all "$2" "$(scaled "$3")" "$TIME_SCALE" "${named[@]}"
}
scored() { q "$1" "sum(m['scored'] for m in r['models'].values())"; }

"$PY" "$srcdir/tests/integ/kafka_watch.py" "$work/pubs" "$work/published" 2> "$work/watch.log" &
track $!
# A writes its partitions only when it hands them over: what it takes after
# B joins is in no snapshot when it is killed
one W w "$work/wshared" 2
one A g "$work/shared" 3600 1

# part 1: rounds 0..79 of 252 (50 pairs a model a round; labels 2 rounds late)
$FEED "$BOOT" preds "$work/pairs" --from 0 --to 80 2> "$work/feed1.log" ||
    { echo "Bail out! the producer failed: $(cat "$work/feed1.log")"; exit 1; }
check "A alone holds the 4 partitions and scores part 1 (31,200 pairs)" \
    'kwait A "parts(\"A\") == 4 and scored(\"A\") == 31200" 60'

one B g "$work/shared" 2
check "B joins: A writes its partitions and hands 2 over; each holds 2" \
    'kwait "A B" "parts(\"A\") == 2 and parts(\"B\") == 2" 60'
# (one of the files A wrote, of part 1 only, comes back at the end as a
# fenced member's late write: A wrote the partitions it handed over)
mkdir -p "$work/old" && cp "$work/shared"/partition.preds.* "$work/old/"
stale=$(cd "$work/old" && ls partition.preds.* | grep -v '\.1$' | head -n 1)
check "their models are disjoint and hold part 1 whole: $(q A "sorted(r['models'])") + $(q B "sorted(r['models'])")" \
    '[ $(( $(scored A) + $(scored B) )) = 31200 ] &&
     [ "$(q A "len(r['"'"'models'"'"'])") $(q B "len(r['"'"'models'"'"'])")" = "4 4" ] &&
     [ "$(q A "sorted(r['"'"'models'"'"'])")" != "$(q B "sorted(r['"'"'models'"'"'])")" ]'

# part 2, paced over ~4 s: A is killed while it flows, once A has taken
# messages past its partitions' last snapshots (the part's last round waits
# for A's end, so the stream still flows however slowly A got there)
$FEED "$BOOT" preds "$work/pairs" --from 80 --to 160 --rate 20 --hold "$work/A.down" 2> "$work/feed2.log" &
feed2=$!
track $feed2
past() { q A "any(p['next'] > max(p['saved'], 0) for p in r['kafka']['partitions']) and sum(m['scored'] for m in r['models'].values()) > 15600"; }
wait_until '[ "$(past)" = True ]' 60
cp "$work/A.json" "$work/A.killed.json"
kill -KILL "${pid[A]}"
wait "${pid[A]}" 2> /dev/null
alive=no
kill -0 $feed2 2> /dev/null && alive=yes
touch "$work/A.down"
check "A killed -9 mid-stream, past its last snapshot: $(json_get "$work/A.killed.json" "[(p['partition'], p['saved'], p['next']) for p in r['kafka']['partitions']]")" \
    '[ "$(json_get "$work/A.killed.json" "any(p['"'"'next'"'"'] > max(p['"'"'saved'"'"'], 0) for p in r['"'"'kafka'"'"']['"'"'partitions'"'"'])")" = True ] && [ $alive = yes ]'
check "B takes A's partitions (session timeout) and reads them again from A's snapshots' offsets (or, where A wrote none, from the group's committed offset), before where A was" \
    'kwait B "parts(\"B\") == 4" 60 && "$PY" - "$work/A.killed.json" "$work/B/calibd.log" <<'"'"'PY'"'"'
import json, re, sys
a = json.load(open(sys.argv[1]))["kafka"]["partitions"]
log = open(sys.argv[2]).read()
for p in a:
    got = re.findall(r"partition preds/%d: (?:restored .*reading from offset (\d+)|no snapshot)" % p["partition"], log)
    assert got and got[-1] == (str(p["saved"]) if p["saved"] >= 0 else ""), (p, got)
assert any(max(p["saved"], 0) < p["next"] for p in a), a
PY'
wait $feed2
$FEED "$BOOT" preds "$work/pairs" --from 160 2> "$work/feed3.log" ||
    { echo "Bail out! the producer failed: $(cat "$work/feed3.log")"; exit 1; }

one A g "$work/shared" 3600 2
check "A restarts: each holds 2 partitions again" 'kwait "A B" "parts(\"A\") == 2 and parts(\"B\") == 2" 60'
check "A and B score all 100,000 pairs, each model on one of them" \
    'kwait "A B" "scored(\"A\") + scored(\"B\") == 100000" 60 &&
     [ "$(q A "len(r['"'"'models'"'"'])") $(q B "len(r['"'"'models'"'"'])")" = "4 4" ]'
check "W scores all 100,000 pairs" 'kwait W "scored(\"W\") == 100000" 60'

# B stalls (SIGSTOP) past session.timeout.ms: the group goes on without it
# and A takes its partitions from their files; SIGCONT: B learns its
# assignment is lost before it writes, and rejoins. The final merge below
# shows the partitions' state intact.
kill -STOP "${pid[B]}"
check "B stopped past the session timeout: A holds the 4 partitions" 'kwait A "parts(\"A\") == 4" 60'
# (the watcher's clock, CLOCK_MONOTONIC: what B publishes after this is
# its next run, B*, in the check of who publishes below)
"$PY" -c 'import time; print(time.monotonic())' > "$work/B.resumed"
kill -CONT "${pid[B]}"
check "B resumes: it holds its writes and publishes (it stalled past session.timeout.ms), hands its partitions over as lost, unwritten, and the two hold 2 each again" \
    'kwait "A B" "parts(\"A\") == 2 and parts(\"B\") == 2" 60 && grep -q "lost" "$work/B/calibd.log" &&
     grep -q "the loop stalled [0-9.]* s, past session.timeout.ms: the partitions. writes and publishes are held" "$work/B/calibd.log"'

# W's /metrics: the calibd_kafka_* families, in the exposition format
curl -sf "${http[W]}" > "$work/W.metrics" && st W > "$work/W.json"
check "W's /metrics: its 4 partitions and the messages it took (calibd_kafka_*), as status says" \
    '[ "$(awk '"'"'$1 == "calibd_kafka_partitions" {print $2}'"'"' "$work/W.metrics")" = 4 ] &&
     [ "$(awk '"'"'$1 == "calibd_kafka_messages_total" {print $2}'"'"' "$work/W.metrics")" = "$(json_get "$work/W.json" "r['"'"'kafka'"'"']['"'"'messages'"'"']")" ] &&
     [ "$(grep -c "^calibd_kafka_partition_offset{topic=\"preds\"" "$work/W.metrics")" = 12 ] &&
     grep -q "^calibd_kafka_snapshots_total{result=\"written\"} [1-9]" "$work/W.metrics"'
if command -v promtool > /dev/null; then
    promtool check metrics < "$work/W.metrics" > "$work/promtool.out" 2>&1
    rc=$?
    check "promtool check metrics on W's /metrics (exit $rc)
$(cat "$work/promtool.out")" '[ $rc -eq 0 ] && [ ! -s "$work/promtool.out" ]'
fi

# silence: B stays a member past max.poll.interval.ms (8 s, on B's clock)
st B > "$work/B.idle.json"
idle_fig="(r['kafka']['lost'], r['kafka']['rebalances'], len(r['kafka']['partitions']))"
wait_until "[ \"\$(q B \"r['uptime'] >= $(json_get "$work/B.idle.json" "r['uptime']") + 12\")\" = True ]" 60
check "an idle member keeps its partitions past max.poll.interval.ms (lost, rebalances, held: $(json_get "$work/B.idle.json" "$idle_fig") before, $(json_get "$work/B.json" "$idle_fig") 12 s later)" \
    '[ "$(json_get "$work/B.json" "r['"'"'uptime'"'"']")" != "$(json_get "$work/B.idle.json" "r['"'"'uptime'"'"']")" ] &&
     [ "$(json_get "$work/B.json" "$idle_fig")" = "$(json_get "$work/B.idle.json" "$idle_fig")" ]'

# a ZeroMQ message to a model fed from Kafka is refused (other_source)
# (send_py: delivered before it returns, however loaded the machine; a
# sender that exits without ending its context may drop what it queued)
send_py "${pull[W]}" <<'PY'
send("km-0", {"v": 1, "type": "label", "id": "x", "y": 0})
PY
other() { q W "r['models']['km-0']['rejected'].get('other_source')"; }
if wait_until '[ "$(other)" = 1 ]' 20; then
    ok "a ZeroMQ message to a Kafka partition's model: rejected, other_source"
else
    bad "a ZeroMQ message to a Kafka partition's model: rejected, other_source
W: $(q W "(r['models'].get('km-0', {}).get('rejected'), r['kafka'])")
$(tail -n 5 "$work/W/calibd.log")"
fi

for n in A B; do
    kill -TERM "${pid[$n]}"
    ends_within "${pid[$n]}" "$(scaled 60)" || kill -KILL "${pid[$n]}"
    wait "${pid[$n]}"
    rc=$?
    check "$n stops cleanly (exit 0), its partitions written" "[ $rc = 0 ]"
done
check "the instances' own snapshots hold no partition's model" \
    '"$CALIBCTL" snapshot "$work/A/state/snapshot" | "$PY" -c "import json,sys; sys.exit(len(json.load(sys.stdin)[\"models\"]))" &&
     "$CALIBCTL" snapshot "$work/B/state/snapshot" | "$PY" -c "import json,sys; sys.exit(len(json.load(sys.stdin)[\"models\"]))"'
"$CALIBCTL" merge "$work"/shared/partition.preds.* -o "$work/merged" > "$work/merge.out" 2>&1 &&
    "$CALIBCTL" snapshot "$work/merged" > "$work/merged.json"
st W > "$work/W.json"
for i in 0 1 2 3 4 5 6 7; do
    "$CALIBCTL" score "$work/pairs/km-$i.csv" > "$work/km-$i.ref"
done
check "the merged partitions equal W's uninterrupted run and calibctl score, exactly, model by model" \
    '"$PY" - "$work" <<'"'"'PY'"'"'
import json, sys
w = sys.argv[1]
merged = json.load(open(w + "/merged.json"))["models"]
whole = json.load(open(w + "/W.json"))["models"]
assert sorted(merged) == sorted(whole) == [f"km-{i}" for i in range(8)], (sorted(merged), sorted(whole))
for name in sorted(merged):
    m, u = merged[name], whole[name]
    ref = json.load(open(f"{w}/{name}.ref"))
    assert m["scored"] == u["scored"] == ref["n"] == 12500, (name, m["scored"], u["scored"], ref["n"])
    assert m["raw"] == u["raw"], (name, "raw", m["raw"], u["raw"])
    for k in ("joined", "waiting_predictions", "waiting_labels", "duplicate_labels"):
        assert m["join"][k] == u["join"][k], (name, k, m["join"], u["join"])
    assert m["join"]["waiting_predictions"] == 0 and m["join"]["joined"] == 12500, (name, m["join"])
    for k, r in (("brier", "brier"), ("log", "log")):
        assert m["raw"][k]["mean"] == ref[r], (name, k, m["raw"][k]["mean"], ref[r])
    for k, r in (("ece", "ece"), ("tce2", "tce2_15"), ("cwce2", "cwce2_15"), ("rbs", "rbs")):
        assert m["raw"][k] == ref[r], (name, k, m["raw"][k], ref[r])
    assert not m["rejected"], (name, m["rejected"])
PY'

# a partition file that cannot be used: its history is read again from
# the earliest offset the brokers hold (the group's committed offset is
# past it), so C, alone in the group, holds every model whole again
head -c 100 "$work/shared/partition.preds.1" > "$work/p1" && mv "$work/p1" "$work/shared/partition.preds.1"
# and another partition's file is one of part 1, as a member the group had
# fenced would write it late (its commit refused by the brokers): its
# offset is behind the group's committed one, so it is refused and read
# again too
cp "$work/old/$stale" "$work/shared/$stale"
one C g "$work/shared" 3600 1
check "a damaged partition file and a stale one: moved aside, their partitions read again from the earliest offset; C holds all 100,000 pairs, each model as W has it" \
    'kwait C "parts(\"C\") == 4 and scored(\"C\") == 100000" 60 &&
     grep -q "partition preds/1: .*partition.preds.1 cannot be used .*read again from the earliest offset the brokers hold" "$work/C/calibd.log" &&
     grep -q "partition preds/${stale##*.}: .*$stale cannot be used (stale: its offset [0-9]* is behind the group.s committed [0-9]*.*read again from the earliest" "$work/C/calibd.log" &&
     [ -e "$work/shared/partition.preds.1.bad" ] &&
     [ "$(q C "sorted((n, m[\"raw\"][\"brier\"][\"mean\"]) for n, m in r[\"models\"].items())")" = "$(json_get "$work/W.json" "sorted((n, m[\"raw\"][\"brier\"][\"mean\"]) for n, m in r[\"models\"].items())")" ]'
# a stray: one message keyed stray-1 on a partition its key does not hash
# to (a producer with another partitioner), then 100 from the Python
# package's producer (librdkafka's default, consistent_random: CRC-32 of
# the key): the stray is rejected, other_source, and the 100 are taken
"$PY" - "$BOOT" <<'PY'
import sys, zlib, msgpack, confluent_kafka
from calibd import Producer
right = zlib.crc32(b"stray-1") % 4
k = confluent_kafka.Producer({"bootstrap.servers": sys.argv[1]})
k.produce("preds", key=b"stray-1", partition=(right + 1) % 4,
          value=msgpack.packb({"v": 1, "type": "pred", "id": "s", "logits": [0, 0, 0, 1]}))
k.flush(30)
with Producer(sys.argv[1], socket="kafka", kafka_topic="preds") as p:
    p.predict("stray-1", ["s%d" % i for i in range(100)], logits=[[0.1, 0.2, 0.3, 0.4]] * 100)
PY
# (counted by the model if the stray comes after its first real message, on
# another partition, else by the daemon: no model holds it then)
stray() { q C "(lambda m: (m.get('join', {}).get('waiting_predictions'), m.get('rejected', {}).get('other_source', 0) + r['rejected'].get('other_source', 0)))(r['models'].get('stray-1', {}))"; }
check "a stray message keyed to another partition: rejected (other_source), and the model's 100 real ones taken" \
    'wait_until "[ \"\$(stray)\" = \"(100, 1)\" ]" 60 &&
     grep -q "stray-1.*(other_source): on partition preds/.*, but its key hashes to partition" "$work/C/calibd.log"'
[ "$(stray)" = "(100, 1)" ] || echo "# stray: $(stray); $(grep -c other_source "$work/C/calibd.log") other_source lines"
kill -TERM "${pid[C]}"
ends_within "${pid[C]}" "$(scaled 60)" || kill -KILL "${pid[C]}"

kill "$(jobs -p)" 2> /dev/null
check "the models were refitted and published (some version >= 1): $(awk '$4 > 0' "$work/published" | wc -l) messages" \
    '[ "$(awk '"'"'$4 > 0'"'"' "$work/published" | wc -l)" -gt 0 ]'
owners=$("$PY" - "$work/published" "$work/B.resumed" <<'PY'
import collections, sys
resumed = float(open(sys.argv[2]).read())
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    t, who, model, v = line.split()
    who += "*" if who == "B" and float(t) > resumed else ""
    if not runs[model] or runs[model][-1][0] != who:
        runs[model].append([who, v])
    runs[model][-1][1] = v
print(", ".join(m + " " + ">".join(f"{w}:v{v}" for w, v in r) for m, r in sorted(runs.items())))
PY
)
check "no model's version goes back, and none is published by two instances at once
$owners" \
    '"$PY" - "$work/published" "$work/B.resumed" <<'"'"'PY'"'"'
import collections, sys
resumed = float(open(sys.argv[2]).read())
seen = collections.defaultdict(list)
for line in open(sys.argv[1]):
    t, who, model, v = line.split()
    who += "*" if who == "B" and float(t) > resumed else ""
    seen[model].append((float(t), who, int(v)))
assert seen, "nothing published"
for model, msgs in seen.items():
    top = 0
    for t, who, v in msgs:
        assert v >= top, (model, "version", v, "after", top)
        top = v
    # the owners in the order received, runs merged: A1 (A alone), then A1
    # or B, B (A killed), then A2 or B, then A2 (B stalled), then A2 or B*
    # (B resumed), then C1; one that comes back after another published in
    # between is two at once
    runs = [msgs[0][1]]
    for _, who, _ in msgs[1:]:
        if who != runs[-1]:
            runs.append(who)
    assert len(runs) == len(set(runs)), (model, runs)
PY'
finish
