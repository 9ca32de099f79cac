# bench_lib.sh — sourced by the benchmark scripts that drive one calibd.
# They set `dir` (the build directory) and `work` (a fresh directory, which
# becomes calibd's state directory), and kill "$pid" on exit; or they call
# defaults_calibd (below), which does both.

# start_calibd CONF LOG_LEVEL [ARG...]: calibd with CONF on ephemeral
# loopback endpoints, HTTP off, its log in $work/log; returns once it has
# written its endpoints, with pid, pull (ingest_pull) and ctl (control) set.
start_calibd() {
    local conf=$1 level=$2
    shift 2
    "$dir/calibd" -c "$conf" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' \
        --publish 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' --http off \
        --state-dir "$work" --log-level "$level" "$@" 2> "$work/log" &
    pid=$!
    until [ -s "$work/endpoints" ]; do
        kill -0 "$pid" 2> /dev/null || { cat "$work/log"; exit 1; }
        sleep 0.05
    done
    pull=$(awk '$1 == "ingest_pull" {print $2}' "$work/endpoints")
    ctl=$(awk '$1 == "control" {print $2}' "$work/endpoints")
}

# rate_bench [BUILD_DIR]: the preamble of the benches that drive
# bench_rate: dir, rate (built if missing), scale (SCALE, default 1) and a
# fresh $work, removed at exit once the calibd in $pid has stopped.
rate_bench() {
    dir=$(cd "${1:-build/plain}" && pwd)
    rate=$dir/tests/bench/bench_rate
    [ -x "$rate" ] || make -C "$dir" tests/bench/bench_rate > /dev/null
    scale=${SCALE:-1}
    work=$(mktemp -d)
    pid=
    trap '[ -z "$pid" ] || { kill "$pid"; wait "$pid"; } 2> /dev/null; rm -rf "$work"' EXIT
}

# defaults_calibd: a fresh $work (removed at exit, calibd stopped first)
# and calibd on its defaults (an empty configuration) in it, logging at
# info; for the scripts that measure calibd as it ships.
defaults_calibd() {
    work=$(mktemp -d)
    pid=
    trap '[ -z "$pid" ] || kill "$pid" 2> /dev/null; rm -rf "$work"' EXIT
    : > "$work/calibd.conf"
    start_calibd "$work/calibd.conf" info
}
