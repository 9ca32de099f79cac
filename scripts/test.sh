#!/usr/bin/env bash
# test.sh — every test, twice: a plain build (then `make distcheck`) and a
# build with AddressSanitizer + UndefinedBehaviorSanitizer (with
# float-cast-overflow; clang, where installed), which also builds and runs
# the libFuzzer targets for a short while each (tests/fuzz). Installs what it
# needs. Ends with one line "N passed, N failed": unit tests count one
# each, test scripts one per check (they speak TAP); exits 1 when any
# test or check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test || exit 1
passed=0 failed=0 status=0
phases=()
times=$(mktemp)
trap 'rm -f "$times"' EXIT

run_variant() {
    local variant=$1
    shift
    local dir t0=$SECONDS
    dir=$(scripts/build.sh "$variant" --enable-werror "$@") || { status=1; return; }
    phases+=("$((SECONDS - t0)) s  $variant: build")
    echo "== $variant: make check"
    rm -f "$dir/test-times"
    t0=$SECONDS
    # two tests a core: most of a script's time is spent waiting on a
    # daemon's ticks and streams, not computing
    (cd "$dir" && make -j"$(( 2 * $(nproc) ))" check) || status=1
    phases+=("$((SECONDS - t0)) s  $variant: make check")
    # each test's time (tests/timed.sh), named with its variant
    [ -f "$dir/test-times" ] && sed "s|\$| ($variant)|" "$dir/test-times" >> "$times"
    local log="$dir/test-suite.log"
    if [ -f "$log" ]; then
        # the summary at the head of the log: unit tests count one each, the
        # scripts one per check (TAP); a script that died before its plan is
        # an ERROR, a failed check a FAIL, a skipped script a SKIP
        local pass fail error
        pass=$(summary PASS "$log") fail=$(summary FAIL "$log") error=$(summary ERROR "$log")
        passed=$((passed + pass))
        failed=$((failed + fail + error))
        [ "$fail" -eq 0 ] && [ "$error" -eq 0 ] || { cat "$log"; status=1; }
    else
        failed=$((failed + 1)) status=1
    fi
}
# summary WORD LOG: the count on the summary line "# WORD: N" (the first
# one: a failed script's log, copied below it, may hold anything)
summary() { awk -v w="# $1:" 'index($0, w) == 1 { print $3 + 0; found = 1; exit } END { if (!found) print 0 }' "$2"; }

run_variant plain
# clang where it is (deps.sh installs it): its UBSan checks more than GCC's;
# with it, the libFuzzer targets (tests/fuzz), each run FUZZ_SECONDS (20)
san_cc=()
command -v clang > /dev/null && san_cc=(CC=clang --enable-fuzzing)
run_variant sanitizers --enable-sanitizers "${san_cc[@]}"
# The tarball: make distcheck builds it from a read-only copy of the
# sources, installs it (installcheck: every manual page), uninstalls and
# cleans it; its check runs the unit tests, not the scripts a third time,
# since the plain build already ran them out of tree. What only running
# them there could show, a file missing from the tarball, is shown for
# every file at once: every file git tracks must be in it.
echo "== plain: make distcheck (unit tests), and the tarball against git"
t0=$SECONDS
unit=$(make -s -C build/plain list-unit-tests)
(cd build/plain && make -j"$(nproc)" distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror \
     TESTS="$unit" > distcheck.log 2>&1) ||
    { tail -50 build/plain/distcheck.log; status=1; failed=$((failed + 1)); }
phases+=("$((SECONDS - t0)) s  plain: make distcheck")
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
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
echo "== the ten slowest tests (seconds, both variants run two a core at a time)"
sort -rn "$times" | head -10 | sed 's/^/  /'
echo "== phases"
printf '  %s\n' "${phases[@]}"
echo "$passed passed, $failed failed"
exit $status
