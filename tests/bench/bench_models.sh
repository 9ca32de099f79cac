#!/usr/bin/env bash
# bench_models.sh [BUILD_DIR] — calibd with many models: MODELS models (K =
# 10 logits, drift detection on, defaults otherwise) are created by one
# prediction each, then get PAIRS predictions with inline outcomes each in
# all, sent round-robin over the models on the PULL socket as fast as it
# takes them (or RATE messages/s); in the middle round each model also gets
# PENDING predictions without outcomes, which wait in its join table. All
# along, `calibctl status MODEL` of a random model m0..m{MODELS-1} is timed
# wall-clock, at random moments, either as the whole calibctl process or as
# the bare request on a REQ socket of its own ("absent": the model did not
# exist yet, or was refused). Reported from /metrics and /proc/PID/status:
# models created, pairs scored, rejections by reason, VmRSS and VmHWM once
# every model exists and at the end, RSS per model, wall time and pairs/s;
# then, with calibd idle: the longest a ping waits over 3.5 s (the tick),
# and what NEW further models cost: RSS per new model, and the wall time
# from the first of their first messages sent to the last one handled, per
# model (an upper bound of the loop time a new model takes, its message
# included). Exits 1 if calibd dies or a status request fails.
# Run: tests/bench/bench_models.sh build/plain   (MODELS=10000 PAIRS=200
#      PENDING=20 NEW=1000; RATE unset: as fast as calibd takes them;
#      MEMORY_LIMIT unset: calibd's default; SNAPSHOT_INTERVAL 0: no
#      snapshots, else their figures too)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-build/plain}" && pwd)
PY=/usr/bin/python3 # Debian's, with python3-zmq and python3-msgpack
feed="$PY tests/bench/bench_models_feed.py"
models=${MODELS:-10000} pairs=${PAIRS:-200} pending=${PENDING:-20} new=${NEW:-1000}
rate=${RATE:-0}
[ "$pairs" -ge 2 ] || { echo "bench_models: PAIRS must be at least 2" >&2; exit 2; }
work=$(mktemp -d)
{
    printf '[daemon]\nsnapshot_interval = %s\n' "${SNAPSHOT_INTERVAL:-0}"
    # calibd holds 1024 models unless max_models says more
    [ $((models + new)) -le 1024 ] || printf 'max_models = %d\n' $((models + new))
    [ -z "${MEMORY_LIMIT:-}" ] || printf 'memory_limit = %s\n' "$MEMORY_LIMIT"
    printf '[defaults]\nform = logits\nk = 10\ndrift = yes\n'
} > "$work/calibd.conf"
pid='' poller=''
cleanup() {
    [ -z "$poller" ] || { kill "$poller" 2>/dev/null || true; wait "$poller" 2>/dev/null || true; }
    [ -z "$pid" ] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "bench_models: $*" >&2
    tail -n 20 "$work/log" >&2
    exit 1
}
"$dir/calibd" -c "$work/calibd.conf" --ingest 'tcp://127.0.0.1:*' \
    --ingest-pull 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
    --control 'tcp://127.0.0.1:*' --http 127.0.0.1:0 --state-dir "$work" \
    --log-level info 2> "$work/log" &
pid=$!
until [ -s "$work/endpoints" ]; do
    kill -0 "$pid" 2>/dev/null || fail "calibd did not start"
    sleep 0.05
done
pull=$(awk '$1 == "ingest_pull" {print $2}' "$work/endpoints")
ctl=$(awk '$1 == "control" {print $2}' "$work/endpoints")
http=$(awk '$1 == "http" {print $2}' "$work/endpoints")
http=${http%/metrics}
"$dir/calibctl" ping --control "$ctl" > /dev/null || fail "calibctl ping failed"

