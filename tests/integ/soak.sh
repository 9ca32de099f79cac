#!/usr/bin/env bash
# soak.sh — calibd under abusive but legal traffic (loopback, bounded: about
# a minute and a half): each pattern of tests/integ/abuse.py in turn, each
# with tests/integ/probe.py timing control replies and /metrics meanwhile.
# Asserts the memory bound of calibd(8), LIMITS (peak RSS under the
# formula), that every control request and scrape is answered, and the
# counters each pattern must leave. Prints the latencies BENCHMARKS.md
# quotes: they are figures, not checks (a slower machine answers later, not
# wrongly). The plain build only: a sanitizer's shadow memory is no measure
# of calibd's.
. "$(dirname "$0")/lib.sh"
if [ "${CALIB_SANITIZERS:-no}" = yes ]; then
    skip_all "under the sanitizers (their memory is not calibd's)"
fi
PY=/usr/bin/python3 # Debian's, with python3-zmq and python3-msgpack
# (the ingest endpoint first: an --endpoint among the arguments overrides it)
abuse() { "$PY" "$srcdir/tests/integ/abuse.py" "$1" --endpoint "$INGEST" "${@:2}"; }
# the status of one model (flood, the first made): the full status grows
# with the models, which new_models makes by the thousand
# (a request unanswered within a generous ceiling is a failure)
probe() { "$PY" "$srcdir/tests/integ/probe.py" --control "$CONTROL" --http "$HTTP" --model flood \
              --timeout "$(scaled 5)" "$@"; }
# metric NAME: NAME's value on /metrics (0 when absent), from a scrape that
# succeeded: with over 256 models calibd answers 503 with Retry-After while
# it renders again after a pause (calibd(8), LIMITS), which a check must
# not read as 0. Prints nothing if no scrape succeeds within the ceiling.
metric() {
    local end=$((SECONDS + $(scaled 10)))
    until curl -sSf -o "$work/metrics.scrape" "$HTTP" 2> /dev/null; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.2
    done
    awk -v m="$1" '$1 == m {print $2; found = 1} END {if (!found) print 0}' "$work/metrics.scrape"
}
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" "$2"; }

MAXMSG=1048576 INGEST_MEM=67108864 MEMLIMIT=1073741824
cat > "$work/soak.conf" <<EOF
[daemon]
max_msg_size = $MAXMSG
ingest_memory = $INGEST_MEM
memory_limit = $MEMLIMIT
max_models = 100000
http_timeout = 5
ingest_pull = tcp://127.0.0.1:*
[model segs]
segment_keys = 8
segment_values = 4096
EOF
start_calibd -c "$work/soak.conf" --http 127.0.0.1:0 --log-level info
HTTP=$(awk '$1 == "http" {print $2; exit}' "$work/state/endpoints")
worst_p99=0 worst_max=0

# probed NAME FILE: the probe's checks: it ran (a probe that made no
# request would prove nothing; how many it makes in its seconds depends
# on the machine's speed: 9 at half a core while calibd packed the segment
# flood's 50 MB model in one slice), and every request was answered
probed() {
    local requests fails p99
    requests=$(field requests "$2") fails=$(field failures "$2") p99=$(field control_p99_ms "$2")
    check "$1: the probe ran beside it ($requests requests)" '[ "${requests:-0}" -ge 3 ]'
    check "$1: every control request and scrape answered (p99 $p99 ms)" '[ "$fails" = 0 ]'
}

# under NAME SECONDS ABUSE-ARGS...: the pattern with a probe beside it
under() {
    local name=$1 secs=$2
    shift 2
    abuse "$@" > "$work/$name.sent" &
    local pid=$!
    probe --seconds "$secs" > "$work/$name.probe"
    wait "$pid"
    local p99 max
    p99=$(field control_p99_ms "$work/$name.probe")
    max=$(field control_max_ms "$work/$name.probe")
    echo "# $name: $(cat "$work/$name.sent"); $(cat "$work/$name.probe")"
    probed "$name" "$work/$name.probe"
    worst_p99=$($PY -c "print(max($worst_p99, $p99))")
    worst_max=$($PY -c "print(max($worst_max, $max))")
}

