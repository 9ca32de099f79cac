#!/usr/bin/env bash
# test.sh — every test, twice: a plain build of the git tree, and the
# tarball's build (`make distcheck`) with AddressSanitizer +
# UndefinedBehaviorSanitizer (with float-cast-overflow; clang, where
# installed), which also builds and runs the libFuzzer targets for a short
# while each (tests/fuzz). Installs what it needs. Ends with one line "N passed, N failed": unit tests count one
# each, test scripts one per check (they speak TAP); exits 1 when any
# test or check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test || exit 1
passed=0 failed=0 status=0
phases=()
times=$(mktemp)
trap 'rm -f "$times"' EXIT

# count LOG: adds the testsuite summary's figures in LOG (make check's
# output, or its test-suite.log) to passed and failed: unit tests count one
# each, the scripts one per check (TAP); a script that died before its plan
# is an ERROR, a failed check a FAIL, a skipped script a SKIP. Returns 1
# when anything failed or no summary is there.
count() {
    local pass fail error
    grep -q '^# TOTAL:' "$1" 2> /dev/null || { failed=$((failed + 1)); return 1; }
    pass=$(summary PASS "$1") fail=$(summary FAIL "$1") error=$(summary ERROR "$1")
    passed=$((passed + pass))
    failed=$((failed + fail + error))
    [ "$fail" -eq 0 ] && [ "$error" -eq 0 ]
}
# summary WORD LOG: the count on the summary line "# WORD: N" (the first
# one: a failed script's log, copied below it, may hold anything)
summary() { awk -v w="# $1:" 'index($0, w) == 1 { print $3 + 0; found = 1; exit } END { if (!found) print 0 }' "$2"; }
# each test's time (tests/timed.sh writes CALIB_TEST_TIMES), named with
# its variant
times_of() { [ -f "$2" ] && sed "s|\$| ($1)|" "$2" >> "$times"; rm -f "$2"; }

# configure, libtool and make run their shell scripts under dash: libtool
# is a shell script run for every compile and link, and dash runs it in
# less CPU than bash (a sixth less for the sanitizers' build). The scripts
# that need bash say so in their first line.
[ -x /bin/dash ] && export CONFIG_SHELL=/bin/dash
# cpus: the CPUs this process may use: nproc's, or fewer where its cgroup
# has a CPU quota (systemd-run -p CPUQuota=, docker --cpus), rounded up
cpus() {
    local n=$(nproc) cg q p d
    cg=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
    if [ -r "/sys/fs/cgroup$cg/cpu.max" ]; then
        read -r q p < "/sys/fs/cgroup$cg/cpu.max"
    else
        cg=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' /proc/self/cgroup)
        for d in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do
            [ -r "$d$cg/cpu.cfs_quota_us" ] || continue
            q=$(cat "$d$cg/cpu.cfs_quota_us") p=$(cat "$d$cg/cpu.cfs_period_us")
            break
        done
    fi
    case ${q:-max} in
        max|-1) echo "$n" ;;
        *) echo $(( (q + p - 1) / p < n ? (q + p - 1) / p : n )) ;;
    esac
}
# both variants' jobs (compiles, tests) at once, four a CPU in all
jobs=$(( 4 * $(cpus) ))

