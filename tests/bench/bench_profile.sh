#!/usr/bin/env bash
# bench_profile.sh BUILD_DIR K BATCH COUNT [T] [labels] — where calibd's
# ingest time goes, for one case of bench_throughput.sh: calibd on its
# defaults (stored parameters T, default 1.5; 1 for the identity), COUNT /
# 10 predictions of K float32 logits in messages of BATCH rows to warm it
# (model, rings and reservoir created), then `perf record -g` on calibd
# (every thread, 2000 Hz) while COUNT more are sent and scored. Prints the
# rate and CPU seconds per 10^6 predictions, then the hottest symbols.
# Needs perf (Debian's linux-perf) and perf_event_paranoid <= 1, or root.
#   make -C build/plain tests/bench/bench_rate
#   tests/bench/bench_profile.sh build/plain 1000 1 100000 1.5
#   tests/bench/bench_profile.sh build/plain 10 64 4000000 1.5 labels
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 2; }
dir=$(cd "$1" && pwd) k=$2 b=$3 n=$4 t=${5:-1.5} lab=()
[ "${6:-}" = labels ] && lab=(--labels)
rate=$dir/tests/bench/bench_rate
[ -x "$rate" ] || make -C "$dir" tests/bench/bench_rate > /dev/null
work=$(mktemp -d) pid= perf_pid=
trap '[ -z "$perf_pid" ] || kill -INT "$perf_pid" 2> /dev/null; [ -z "$pid" ] || kill "$pid" 2> /dev/null; rm -rf "$work"' EXIT
model=k$k-b$b
[ "$t" = 1 ] || printf 'version 1\nmethod temperature\nparam T %s\n' "$t" > "$work/model.$model.params"
. "$(dirname "$0")/bench_lib.sh"
start_calibd /dev/null warn
warm=$((n / 10 / b * b))
[ "$warm" -ge "$b" ] || warm=$b
"$rate" send --endpoint "$pull" --model "$model" --k "$k" --batch "$b" --count "$warm" "${lab[@]}" > /dev/null
"$rate" wait --control "$ctl" --model "$model" --scored "$warm" > /dev/null
perf record -q -F 2000 -g -o "$work/perf.data" -p "$pid" 2> /dev/null &
perf_pid=$!
until [ -s "$work/perf.data" ]; do sleep 0.05; done
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
c0=$(cpu) t0=$(date +%s.%N)
"$rate" send --endpoint "$pull" --model "$model" --k "$k" --batch "$b" --count "$n" \
    --first $((warm + 1)) "${lab[@]}" > /dev/null
"$rate" wait --control "$ctl" --model "$model" --scored $((warm + n)) > /dev/null
t1=$(date +%s.%N) c1=$(cpu)
kill -INT "$perf_pid"
while kill -0 "$perf_pid" 2> /dev/null; do sleep 0.1; done
perf_pid=
awk -v n="$n" -v a="$t0" -v b="$t1" -v c0="$c0" -v c1="$c1" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%d predictions: %.0f/s, %.3f CPU s per 10^6\n", n, n / (b - a), (c1 - c0) / hz / n * 1e6}'
perf report -i "$work/perf.data" --no-children --percent-limit 1.5 --stdio 2> /dev/null |
    grep -E '^ +[0-9]+\.[0-9]+%' | head -25
