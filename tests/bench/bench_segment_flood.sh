#!/usr/bin/env bash
# bench_segment_flood.sh [BUILD_DIR] [VALUES] — issue 38's segment flood:
# one model with 8 segment keys of VALUES tracked values (4096), fed 60
# batches of 2,000 rows, K = 10 logits with inline y, each row naming a new
# value of every key (tests/integ/abuse.py segment-flood), with
# tests/integ/probe.py timing control and /metrics beside it. Prints the
# time until every row is scored, the probe's latencies, calibd's RSS, the
# model's accounted memory, the size of its status, its CPU over 5 idle
# seconds after, the first periodic snapshot's longest slice of the loop
# and its time, and how long SIGTERM (with the final snapshot) takes.
# Run: tests/bench/bench_segment_flood.sh build/plain 4096
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-build/plain}" && pwd)
values=${2:-4096}
export LD_LIBRARY_PATH=$dir/.libs
[ -x "$dir/.libs/calibd" ] && calibd_bin=$dir/.libs/calibd || calibd_bin=$dir/calibd
[ -x "$dir/.libs/calibctl" ] && ctl_bin=$dir/.libs/calibctl || ctl_bin=$dir/calibctl
work=$(mktemp -d /tmp/calibd-bench-XXXXXX)
trap 'kill "$pid" 2> /dev/null; rm -rf "$work"' EXIT
cat > "$work/c.conf" <<EOC
[daemon]
memory_limit = 1073741824
snapshot_interval = 25
[model segs]
segment_keys = 8
segment_values = $values
EOC
"$calibd_bin" -c "$work/c.conf" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' \
    --publish 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' --http 127.0.0.1:0 \
    --state-dir "$work" --log-level warn 2> "$work/log" &
pid=$!
until [ -s "$work/endpoints" ] && grep -q '^http ' "$work/endpoints"; do
    kill -0 "$pid" 2> /dev/null || { cat "$work/log"; exit 1; }
    sleep 0.05
done
ep() { awk -v k="$1" '$1 == k {print $2}' "$work/endpoints"; }
ctl=$(ep control)
scored() { "$ctl_bin" status --control "$ctl" segs 2> /dev/null |
               /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["models"]["segs"]["scored"])' 2> /dev/null || echo 0; }
t0=$(date +%s.%N)
/usr/bin/python3 tests/integ/probe.py --control "$ctl" --http "$(ep http)" --model segs \
    --seconds 15 --timeout 60 > "$work/probe" &
probe=$!
/usr/bin/python3 tests/integ/abuse.py segment-flood --push --endpoint "$(ep ingest_pull)" \
    --model segs --k 10 --batch 2000 --count 60 --seconds 600 > /dev/null
until [ "$(scored)" = 120000 ]; do sleep 0.1; done
t1=$(date +%s.%N)
wait "$probe"
"$ctl_bin" status --control "$ctl" segs > "$work/status.json"
u0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
sleep 5
u1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
echo "segment_values $values: 120,000 rows scored in $(echo "$t1 - $t0" | bc) s"
echo "probe: $(cat "$work/probe")"
echo "RSS $(awk '/VmRSS/ {print $2}' "/proc/$pid/status") kB, peak $(awk '/VmHWM/ {print $2}' "/proc/$pid/status") kB;" \
     "model memory $(/usr/bin/python3 -c "import json; print(json.load(open('$work/status.json'))['models']['segs']['memory']['bytes'])") bytes;" \
     "status $(stat -c %s "$work/status.json") bytes; idle CPU $((u1 - u0)) ticks in 5 s"
# the first periodic snapshot (25 s after the start): the loop's longest
# slice packing it, and its whole time
metric() { curl -sS "$(ep http)" | awk -v m="$1" '$1 == m {print $2}'; }
until [ "$(metric calibd_snapshot_writes_total)" = 1 ]; do sleep 0.2; done
echo "periodic snapshot: $(metric calibd_snapshot_bytes) bytes, longest slice" \
     "$(metric calibd_snapshot_slice_max_seconds) s, packed and written in" \
     "$(metric calibd_snapshot_duration_seconds) s"
t2=$(date +%s.%N)
kill -TERM "$pid"
wait "$pid" || true
echo "SIGTERM to exit: $(echo "$(date +%s.%N) - $t2" | bc) s"
