#!/usr/bin/env bash
# score_ref.sh — `calibctl score` against the independent Python reference
# (tests/ref/calib_ref.py) on ~40 random but valid files from gen_csv.py
# (logits, probs, binary, gaussian; n from 1 to 3000, K from 2 to 50), plus
# the hand-worked files in tests/ref/cases (checked against their
# .expected.json, both calibctl and the reference).  Every key must agree
# within 1e-9 relative or 1e-12 absolute (compare_json.py).
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

# compare NAME CSV [EXPECTED.json]: calibctl vs the reference (and vs EXPECTED)
compare() {
    local name=$1 csv=$2 expected=${3:-} rc msgs=""
    "$CALIBCTL" score "$csv" > "$tmp/c.json" 2> "$tmp/c.err"
    rc=$?
    if [ $rc -ne 0 ]; then
        failed "$name" "$csv" "calibctl exited $rc: $(head -c 500 "$tmp/c.err")"
        return
    fi
    if ! "$py" "$ref/calib_ref.py" "$csv" > "$tmp/r.json" 2> "$tmp/r.err"; then
        failed "$name" "$csv" "calib_ref.py failed: $(head -c 500 "$tmp/r.err")"
        return
    fi
    msgs=$("$py" "$ref/compare_json.py" "$tmp/c.json" "$tmp/r.json" "calibctl vs ref"
           if [ -n "$expected" ]; then
               "$py" "$ref/compare_json.py" "$tmp/c.json" "$expected" "calibctl vs expected"
               "$py" "$ref/compare_json.py" "$tmp/r.json" "$expected" "ref vs expected"
           fi)
    if [ -n "$msgs" ]; then
        failed "$name" "$csv" "$msgs"
    else
        ok "$name"
        [ -s "$tmp/c.err" ] && echo "# stderr: $(head -c 200 "$tmp/c.err" | tr '\n' ' ')"
    fi
}

# hand-worked cases
for csv in "$ref"/cases/*.csv; do
    [ -f "$csv" ] || continue
    base=${csv%.csv}
    compare "cases/$(basename "$base")" "$csv" "$base.expected.json"
done

# random files: "kind n k" (seed = line number)
seed=0
while read -r kind n k; do
    [ -n "$kind" ] || continue
    seed=$((seed + 1))
    name="$kind-s$seed-n$n-k$k"
    csv="$tmp/$name.csv"
    if ! "$py" "$ref/gen_csv.py" --seed "$seed" --kind "$kind" --n "$n" --k "$k" "$csv" \
            2> "$tmp/g.err"; then
        failed "$name" /dev/null "gen_csv.py failed: $(cat "$tmp/g.err")"
        continue
    fi
    compare "$name" "$csv"
done <<'EOF'
logits 1 2
logits 1 7
logits 2 3
logits 3 2
logits 10 5
logits 16 2
logits 100 2
logits 300 50
logits 500 10
logits 1000 3
logits 3000 2
logits 1200 25
probs 1 3
probs 2 2
probs 3 50
probs 15 4
probs 16 2
probs 31 3
probs 200 7
probs 1000 2
probs 2000 10
probs 600 50
binary 1 2
binary 2 2
binary 3 2
binary 14 2
binary 30 2
binary 300 2
binary 1000 2
binary 3000 2
gaussian 1 2
gaussian 2 2
gaussian 3 2
gaussian 100 2
gaussian 3000 2
logits 45 2
probs 45 2
binary 46 2
logits 7 40
probs 150 15
EOF

finish