under flood_unique 10 flood-unique --model flood --k 100 --batch 500 --seconds 10
under flood_max 10 flood-max --model big --seconds 10 --max-size "$MAXMSG"
# (/metrics is the text of the last rendering round: polled, as the
# pattern's end says nothing of what calibd has read and rendered)
big_scored() { [ "$(metric "calibd_scored_total{model=\"big\"}")" -gt 0 ]; }
check "flood_max: rows scored" 'wait_until big_scored'

# 8 segment keys of ever-new values at segment_values = 4096, in batches
# of 2,000 rows: every row after the first 4,096 replaces a tracked value
# in each key. A new value costs the same at any segment_values (calibd(8),
# SEGMENTS), so control keeps answering (the probe; its latencies are
# figures: a slower machine answers later, not wrongly), the status lists
# segment_status values a key, not 4,096, and the peak RSS below holds.
# All 120,000 rows are digested before the next pattern: a PUB flood
# behind a busy loop would lose messages at its high-water mark.
under segment_flood 8 segment-flood --push --endpoint "$PULL" --model segs --k 10 \
    --batch 2000 --count 60 --seconds "$(scaled 60)"
evictions() { metric 'calibd_segment_evictions_total{model="segs",key="k7"}'; }
sent_rows=$(( $(sed -n 's/^sent \([0-9]*\) messages.*/\1/p' "$work/segment_flood.sent") * 2000 ))
check "segment_flood: each key tracks 4096 of its $sent_rows values, every later one replacing the least counted" \
    'wait_until "[ \$(evictions) -eq $((sent_rows - 4096)) ]"'
status segs > "$work/segs.json"
check "segment_flood: the status lists 20 values a key (segment_status), $(stat -c %s "$work/segs.json") bytes" \
    '[ "$(json_get "$work/segs.json" "all(k[\"tracked\"] == 4096 and k[\"listed\"] == 20 and len(k[\"segments\"]) == 21 for k in r[\"models\"][\"segs\"][\"segments\"][\"by_key\"].values()) and len(r[\"models\"][\"segs\"][\"segments\"][\"by_key\"]) == 8")" = True ]'

# K = 16384, never labelled: the join holds what its bytes allow, and keeps
# a sample of ids past that (what it drops counted)
under never_labelled 6 never-labelled --model wide --k 16384 --count 3000 --seconds 6
wide_sampled() { [ "$(metric "calibd_join_sampled_out_total{model=\"wide\",kind=\"prediction\"}")" -gt 0 ]; }
check "never_labelled: what the join drops past its bytes is counted" 'wait_until wide_sampled'

# K = 65536, the protocol's largest: the model fits its byte budgets (a
# few dozen waiting predictions, ring and reservoir records), not 52 GB.
# All 200 are delivered, to the PULL socket, however long calibd takes (a
# PUB flood of them is dropped at the high-water mark on a slow machine,
# and too few may arrive to pass the join's capacity)
under huge_k 6 huge-k --push --endpoint "$PULL" --model huge --k 65536 --count 200 \
    --seconds "$(scaled 60)"
huge_taken() { [ "$(metric "calibd_predictions_total{model=\"huge\"}")" = 200 ]; }
check "huge_k: the model takes all 200 predictions" 'wait_until huge_taken'
check "huge_k: its waiting predictions bounded in bytes: those past its capacity sampled out" \
    '[ "$(metric "calibd_join_sampled_out_total{model=\"huge\",kind=\"prediction\"}")" -gt 0 ]'
check "huge_k: the capacities are logged" 'grep -q "huge: K = 65536: up to [0-9]* waiting items" "$work/calibd.log"'

# ever-new model names (K = 1000: about 550 KiB each, class-wise bins
# included): created until memory_limit, then each new one is rejected at
# its first message, saying what to change. All 3,000 (1.6 GB of models)
# are delivered, to the PULL socket, however long calibd takes to read them.
under new_models 8 new-models --push --endpoint "$PULL" --model storm --k 1000 \
    --count 3000 --seconds "$(scaled 60)"
refused() { [ "$(metric 'calibd_rejected_total{model="",reason="memory_limit"}')" -gt 0 ]; }
check "new_models: refused past memory_limit" 'wait_until refused'
check "new_models: the log says what to change" 'grep -q "rejected (memory_limit).*raise memory_limit, or lower max_models" "$work/calibd.log"'
check "new_models: the models hold no more than memory_limit" '[ "$(metric calibd_memory_bytes)" -le "$MEMLIMIT" ]'

# 100 slow HTTP clients from another loopback address while 127.0.0.1
# scrapes (http_max_per_address, 16, refuses the rest), until calibd has
# cut them all at their deadline (http_timeout, 5 s). A line every 0.2 s
# keeps them from ever being idle as long (libmicrohttpd's own idle cut,
# which is not calibd's deadline), however loaded the machine.
"$PY" "$srcdir/tests/integ/slowloris.py" "$HTTP" --clients 100 --seconds "$(scaled 30)" --interval 0.2 \
    --until-cut > "$work/slowloris.out" &
slow=$!
probe --seconds 6 > "$work/slowloris.probe"
wait "$slow"
echo "# slowloris: $(tr '\n' ' ' < "$work/slowloris.out"); $(cat "$work/slowloris.probe")"
probed slowloris "$work/slowloris.probe"
# /metrics is the text of the last rendering round: wait for one after the cuts
check "slowloris: slow connections cut at their deadline" \
    'grep -q "^cut 100 of 100" "$work/slowloris.out" && wait_until "[ \"\$(metric calibd_http_timeouts_total)\" -gt 0 ]"'

# one message one byte over max_msg_size: ZeroMQ cuts the sender; counted, logged
before=$(metric 'calibd_socket_disconnects_total{socket="ingest"}')
abuse oversize --model over --max-size "$MAXMSG" > /dev/null
cut_off() { [ "$(metric 'calibd_socket_disconnects_total{socket="ingest"}')" -gt "$before" ]; }
check "oversize: the disconnect is counted" 'wait_until cut_off'
check "oversize: and logged" 'grep -q "disconnected (.* over max_msg_size = $MAXMSG bytes" "$work/calibd.log"'

# the bound of calibd(8), LIMITS, for one producer connection at a time:
# 64 MiB of code, libraries and fixed buffers, the receive queue
# (ingest_memory plus the message being read), and the models (memory_limit)
hwm_kb=$(awk '/^VmHWM/ {print $2}' "/proc/$calibd_pid/status")
bound_kb=$(( (64 * 1048576 + INGEST_MEM + MAXMSG + MEMLIMIT) / 1024 ))
echo "# peak RSS ${hwm_kb} kB, bound ${bound_kb} kB; control replies: worst p99 ${worst_p99} ms, worst ${worst_max} ms"
check "peak RSS under the bound" '[ "$hwm_kb" -lt "$bound_kb" ]'
check "calibd still answers" '"$CALIBCTL" ping --control "$CONTROL" --timeout "$(scaled 5)" > /dev/null'
finish
