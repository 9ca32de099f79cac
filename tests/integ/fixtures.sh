#!/usr/bin/env bash
# fixtures.sh — this build reads the state files of earlier ones. Each
# folder of tests/fixtures holds the files a release wrote (snapshot,
# model.*.params, history: tests/fixtures/make.sh made them) and what that
# release read back from them (expected.json, history.*.json). calibctl
# snapshot must read the snapshot to the same status, and a calibd started
# on the files must restore the same models, parameters and history, for
# as long as calibd reads that format (calibd(8), SNAPSHOTS, Upgrades).
# And the other way: a snapshot of format 3 on, made over as a later
# calibd might write it (later.py: a higher format, its compat kept, keys
# this build does not know in every map), reads to the same status.
. "$(dirname "$0")/lib.sh"
STATUS="$PY $srcdir/tests/fixtures/status.py"
found=0
for dir in "$srcdir"/tests/fixtures/*/; do
    [ -f "$dir/expected.json" ] || continue
    found=$((found + 1))
    v=$(basename "$dir")
    "$CALIBCTL" snapshot "$dir/snapshot" > "$work/read.json" 2> "$work/read.err"
    rc=$?
    check "$v: calibctl snapshot reads it, every model whole
$(sed 's/^/  /' "$work/read.err")" '[ $rc -eq 0 ] && [ ! -s "$work/read.err" ]'
    check "$v: to the status it was read to then
$($STATUS check "$dir/expected.json" "$work/read.json" | sed 's/^/  /')" \
        '$STATUS check "$dir/expected.json" "$work/read.json" > /dev/null'
    "$PY" "$srcdir/tests/fixtures/later.py" "$dir/snapshot" "$work/later"
    rc=$?
    if [ $rc -ne 2 ]; then
        "$CALIBCTL" snapshot "$work/later" > "$work/later.json" 2> "$work/later.err"
        check "$v: made over as a later format's (later.py), read to the same status
$(sed 's/^/  /' "$work/later.err")
$($STATUS check "$dir/expected.json" "$work/later.json" | sed 's/^/  /')" \
            '[ $rc -eq 0 ] && [ ! -s "$work/later.err" ] &&
             $STATUS check "$dir/expected.json" "$work/later.json" > /dev/null'
    fi

    rm -rf "$work/state" && mkdir -p "$work/state" && cp "$dir"/snapshot "$dir"/history \
        "$dir"/model.*.params "$work/state/"
    start_calibd -c "$dir/calibd.conf" --http 127.0.0.1:0 --log-level info
    models=$(grep -c '^\[model ' "$dir/calibd.conf")
    check "$v: calibd restores every model from it, whole ($models)
$(grep -E 'snapshot|history|params|restored' "$work/calibd.log" | sed 's/^/  /')" \
        'log_has "snapshot: restored $models models" && ! log_has "moved aside" &&
         ! log_has "not restored" && ! log_has "restored but for"'
    status > "$work/status.json"
    check "$v: to the same models, parameters and figures
$($STATUS check "$dir/expected.json" "$work/status.json" | sed 's/^/  /')" \
        '$STATUS check "$dir/expected.json" "$work/status.json" > /dev/null'
    for h in "$dir"/history.*.json; do
        m=${h##*/history.}
        m=${m%.json}
        curl -sS --max-time "$(scaled 10)" "${HTTP%/metrics}/history?model=$m" > "$work/h.json"
        check "$v: model $m's history, point for point" \
            '"$PY" -c "import json, sys
want = json.load(open(sys.argv[1]))[\"points\"]
got = json.load(open(sys.argv[2]))[\"points\"][:len(want)]
# the columns of that release, then the label-free estimate it did not have
sys.exit(not (want and len(got) == len(want) and all(g[:len(w)] == w and g[len(w):] == [None] * 3
                                                     for g, w in zip(got, want))))" "$h" "$work/h.json"'
    done
    check "$v: calibd stops cleanly" "stop_calibd"
done
check "fixtures found" '[ $found -gt 0 ]'
finish
