#!/usr/bin/env bash
# bench_floor.sh [BUILD_DIR] — calibd's CPU per prediction beside what no
# monitor can skip, and beside the Python script a user would write
# (issue 41). Four consumers of the same pre-encoded messages (bench_rate
# send: K float32 logits, outcomes inline, PUSH -> PULL, nothing dropped),
# one after the other, each case:
#   null    receive and decode (bench_rate null)
#   floor   the least a monitor of these pairs must do: for each row both
#           views' softmax (as sent, and divided by T = 1.5), Brier and log
#           scores and the top-label bin, glibc's scalar exp, calibd's
#           compiler flags (bench_rate null --floor 1.5)
#   python  the same in Python with numpy, vectorised over a message's rows
#           (tests/bench/bench_monitor.py)
#   calibd  on its defaults (every statistic: both views, bins, class-wise
#           bins, window, intervals, drift and miscalibration tests,
#           label-free estimates, reservoir, ring), the model's stored
#           T = 1.5 applied so that both views are scored; periodic
#           snapshots off, as in bench_throughput.sh (their CPU would land
#           on whichever case is running); measured twice on one model:
#           its first predictions (its rings filling), then as many again
#           ("warm", floor/warm: the rings full where the count is at
#           least their 10,000)
# Cases: K = 10 rows, K = 10 batches of 64, K = 1000 rows (and, asked by
# CASES, 32768/1: a token vocabulary, rows). CPU is user +
# system seconds of the consumer's process (every thread: libzmq's I/O
# thread, calibd's workers), per prediction, so that a shared machine's
# load matters less than in a rate; the ratios come from one run.
# Run: make -C build/plain tests/bench/bench_rate && tests/bench/bench_floor.sh build/plain
#      (SCALE=0.5 halves every count; CASES="10/1 1000/1" picks cases; Debian's
#      python3 with python3-zmq, python3-msgpack and python3-numpy)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/bench_lib.sh
rate_bench "${1:-}"
cases=${CASES:-10/1 10/64 1000/1}
for c in $cases; do
    IFS=/ read -r k b <<< "$c"
    printf 'version 1\nmethod temperature\nparam T 1.5\n' > "$work/model.k$k-b$b.params"
done
printf '[daemon]\nsnapshot_interval = 0\n' > "$work/calibd.conf"
start_calibd "$work/calibd.conf" warn

# predictions a case: about a second or two of each consumer
count() { # count K B WHO
    local n
    case "$1/$2/$3" in
        10/1/python) n=20000 ;; 10/1/*) n=400000 ;;
        10/64/python) n=256000 ;; 10/64/*) n=2000000 ;;
        1000/1/python) n=5000 ;; 1000/1/*) n=20000 ;;
        32768/1/python) n=300 ;; 32768/1/*) n=1000 ;;
        *) n=10000 ;;
    esac
    awk -v n="$n" -v s="$scale" -v b="$2" 'BEGIN {m = int(n * s / b) * b; print (m < b ? b : m)}'
}
proc_cpu() { awk -v t="$(getconf CLK_TCK)" '{printf "%.3f\n", ($14 + $15) / t}' "/proc/$1/stat"; }

# consume WHO K B N: one consumer of N predictions; prints its CPU seconds
consume() {
    local who=$1 k=$2 b=$3 n=$4 out=$work/$1.out cp
    case $who in
        null) "$rate" null --endpoint 'tcp://127.0.0.1:*' --count "$n" > "$out" & ;;
        floor) "$rate" null --endpoint 'tcp://127.0.0.1:*' --count "$n" --floor 1.5 > "$out" & ;;
        python) /usr/bin/python3 tests/bench/bench_monitor.py --endpoint 'tcp://127.0.0.1:*' --count "$n" \
                    --floor 1.5 > "$out" & ;;
    esac
    cp=$!
    until grep -q '^endpoint=' "$out" 2> /dev/null; do
        kill -0 "$cp" 2> /dev/null || { echo "$who did not start" >&2; exit 1; }
        sleep 0.01
    done
    "$rate" send --endpoint "$(sed -n 's/^endpoint=//p' "$out")" --model x --k "$k" --batch "$b" \
        --count "$n" > /dev/null
    wait "$cp"
    sed -n 's/.* cpu=\([0-9.]*\).*/\1/p' "$out"
}

printf '%-8s %10s %10s %10s %10s %12s %12s %14s %11s %11s\n' case "null ns" "floor ns" "calibd ns" \
    "python ns" floor/calibd python/calibd "calibd-null ns" "warm ns" floor/warm
for c in $cases; do
    IFS=/ read -r k b <<< "$c"
    declare -A ns=()
    for who in null floor python; do
        n=$(count "$k" "$b" "$who")
        cpu=$(consume "$who" "$k" "$b" "$n")
        [ -n "$cpu" ] || { echo "bench_floor: $who gave no CPU figure" >&2; exit 1; }
        ns[$who]=$(awk -v s="$cpu" -v n="$n" 'BEGIN {printf "%.0f", s / n * 1e9}')
    done
    n=$(count "$k" "$b" calibd)
    model=k$k-b$b
    # calibd twice on the same model: its first n predictions (the model
    # made, its ring, reservoir and label-free ring filling: 10,000 records
    # each on the defaults, memory touched for the first time), then n more
    # ("warm": full when n >= 10,000, as at K = 10 and 1000)
    for phase in calibd warm; do
        c0=$(proc_cpu "$pid")
        first=$([ "$phase" = calibd ] && echo 1 || echo $((n + 1)))
        "$rate" send --endpoint "$pull" --model "$model" --k "$k" --batch "$b" --count "$n" \
            --first "$first" > /dev/null
        "$rate" wait --control "$ctl" --model "$model" --scored $((first - 1 + n)) > /dev/null ||
            { echo "calibd did not score $((first - 1 + n)) pairs of $model"; tail "$work/log"; exit 1; }
        c1=$(proc_cpu "$pid")
        ns[$phase]=$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN {printf "%.0f", (b - a) / n * 1e9}')
    done
    awk -v c="$c" -v nu="${ns[null]}" -v f="${ns[floor]}" -v d="${ns[calibd]}" -v p="${ns[python]}" \
        -v w="${ns[warm]}" 'BEGIN {printf "%-8s %10d %10d %10d %10d %12.2f %12.1f %14d %11d %11.2f\n",
            c, nu, f, d, p, f / d, p / d, d - nu, w, f / w}'
done