now() { date +%s.%N; }
calc() { awk "BEGIN {printf \"$1\n\", $2}"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
proc() { # VmRSS or VmHWM of calibd, KiB
    kill -0 "$pid" 2>/dev/null || fail "calibd died"
    awk -v k="$1:" '$1 == k {print $2}' "/proc/$pid/status"
}
# /metrics into $work/metrics; sets scrape_s (of the request answered) and
# scrape_mib. With more than 256 models calibd renders /metrics only while
# it is asked for: the first request answers 503 (Retry-After: 1).
scrape() {
    local t0 code
    for _ in $(seq 60); do
        t0=$(now)
        code=$(curl -s --max-time 600 -o "$work/metrics" -w '%{http_code}' "$http/metrics") ||
            fail "GET /metrics failed"
        [ "$code" != 503 ] || { $feed tick --control "$ctl" || fail "no tick"; continue; }
        [ "$code" = 200 ] || fail "GET /metrics answered $code"
        break
    done
    [ "$code" = 200 ] || fail "GET /metrics answered 503 for a minute"
    scrape_s=$(calc %.2f "$(now) - $t0")
    scrape_mib=$(mib $(($(stat -c %s "$work/metrics") / 1024)))
}
# from the last scrape: an unlabelled gauge (empty if calibd has none by
# that name), models, pairs scored, predictions waiting, rejections
gauge() { awk -v m="$1" '$1 == m {print $2}' "$work/metrics"; }
created() {
    local n
    n=$(gauge calibd_models)
    [ -n "$n" ] || n=$(grep -c '^calibd_predictions_total{' "$work/metrics" || true)
    echo "$n"
}
total() { awk -v m="$1" 'index($1, m "{") == 1 && (!f || index($1, f)) {s += $2}
                         END {print s + 0}' f="${2:-}" "$work/metrics"; }
rejections() {
    awk '$1 ~ /^calibd_rejected_total\{/ {
             r = $1; sub(/.*reason="/, "", r); sub(/".*/, "", r); n[r] += $2 }
         END { for (r in n) s = s sprintf("%s%s=%d", s ? " " : "", r, n[r]); print s ? s : "none" }' \
        "$work/metrics"
}
# calibd's CPU seconds so far, all threads
cpu() { awk -v t="$(getconf CLK_TCK)" '{printf "%.2f\n", ($14 + $15) / t}' "/proc/$pid/stat"; }
# VmRSS once it stops moving: two readings a tick apart within 1 MiB (the
# loop frees what a feed left, /metrics is rendered again at every tick)
settled_rss() {
    local a b
    a=$(proc VmRSS)
    for _ in $(seq 30); do
        $feed tick --control "$ctl" || fail "no tick"
        b=$(proc VmRSS)
        [ $((a > b ? a - b : b - a)) -gt 1024 ] || break
        a=$b
    done
    echo "$b"
}
# the feed's "key=value" output: field NAME
field() { tr ' ' '\n' <<< "$1" | awk -F= -v k="$2" '$1 == k {print $2}'; }

rss0=$(proc VmRSS)
echo "calibd $("$dir/calibd" --version 2>/dev/null | head -n 1 || true), pid $pid, idle RSS $(mib "$rss0") MiB"
echo "config: $(tr '\n' ' ' < "$work/calibd.conf")"

# calibctl as installed: the program itself, not libtool's wrapper script
# in the build directory (a shell that costs 10 ms or more a run)
ctl_bin=$dir/calibctl ctl_libs=${LD_LIBRARY_PATH:-}
if [ -x "$dir/.libs/calibctl" ]; then
    ctl_bin=$dir/.libs/calibctl ctl_libs=$dir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
LD_LIBRARY_PATH=$ctl_libs $feed poll --control "$ctl" --calibctl "$ctl_bin" --models "$models" \
    > "$work/poll" 2> "$work/poll.err" &
poller=$!

# 1. every model created by its first prediction (with y)
echo "creating $models models..."
out=$($feed feed --pull "$pull" --control "$ctl" --pid "$pid" --models "$models" \
    --rate "$rate" --expect "$models") || fail "feeding failed"
create_s=$(field "$out" done_s)
sent=$models
scrape
n_models=$(created)
rss1=$(proc VmRSS)
hwm1=$(proc VmHWM)
echo "after creation: $n_models models in $create_s s, VmRSS $(mib "$rss1") MiB, VmHWM $(mib "$hwm1") MiB," \
    "/metrics $scrape_mib MiB in $scrape_s s; rejections: $(rejections)"
[ "$n_models" -eq "$models" ] ||
    echo "calibd REFUSED $((models - n_models)) of $models models (see the rejections above and its log:" \
        "$(grep -m 1 'rejected (\(memory_limit\|too_many_models\))' "$work/log" | cut -c 1-240))"

[ "$n_models" -gt 0 ] || fail "calibd created no model"

# 2. the other PAIRS - 1 rounds, PENDING predictions without y in the middle
echo "feeding $((pairs - 1)) more rounds ($pending predictions without y per model in one)..."
expect=$((sent + models * (pairs - 1) + models * pending))
cpu0=$(cpu)
out=$($feed feed --pull "$pull" --control "$ctl" --pid "$pid" --models "$models" \
    --rounds $((pairs - 1)) --pending-round $(((pairs - 1) / 2)) --pending "$pending" \
    --rate "$rate" --expect "$expect") || fail "feeding failed"
feed_s=$(field "$out" done_s)
feed_cpu=$(calc %.2f "$(cpu) - $cpu0")
sent=$expect
kill -TERM "$poller"
wait "$poller" || fail "the status prober failed: $(cat "$work/poll.err")"
poller=
cat "$work/poll"
[ ! -s "$work/poll.err" ] || { echo "prober errors:"; head -n 5 "$work/poll.err"; }
wall_s=$(calc %.2f "$create_s + $feed_s")
# /metrics lags by a rendering: scrape until it shows every message
for _ in $(seq 60); do
    scrape
    [ "$(gauge calibd_messages_total)" -lt "$sent" ] || break
    $feed tick --control "$ctl" || fail "no tick"
done
n_models=$(created)
scored=$(total calibd_scored_total)
waiting=$(total calibd_join_waiting 'kind="prediction"')
rss2=$(proc VmRSS)
hwm2=$(proc VmHWM)
echo "after feeding: $n_models models, $scored pairs scored, $waiting predictions waiting," \
    "VmRSS $(mib "$rss2") MiB, VmHWM $(mib "$hwm2") MiB, /metrics $scrape_mib MiB in $scrape_s s"
echo "rejections: $(rejections)"

# 3. idle: how long the loop leaves a ping waiting; NEW further models,
# one prediction each
stall=$($feed stall --control "$ctl") || fail "ping failed"
echo "idle, pings back to back, ms: $stall"
echo "creating $new more models with calibd idle..."
rss3=$(settled_rss)
out=$($feed feed --pull "$pull" --control "$ctl" --pid "$pid" --models "$new" --first "$models" \
    --expect $((sent + new))) || fail "feeding failed"
new_s=$(field "$out" done_s)
sent=$((sent + new))
rss4=$(settled_rss)
hwm4=$(proc VmHWM)
scrape
n_new=$(($(created) - n_models))
echo "new models: $n_new created in $new_s s, VmRSS $(mib "$rss3") -> $(mib "$rss4") MiB"
[ "$n_new" -eq "$new" ] || echo "calibd REFUSED $((new - n_new)) of the $new new models; rejections: $(rejections)"
kill -0 "$pid" 2>/dev/null || fail "calibd died"

cc=$(grep '^calibctl ' "$work/poll") zq=$(grep '^zmq ' "$work/poll")
per_new=n/a loop_new=n/a
[ "$n_new" -le 0 ] || per_new=$(calc %.1f "($rss4 - $rss3) / $n_new")
[ "$n_new" -le 0 ] || loop_new=$(calc %.3f "$new_s * 1000 / $n_new")
echo
echo "--- summary (MODELS=$models PAIRS=$pairs PENDING=$pending NEW=$new RATE=${RATE:-max}) ---"
echo "models created: $n_models of $models"
echo "pairs scored: $scored"
echo "predictions waiting to be joined: $waiting"
echo "rejections: $(rejections)"
echo "feed wall time: $wall_s s (creation $create_s s, then $feed_s s, calibd using $feed_cpu s of CPU in it)"
echo "pairs/s: $(calc %.0f "$scored / $wall_s")"
echo "creation round, per model (upper bound of loop time): $(calc %.3f "$create_s * 1000 / $models") ms$(
    [ "$n_models" -eq "$models" ] || echo " ($((models - n_models)) of the $models refused)")"
