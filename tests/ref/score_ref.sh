#!/usr/bin/env bash
# score_ref.sh — `calibctl score` against the independent Python reference
# (tests/ref/calib_ref.py) on ~40 random but valid files from gen_csv.py
# (logits, probs, binary, gaussian; n from 1 to 3000, K from 2 to 50: the
# lines of tests/ref/random_cases, each "KIND N K", its seed its number), plus
# the hand-worked files in tests/ref/cases (checked against their
# .expected.json, both calibctl and the reference).  Every key must agree
# within 1e-9 relative or 1e-12 absolute (compare_json.py). The python
# work is done in two processes (tests/ref/ref_batch.py), not three a file.
#
# Environment: CALIBCTL (the binary), srcdir (top source dir; the scripts are
# in $srcdir/tests/ref).  CALIB_REF_KEEP=DIR keeps the failing inputs there.
# Speaks TAP (tests/integ/tap.sh): a check per file; skipped without python3.
set -u
. "$(dirname "$0")/../integ/tap.sh"

if ! command -v python3 > /dev/null 2>&1; then
    skip_all "python3 not found"
fi
# the interpreter itself (skips version-manager shims on every call)
py=$(python3 -c 'import sys; print(sys.executable or "python3")' 2> /dev/null) || py=python3
[ -x "$py" ] || py=python3

here=$(cd "$(dirname "$0")" && pwd)
ref="${srcdir:-}/tests/ref"
[ -f "$ref/calib_ref.py" ] || ref=$here
: "${CALIBCTL:=$ref/../../calibctl}"
if [ ! -x "$CALIBCTL" ]; then
    echo "Bail out! CALIBCTL='$CALIBCTL' is not an executable"
    exit 1
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
keep=${CALIB_REF_KEEP:-}

failed() {  # NAME CSV REASON...
    local name=$1 csv=$2
    shift 2
    bad "$name
$(printf '%s\n' "$@")"
    if [ -n "$keep" ]; then
        mkdir -p "$keep" && cp "$csv" "$keep/$name.csv"
    fi
}

# score NAME CSV [EXPECTED.json]: calibctl's figures for CSV, in
# $tmp/NAME.json; the case goes to $tmp/cases.tsv for ref_batch.py's check
# (the reference's figures, compared with calibctl's and with EXPECTED)
: > "$tmp/cases.tsv"
score() {
    local name=$1 csv=$2 expected=${3:-} rc
    "$CALIBCTL" score "$csv" > "$tmp/$name.json" 2> "$tmp/$name.err"
    rc=$?
    if [ $rc -ne 0 ]; then
        failed "$name" "$csv" "calibctl exited $rc: $(head -c 500 "$tmp/$name.err")"
        return
    fi
    printf '%s\t%s\t%s\t%s\n' "$name" "$csv" "$tmp/$name.json" "$expected" >> "$tmp/cases.tsv"
}

# hand-worked cases
mkdir -p "$tmp/cases" || exit 1
for csv in "$ref"/cases/*.csv; do
    [ -f "$csv" ] || continue
    base=${csv%.csv}
    score "cases/$(basename "$base")" "$csv" "$base.expected.json"
done

# random files: "kind n k" (seed = line number), all made by one python
"$py" "$ref/ref_batch.py" gen "$tmp" < "$ref/random_cases" > "$tmp/names" 2> "$tmp/g.err" ||
    failed "gen_csv" /dev/null "ref_batch.py gen failed: $(head -c 500 "$tmp/g.err")"
while read -r name reason; do
    case $name in
        '!') failed "${reason%% *}" /dev/null "gen_csv.py failed: ${reason#* }" ;;
        *) score "$name" "$tmp/$name.csv" ;;
    esac
done < "$tmp/names"

# every case against the reference, in one python: a line with the case's
# name, then one for each difference, indented
verdict() {
    local csv=$tmp/$name.csv
    [ -n "$name" ] || return 0
    case $name in cases/*) csv=$ref/$name.csv ;; esac
    if [ -n "$msgs" ]; then
        failed "$name" "$csv" "${msgs#$'\n'}"
    else
        ok "$name"
        [ -s "$tmp/$name.err" ] && echo "# stderr: $(head -c 200 "$tmp/$name.err" | tr '\n' ' ')"
    fi
    return 0
}
name= msgs=
"$py" "$ref/ref_batch.py" check < "$tmp/cases.tsv" > "$tmp/verdicts" 2> "$tmp/c.err" ||
    failed "ref_batch.py" /dev/null "ref_batch.py check failed: $(head -c 500 "$tmp/c.err")"
while IFS= read -r line; do
    case $line in
        ' '*) msgs+=$'\n'${line# } ;;
        *) verdict; name=$line msgs= ;;
    esac
done < "$tmp/verdicts"
verdict

finish
