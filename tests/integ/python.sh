#!/usr/bin/env bash
# python.sh — the calibd Python package (python/): its pytest suite against
# real calibds (python/tests: messages on the wire, every output form
# scored exactly, nothing lost before calibd is up, PUB's wait, the
# follower's apply against libcalib's through ctypes and against a real
# refit), each test one check here; then `pip install ./python` into a
# virtual environment on Debian's python3-zmq, msgpack and numpy, offline,
# and the example producer (examples/python/producer.py) run from that
# installed copy against a calibd.
. "$(dirname "$0")/lib.sh"
out="$work/pytest.out"
( cd "$srcdir/python" && PYTHONDONTWRITEBYTECODE=1 TIME_SCALE=$TIME_SCALE \
    "$PY" -m pytest -rA -p no:cacheprovider tests ) > "$out" 2>&1
rc=$?
ran=0
while read -r verdict name; do
    ran=$((ran + 1))
    check "pytest $name" '[ "$verdict" = PASSED ] || [ "$verdict" = SKIPPED ]'
done < <(sed -n 's/^\(PASSED\|FAILED\|ERROR\|SKIPPED\) \([^ ]*\).*/\1 \2/p' "$out")
check "pytest ran the package's tests (exit $rc, $ran reported)
$(tail -n 40 "$out" | sed 's/^/  /')" '[ $rc -eq 0 ] && [ $ran -ge 10 ]'

# pip install ./python, offline, beside Debian's packages
"$PY" -m venv --system-site-packages "$work/venv" > "$work/venv.out" 2>&1 &&
    cp -r "$srcdir/python" "$work/src" &&
    "$work/venv/bin/pip" install --no-index --no-build-isolation --no-deps -q \
        "$work/src" >> "$work/venv.out" 2>&1
rc=$?
check "pip install ./python into a virtual environment, offline
$(tail -n 20 "$work/venv.out" | sed 's/^/  /')" '[ $rc -eq 0 ]'
# the version is written once, calibd/__init__.py's __version__: the
# installed package's metadata (pyproject.toml reads it) and module say it
want=$(cd / && "$PY" -c 'import calibd; print(calibd.__version__)' 2>&1)
where=$(cd / && PYTHONPATH= "$work/venv/bin/python" -c \
    'import importlib.metadata as m, calibd
print(m.version("calibd"), calibd.__version__, calibd.__file__)' 2>&1)
check "the installed package imports from the environment, version $want ($where)" \
    '[[ "$want" =~ ^[0-9]+\.[0-9]+ ]] &&
     [[ "$where" == "$want $want $work/venv/"*site-packages/calibd/__init__.py ]]'

start_calibd --ingest-pull 'tcp://127.0.0.1:*'
# the example's producer: its import and the lines from "# the producer" on
lines=$(( 1 + $(sed -n '/^# the producer/,$p' "$srcdir/examples/python/producer.py" |
    grep -cvE '^[[:space:]]*(#|$)') ))
sent=$(cd / && PYTHONPATH= "$work/venv/bin/python" "$srcdir/examples/python/producer.py" \
    "$PULL" churn 2>&1)
check "the example producer runs from the installed package ($sent)" \
    'wait_for "$work/s.json" "r[\"models\"].get(\"churn\", {}).get(\"scored\") == 5000"'
check "and its producer is $lines lines, under 10" '[ "$lines" -lt 10 ]'
check "calibd stops cleanly" stop_calibd
finish