echo "VmRSS idle before any model: $(mib "$rss0") MiB"
echo "VmRSS / VmHWM after all models exist: $(mib "$rss1") / $(mib "$hwm1") MiB"
echo "VmRSS / VmHWM at the end of the feed: $(mib "$rss2") / $(mib "$hwm2") MiB"
echo "RSS per model at the end: $(calc %.1f "$rss2 / $n_models") KiB (less the idle RSS: $(calc %.1f "($rss2 - $rss0) / $n_models") KiB)"
echo "status via calibctl, ms: count $(field "$cc" count) (absent $(field "$cc" absent), failed $(field "$cc" failed), over 50 ms $(field "$cc" over_50ms)), median $(field "$cc" median_ms), p99 $(field "$cc" p99_ms), max $(field "$cc" max_ms)"
echo "status via REQ socket, ms: count $(field "$zq" count) (absent $(field "$zq" absent), failed $(field "$zq" failed), over 50 ms $(field "$zq" over_50ms)), median $(field "$zq" median_ms), p99 $(field "$zq" p99_ms), max $(field "$zq" max_ms)"
echo "/metrics at the end: $scrape_mib MiB in $scrape_s s; its last rendering took $(gauge calibd_http_render_seconds) s, the longest loop slice of it $(gauge calibd_http_render_slice_max_seconds) s"
echo "idle, longest ping reply over 3.5 s: $(field "$stall" max_ms) ms (p99 $(field "$stall" p99_ms), median $(field "$stall" median_ms))"
echo "idle, new models: RSS per new model $per_new KiB, loop time per new model at most $loop_new ms"
echo "VmRSS / VmHWM at the very end: $(mib "$rss4") / $(mib "$hwm4") MiB"
accounted=$(gauge calibd_memory_bytes)
[ -z "$accounted" ] || echo "models' memory as calibd counts it (calibd_memory_bytes): $(mib $((accounted / 1024))) MiB, $(calc %.1f "$accounted / 1024 / $(created)") KiB per model"
snaps=$(gauge calibd_snapshot_writes_total)
[ "${snaps:-0}" -eq 0 ] || echo "snapshots: $snaps written, the last $(gauge calibd_snapshot_bytes) bytes in $(gauge calibd_snapshot_duration_seconds) s, its longest loop slice $(gauge calibd_snapshot_slice_max_seconds) s"
refused=$(gauge calibd_memory_refused_total)
[ -z "$refused" ] || echo "allocations refused by memory_limit (calibd_memory_refused_total): $refused"
failed=$(($(field "$cc" failed) + $(field "$zq" failed)))
[ "$failed" -eq 0 ] || fail "$failed status requests failed"