# Two things at once, drawing on one pool of job slots, four a CPU (most
# of a script's time is spent waiting on a daemon's ticks and streams,
# not computing), so that one's waits are the other's CPU, and the one
# still running when the other ends takes all the slots:
# - the sanitizers' build, which is the tarball's, started first (the
#   longer of the two): `make distcheck` builds the tarball, unpacks it
#   read-only, configures it with AddressSanitizer +
#   UndefinedBehaviorSanitizer (clang where installed: its UBSan checks
#   more than GCC's; with it the libFuzzer targets, tests/fuzz, each run
#   FUZZ_SECONDS, 20), builds it, runs every test there, installs it
#   (installcheck: every manual page), uninstalls and cleans it. One build
#   serves both: the tests under the sanitizers, and the tarball holding
#   everything they need. Its tree, with test-suite.log, stays in
#   build/plain/calibd-*/_build/sub when a test fails.
# - the plain build, out of the git tree into build/plain, and every test
#   on it (make check).
# Both start from build/plain, configured first: make dist reads the
# sources only, and neither touches what the other writes. The plain
# build and check print as they go; the distcheck's log follows once the
# plain check has ended.
san=(--enable-werror --enable-sanitizers)
command -v clang > /dev/null && san+=(CC=clang --enable-fuzzing)
t0=$SECONDS
log=$PWD/build/plain/distcheck.log
if dir=$(BUILD_TARGETS=Makefile scripts/build.sh plain --enable-werror); then
    # The pool: a jobserver, as `make -jN` makes one for its sub-makes (GNU
    # make 4.3: a pipe's two ends in MAKEFLAGS; a FIFO opened read-write is
    # both). Each of the two makes has a slot of its own beside the FIFO's
    # tokens, and passes its slots down to distcheck's and check's sub-makes.
    pool=$(mktemp -u "${TMPDIR:-/tmp}/calib-jobs.XXXXXX")
    mkfifo "$pool" && exec 9<> "$pool" && rm -f "$pool" || { echo "test.sh: no FIFO for the job pool" >&2; exit 1; }
    printf "%$((jobs - 2))s" '' | tr ' ' + >&9
    export MAKEFLAGS=" -j --jobserver-auth=9,9"
    (cd "$dir" && CALIB_TEST_TIMES="$PWD/../test-times.sanitizers" &&
        rm -f "$CALIB_TEST_TIMES" && export CALIB_TEST_TIMES &&
        make distcheck DISTCHECK_CONFIGURE_FLAGS="${san[*]}" > "$log" 2>&1
     echo $? > "$log.rc"; echo $((SECONDS - t0)) > "$log.seconds") &
    dc=$!
    echo "== plain: build (and, at the same time, sanitizers: make distcheck, in $log)"
    if (cd "$dir" && make); then
        phases+=("$((SECONDS - t0)) s  plain: configure and build")
        echo "== plain: make check"
        t1=$SECONDS
        (cd "$dir" && CALIB_TEST_TIMES="$PWD/../test-times.plain" &&
            rm -f "$CALIB_TEST_TIMES" && export CALIB_TEST_TIMES && make check)
        phases+=("$((SECONDS - t1)) s  plain: make check")
        times_of plain build/test-times.plain
        count "$dir/test-suite.log" || { cat "$dir/test-suite.log" 2> /dev/null; status=1; }
    else
        status=1 failed=$((failed + 1))
    fi
    echo "== sanitizers: make distcheck (the tarball's build: every test, installcheck)"
    tail -n +1 --pid="$dc" -f "$log"
    wait "$dc"
    phases+=("$(cat "$log.seconds") s  sanitizers: make distcheck (from the start)")
    times_of sanitizers build/test-times.sanitizers
    if count "$log"; then
        # the tests passed; installcheck, uninstall or distcleancheck did not
        [ "$(cat "$log.rc")" -eq 0 ] || { status=1 failed=$((failed + 1)); }
    else
        status=1
        cat build/plain/calibd-*/_build/sub/test-suite.log 2> /dev/null
    fi
else
    status=1 failed=$((failed + 1))
fi
# What only running the scripts from the tarball could show, a file
# missing from it, is shown for every file at once: every file git tracks
# must be in it.
if git rev-parse --is-inside-work-tree > /dev/null 2>&1 && ls build/plain/calibd-*.tar.gz > /dev/null 2>&1; then
    # .gitignore and the m4 folder's placeholder are git's, not the tarball's
    missing=$(comm -13 <(tar tzf build/plain/calibd-*.tar.gz | sed 's|^[^/]*/||' | sort) \
                       <(git ls-files | grep -vx '.gitignore\|m4/.gitkeep' | sort))
    if [ -n "$missing" ]; then
        echo "tracked files missing from the tarball (EXTRA_DIST in Makefile.am):"
        echo "$missing" | sed 's/^/  /'
        status=1 failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
fi
echo "== the ten slowest tests (seconds of wall clock and of CPU; both variants at once, four jobs a CPU in all)"
sort -rn "$times" | head -10 | awk '{ printf "  %7.1f %7.1f  %s %s\n", $1, $2, $3, $4 }'
echo "== the ten costliest in CPU"
sort -k2,2 -rn "$times" | head -10 | awk '{ printf "  %7.1f %7.1f  %s %s\n", $1, $2, $3, $4 }'
echo "== phases"
printf '  %s\n' "${phases[@]}"
awk '{ c[$4] += $2 } END { for (v in c) printf "  %.0f s  CPU of the tests, %s\n", c[v], v }' "$times" | sort -k5
echo "$passed passed, $failed failed"
exit $status
