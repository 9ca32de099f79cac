#!/usr/bin/env bash
# bench_throughput.sh [BUILD_DIR] — calibd's ingest rate against the
# transport's limit, in one run, case by case: the same pre-encoded
# protocol-v1 messages (tests/bench/bench_rate send: K float32 logits, ids
# written in place, PUSH blocking so nothing is dropped) go to a null
# consumer (bench_rate null: libzmq receive and msgpack-c decode, nothing
# else) and to calibd's PULL socket, timed from the first send until the
# null consumer has counted them all, or calibd's status shows them all
# scored (bench_rate wait, polling every 5 ms). Cases: K = 10, 100, 1000;
# rows and batches of 64; outcomes inline and labels as separate messages
# joined by id; identity parameters and stored T = 1.5 (both views
# scored). calibd runs on its defaults otherwise, periodic snapshots off:
# both views, bins, class-wise bins, windows, reservoir, ring, drift
# detection, confidence sequences. Reports per
# case predictions/s of both, their ratio and calibd's CPU seconds per
# million predictions; calibd's peak RSS at the end.
# Run: make -C build/plain tests/bench/bench_rate && tests/bench/bench_throughput.sh build/plain
#      (SCALE=0.5 halves every case's count; CASES="10/64/inline/identity ..." picks cases;
#      CURVE=1: every socket with CURVE, calibd's and the null consumer's alike;
#      DEFAULTS="cs_alpha = 0": lines for calibd.conf's [defaults];
#      DAEMON="max_msg_size = 65536": lines for its [daemon])
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/bench_lib.sh
rate_bench "${1:-}"

all_cases=""
for k in 10 100 1000; do
    for b in 1 64; do
        for y in inline labels; do
            for p in identity T1.5; do
                all_cases="$all_cases $k/$b/$y/$p"
            done
        done
    done
done
cases=${CASES:-$all_cases}
# stored parameters for the T = 1.5 cases' models
for c in $cases; do
    IFS=/ read -r k b y p <<< "$c"
    [ "$p" = identity ] ||
        printf 'version 1\nmethod temperature\nparam T 1.5\n' > "$work/model.k$k-b$b-$y-$p.params"
done
# No periodic snapshot: one of the gigabytes the K = 1000 cases leave
# (rings, reservoirs) lands on whichever case runs at that moment, and its
# CPU would be counted as that case's ingest; BENCHMARKS.md, "Snapshots",
# measures them apart.
printf '[daemon]\nsnapshot_interval = 0\n%s\n' "${DAEMON:-}" > "$work/calibd.conf"
keys=() server=() conf=$work/calibd.conf
# CURVE=1: calibd a CURVE server admitting the producer's key (its ZAP
# handler checks it once per connection), the null consumer one too
if [ "${CURVE:-0}" = 1 ]; then
    mkdir "$work/keys" "$work/allowed"
    "$dir/calibctl" keygen "$work/keys/calibd" > /dev/null
    "$dir/calibctl" keygen "$work/keys/producer" > /dev/null
    cp "$work/keys/producer.key" "$work/allowed/"
    printf 'curve_secret_key = %s\ncurve_producers = %s\ncurve_operators = %s\ncurve_subscribers = any\n' \
        "$work/keys/calibd.key_secret" "$work/allowed" "$work/allowed" >> "$conf"
    keys=(--key "$work/keys/producer.key_secret" --server-key "$work/keys/calibd.key")
    server=(--curve-server "$work/keys/calibd.key_secret")
fi
# DEFAULTS: lines for calibd.conf's [defaults], to price one statistic by
# turning it off (DEFAULTS=$'cs_alpha = 0\ndrift = no')
[ -z "${DEFAULTS:-}" ] || printf '[defaults]\n%s\n' "$DEFAULTS" >> "$conf"
start_calibd "$conf" warn

now() { date +%s.%N; }
cpu() { awk -v t="$(getconf CLK_TCK)" '{printf "%.3f\n", ($14 + $15) / t}' "/proc/$pid/stat"; }
count() { # predictions for a case: about a second of calibd at today's rates
    local k=$1 b=$2 n
    case "$k/$b" in
        10/1) n=1000000 ;; 10/64) n=4000000 ;; 100/1) n=400000 ;;
        100/64) n=1000000 ;; 1000/1) n=100000 ;; *) n=200000 ;;
    esac
    awk -v n="$n" -v s="$scale" -v b="$b" 'BEGIN {m = int(n * s / b) * b; print (m < b ? b : m)}'
}

printf '%-28s %12s %12s %6s %14s\n' case null/s calibd/s ratio "cpu s/M pred"
for c in $cases; do
    IFS=/ read -r k b y p <<< "$c"
    n=$(count "$k" "$b")
    lab=()
    [ "$y" = inline ] || lab=(--labels)
    model=k$k-b$b-$y-$p
    # the null consumer
    "$rate" null --endpoint 'tcp://127.0.0.1:*' --count "$n" "${lab[@]}" "${server[@]}" \
        > "$work/null.out" &
    np=$!
    until grep -q '^endpoint=' "$work/null.out" 2> /dev/null; do sleep 0.01; done
    ep=$(sed -n 's/^endpoint=//p' "$work/null.out")
    t0=$(now)
    "$rate" send --endpoint "$ep" --model "$model" --k "$k" --batch "$b" --count "$n" \
        "${lab[@]}" "${keys[@]}" > /dev/null
    wait "$np"
    t1=$(now)
    null_rate=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
    # calibd
    c0=$(cpu)
    t0=$(now)
    "$rate" send --endpoint "$pull" --model "$model" --k "$k" --batch "$b" --count "$n" \
        "${lab[@]}" "${keys[@]}" > /dev/null
    "$rate" wait --control "$ctl" --model "$model" --scored "$n" "${keys[@]}" > /dev/null ||
        { echo "calibd did not score $n pairs of $model"; tail "$work/log"; exit 1; }
    t1=$(now)
    c1=$(cpu)
    awk -v c="$c" -v n="$n" -v a="$t0" -v b="$t1" -v nr="$null_rate" -v c0="$c0" -v c1="$c1" \
        'BEGIN {r = n / (b - a); printf "%-28s %12.0f %12.0f %6.2f %14.2f\n", c, nr, r, r / nr, (c1 - c0) / n * 1e6}'
done
echo "calibd peak RSS: $(awk '/^VmHWM/ {print $2, $3}' "/proc/$pid/status")"
