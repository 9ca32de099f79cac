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

# The plain build, out of the git tree into build/plain: every test, two a
# core (most of a script's time is spent waiting on a daemon's ticks and
# streams, not computing).
t0=$SECONDS
if dir=$(scripts/build.sh plain --enable-werror); then
    phases+=("$((SECONDS - t0)) s  plain: build")
    echo "== plain: make check"
    t0=$SECONDS
    export CALIB_TEST_TIMES="$PWD/build/test-times.plain"
    rm -f "$CALIB_TEST_TIMES"
    (cd "$dir" && make -j"$(( 2 * $(nproc) ))" check)
    phases+=("$((SECONDS - t0)) s  plain: make check")
    times_of plain "$CALIB_TEST_TIMES"
    count "$dir/test-suite.log" || { cat "$dir/test-suite.log" 2> /dev/null; status=1; }
else
    status=1 failed=$((failed + 1))
fi

# The sanitizers build is the tarball's: `make distcheck` builds the
# tarball, unpacks it read-only, configures it with AddressSanitizer +
# UndefinedBehaviorSanitizer (clang where installed: its UBSan checks more
# than GCC's; with it the libFuzzer targets, tests/fuzz, each run
# FUZZ_SECONDS, 20), builds it, runs every test there, installs it
# (installcheck: every manual page), uninstalls and cleans it. One build
# serves both: the tests under the sanitizers, and the tarball holding
# everything they need. Its tree, with test-suite.log, stays in
# build/plain/calibd-*/_build/sub when a test fails.
san=(--enable-werror --enable-sanitizers)
command -v clang > /dev/null && san+=(CC=clang --enable-fuzzing)
if [ -f build/plain/Makefile ]; then
    echo "== sanitizers: make distcheck (the tarball's build: every test, installcheck)"
    t0=$SECONDS
    export CALIB_TEST_TIMES="$PWD/build/test-times.sanitizers"
    rm -f "$CALIB_TEST_TIMES"
    log=build/plain/distcheck.log
    (cd build/plain && make -j"$(( 2 * $(nproc) ))" distcheck DISTCHECK_CONFIGURE_FLAGS="${san[*]}") 2>&1 |
        tee "$log"
    rc=${PIPESTATUS[0]}
    phases+=("$((SECONDS - t0)) s  sanitizers: make distcheck")
    times_of sanitizers "$CALIB_TEST_TIMES"
    if count "$log"; then
        # the tests passed; installcheck, uninstall or distcleancheck did not
        [ "$rc" -eq 0 ] || { status=1 failed=$((failed + 1)); }
    else
        status=1
        cat build/plain/calibd-*/_build/sub/test-suite.log 2> /dev/null
    fi
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
echo "== the ten slowest tests (seconds of wall clock and of CPU; both variants run two a core at a time)"
sort -rn "$times" | head -10 | awk '{ printf "  %7.1f %7.1f  %s %s\n", $1, $2, $3, $4 }'
echo "== the ten costliest in CPU"
sort -k2,2 -rn "$times" | head -10 | awk '{ printf "  %7.1f %7.1f  %s %s\n", $1, $2, $3, $4 }'
echo "== phases"
printf '  %s\n' "${phases[@]}"
awk '{ c[$4] += $2 } END { for (v in c) printf "  %.0f s  CPU of the tests, %s\n", c[v], v }' "$times" | sort -k5
echo "$passed passed, $failed failed"
exit $status
