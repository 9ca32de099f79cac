#!/usr/bin/env bash
# metrics.sh — GET /metrics on an ephemeral port: the text passes promtool's
# check of the Prometheus exposition format, its values agree with
# `calibctl status` (messages, pairs, rejections by model and reason, the
# parameter version, the join gauges and counters, the loop's counters, the
# mean scores), another path is 404, POST is 405, and slow clients from
# another address neither hold the server nor outlive http_timeout; the
# first scrape, before any tick, is already whole, and no sample is NaN.
. "$(dirname "$0")/lib.sh"
metrics() { curl -sS --max-time "$(scaled 5)" "$HTTP"; }

# a stored version 3 for one model, restored at start: a version that is
# not 0 to compare
mkdir -p "$work/state"
printf '# calibd\nversion 3\nmethod temperature\nts 1\nfit_n 10\nshadow_n 10\nparam T 1.5\n' \
    > "$work/state/model.stored.params"
# before the first tick (60 s away): the snapshot rendered at start
cat > "$work/slow-tick.conf" <<CONF
[daemon]
tick = 60
[model stored]
form = logits
k = 3
CONF
start_calibd -c "$work/slow-tick.conf" --http 127.0.0.1:0
code=$(curl -sS -o "$work/first.txt" -w '%{http_code}' --max-time "$(scaled 5)" "$HTTP")
check "the first scrape, before any tick, is 200 with the counters of the configured models
$(head -5 "$work/first.txt")" \
    '[ "$code" = 200 ] && grep -q "^calibd_scored_total{model=\"stored\"} 0$" "$work/first.txt"'
stop_calibd

cat > "$work/calibd.conf" <<CONF
[daemon]
tick = 0.2
http_timeout = 2
history_step = 0.2
ingest_pull = tcp://127.0.0.1:*
[model stored]
form = logits
k = 3
[model idle]
form = binary
CONF
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0
check "the bound /metrics URL is in the endpoints file" '[[ "$HTTP" == http://127.0.0.1:*/metrics ]]'

# pairs, with labels dropped and duplicated (join gauges and counters
# that are not 0), then every rejection class of the hostile sender
"$SIMULATE" --endpoint ">$INGEST" --model m --seed 7 --count 2000 --batch 50 --label-delay 0.1 \
    --label-drop 0.1 --label-dup 0.1 --linger-ms "$LINGER_MS" 2> /dev/null
"$SIMULATE" --endpoint ">$INGEST" --model stored --k 3 --seed 8 --count 500 --batch 50 \
    --linger-ms "$LINGER_MS" 2> /dev/null
"$HOSTILE" --endpoint ">$INGEST" --random 10 --seed 3 --linger-ms "$LINGER_MS" > /dev/null ||
    bad "the hostile sender ran"

# agree STATUS METRICS: python compares them; exits 1 with what differs
agree() {
    python3 - "$1" "$2" <<'PY'
import json, math, re, sys
r = json.load(open(sys.argv[1]))
series = {}
for line in open(sys.argv[2]):
    if line.startswith("#") or not line.strip():
        continue
    m = re.fullmatch(r'(\w+)(?:\{(.*)\})? (\S+)\n?', line)
    assert m, "not a sample line: %r" % line
    labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
    series[(m.group(1), labels)] = float(m.group(3))
def get(name, **labels):
    return series.get((name, tuple(sorted(labels.items()))))
wrong = []
def eq(what, got, want, tol=0):
    if got is None and want is None:
        return  # no data: null in status, no series on /metrics
    if got is None or want is None or abs(got - want) > tol * max(1, abs(want)):
        wrong.append(f"{what}: /metrics {got}, status {want}")
eq("messages", get("calibd_messages_total"), r["messages"])
# every rejection status counts is a series, and no other is above 0
want_rej = {("", k): v for k, v in r["rejected"].items()}
for name, m in r["models"].items():
    want_rej.update({(name, k): v for k, v in m["rejected"].items()})
for (model, reason), v in want_rej.items():
    eq(f"rejected {model or '(no model)'}/{reason}", get("calibd_rejected_total", model=model, reason=reason), v)
for (name, labels), v in series.items():
    l = dict(labels)
    if name == "calibd_rejected_total" and v and (l["model"], l["reason"]) not in want_rej:
        wrong.append(f"rejected {labels} = {v} on /metrics only")
if sum(want_rej.values()) < 30:
    wrong.append(f"only {sum(want_rej.values())} rejections: the hostile sender's did not all arrive")
for name, m in r["models"].items():
    j, l = m["join"], m["loop"]
    for metric, want in (("scored", m["scored"]), ("predictions", m["predictions"]), ("labels", m["labels"]),
                         ("drift_alarms", l["drift"]["alarms"]), ("refits", l["refits"]),
                         ("refit_errors", l["refit_errors"]), ("candidates", l["candidates"]),
                         ("candidates_published", l["published"]), ("candidates_rejected", l["rejected"]),
                         ("candidates_store_errors", l["store_errors"]), ("alerts", m["alerts"]),
                         ("join_evicted", j["evicted"])):
        eq(f"{name} {metric}", get(f"calibd_{metric}_total", model=name), want)
    eq(f"{name} params version", get("calibd_params_version", model=name), m["params"]["version"])
    for kind in ("prediction", "label"):
        eq(f"{name} waiting {kind}s", get("calibd_join_waiting", model=name, kind=kind), j[f"waiting_{kind}s"])
        eq(f"{name} expired {kind}s", get("calibd_join_expired_total", model=name, kind=kind), j[f"expired_{kind}s"])
        eq(f"{name} duplicate {kind}s", get("calibd_join_duplicates_total", model=name, kind=kind), j[f"duplicate_{kind}s"])
    if m["form"] in ("logits", "probs", "binary"):
        for view in ("raw", "calibrated"):
            eq(f"{name} {view} brier", get("calibd_score_mean", model=name, view=view, scope="cumulative", score="brier"),
               m[view]["brier"]["mean"], 1e-12)
            eq(f"{name} {view} ece", get("calibd_ece", model=name, view=view, scope="cumulative"), m[view]["ece"], 1e-12)
            eq(f"{name} {view} tce2", get("calibd_tce2", model=name, view=view, scope="cumulative"), m[view]["tce2"], 1e-12)
            eq(f"{name} {view} rbs", get("calibd_rbs", model=name, view=view, scope="cumulative"), m[view]["rbs"], 1e-12)
            # the counters: count, and (sum - negative sum) / count is the mean
            for score in ("brier", "log"):
                lab = dict(model=name, view=view, score=score)
                n = get("calibd_score_count_total", **lab)
                eq(f"{name} {view} {score} count", n, m[view][score]["n"])
                s, neg = get("calibd_score_sum_total", **lab), get("calibd_score_negative_sum_total", **lab)
                eq(f"{name} {view} {score} negative sum", neg, 0)
                if n:
                    eq(f"{name} {view} {score} sum / count", (s - neg) / n, m[view][score]["mean"], 1e-9)
                p = m["paired"]
                eq(f"{name} {view} {score} paired mean", get("calibd_paired_score_mean", **lab), p[view][score]["mean"], 1e-12)
            # the reliability bins, bin by bin
            rel = m["reliability"]["cumulative"][view]
            for i in range(m["reliability"]["bins"]):
                lab = dict(model=name, view=view, bin=str(i))
                eq(f"{name} {view} bin {i} count", get("calibd_bin_count_total", **lab), rel["count"][i])
                eq(f"{name} {view} bin {i} correct", get("calibd_bin_correct_total", **lab), rel["correct"][i])
                eq(f"{name} {view} bin {i} confidence", get("calibd_bin_confidence_sum_total", **lab), rel["confidence"][i], 1e-9)
        # the confidence sequences, since the parameters and in the window's period
        for prefix, cs in (("paired", m["paired"]["cs"]), ("window", (m["window"] or {}).get("cs"))):
            for view in ("raw", "calibrated"):
                b = cs[view] if cs and isinstance(cs[view], list) else [None, None]
                for end, want in zip(("low", "high"), b):
                    eq(f"{name} {prefix} {view} cs {end}", get(f"calibd_{prefix}_brier_cs_{end}", model=name, view=view), want, 1e-12)
        wcs = (m["window"] or {}).get("cs")
        eq(f"{name} window cs since", get("calibd_window_cs_since_seconds", model=name), wcs and wcs["since"])
        eq(f"{name} paired count", get("calibd_paired_samples", model=name), m["paired"]["scored"])
        eq(f"{name} paired improvement", get("calibd_paired_improvement", model=name, score="brier"),
           m["paired"]["improvement"]["brier"]["mean"], 1e-12)
        for pname, v in m["params"]["values"].items():
            eq(f"{name} parameter {pname}", get("calibd_params_value", model=name, method=m["params"]["method"], param=pname,
                                                 version=str(m["params"]["version"])), v)
        for phase in ("off", "idle", "fitting", "shadow", "storing"):
            eq(f"{name} phase {phase}", get("calibd_loop_phase", model=name, phase=phase), int(m["loop"]["phase"] == phase))
        for st in ("reference", "watching", "alarm"):
            eq(f"{name} drift state {st}", get("calibd_drift_state", model=name, state=st), int(m["loop"]["drift"]["state"] == st))
m = r["models"].get("m", {})
if m.get("scored") != 2000 - m.get("join", {}).get("waiting_predictions", 2000) or not m["join"]["waiting_predictions"] \
        or not m["join"]["duplicate_labels"] or r["models"].get("stored", {}).get("params", {}).get("version") != 3:
    wrong.append("the traffic is not all in yet")
if wrong:
    print("\n".join(wrong))
    sys.exit(1)
PY
}
# the loop renders /metrics every tick: wait until a scrape agrees with
# the status taken just before it
agreeing() {
    status > "$work/s.json" && metrics > "$work/metrics.txt" &&
        agree "$work/s.json" "$work/metrics.txt" > "$work/agree.out"
}
agreed=no
wait_until agreeing && agreed=yes
check "/metrics agrees with calibctl status (messages, pairs, rejections by reason, params version, join, loop, scores)
$(cat "$work/agree.out")" '[ $agreed = yes ]'
grep -c '^calibd_' "$work/metrics.txt" | sed 's/^/# samples on \/metrics: /'
check "no sample is NaN or infinite: a series without data is absent
$(grep -E ' (NaN|[+-]?Inf)$' "$work/metrics.txt" | head -3)" \
    '! grep -qE " (NaN|[+-]?Inf)$" "$work/metrics.txt"'
check "a model without pairs has its counters but no score or ECE series" \
    'grep -q "^calibd_scored_total{model=\"idle\"} 0$" "$work/metrics.txt" &&
     ! grep -qE "^calibd_(score_mean|score_ci_low|ece)\{model=\"idle\"" "$work/metrics.txt"'
version=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$work/s.json")
check "calibd_build_info carries the version status reports ($version)" \
    'grep -qx "calibd_build_info{version=\"$version\"} 1" "$work/metrics.txt"'
# status's uptime is its wall clock less the start: the clock read around
# the request brackets it, however slow the machine
check "calibd_start_time_seconds is the start: now - uptime, now read around a status request" \
    'python3 - "$CALIBCTL" "$CONTROL" "$work/metrics.txt" <<PY
import json, subprocess, sys, time
t = [float(l.split()[1]) for l in open(sys.argv[3]) if l.startswith("calibd_start_time_seconds ")]
t0 = time.time()
r = json.loads(subprocess.run([sys.argv[1], "status", "--control", sys.argv[2]],
                              capture_output=True, check=True).stdout)
t1 = time.time()
u = r["uptime"]
print("# start %r, status between %r and %r less uptime %r" % (t, t0, t1, u))
sys.exit(0 if len(t) == 1 and t0 - u - 0.01 <= t[0] <= t1 - u + 0.01 else 1)
PY'

if command -v promtool > /dev/null; then
    promtool check metrics < "$work/metrics.txt" > "$work/promtool.out" 2>&1
    rc=$?
    check "promtool check metrics: the exposition format, no lint problem (exit $rc)
$(cat "$work/promtool.out")" '[ $rc -eq 0 ] && [ ! -s "$work/promtool.out" ]'
else
    bad "promtool check metrics: promtool is not installed (scripts/deps.sh installs prometheus)"
fi
check "the content type is the text format 0.0.4" \
    'curl -sS -o /dev/null -w "%{content_type}" "$HTTP" | grep -q "^text/plain; version=0.0.4"'
check "GET of another path is 404" '[ "$(curl -sS -o /dev/null -w "%{http_code}" "${HTTP%/metrics}/nosuch")" = 404 ]'
base=${HTTP%/metrics}
check "GET / is the page: 200, HTML, a policy that loads nothing from elsewhere" \
    'curl -sS -D "$work/page.h" -o "$work/page.html" "$base/" &&
     grep -q "^HTTP/1.1 200" "$work/page.h" && grep -qi "^Content-Type: text/html" "$work/page.h" &&
     grep -qi "^Content-Security-Policy: default-src .self.;" "$work/page.h"'
check "GET /healthz is 200 while the loop ticks" \
    '[ "$(curl -sS -o /dev/null -w "%{http_code}" "$base/healthz")" = 200 ]'
# /status: the JSON of calibctl status, once the traffic is in (the same figures)
curl -sS "$base/status" > "$work/http-status.json"
status > "$work/ctl-status.json"
check "GET /status is the JSON of calibctl status (same models and figures)" \
    'python3 - "$work/http-status.json" "$work/ctl-status.json" <<PY
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
drop = lambda r: {k: v for k, v in r.items() if k != "uptime"}
sys.exit(0 if drop(a)["models"].keys() == drop(b)["models"].keys() and
         all(a["models"][m]["scored"] == b["models"][m]["scored"] and
             a["models"][m]["paired"] == b["models"][m]["paired"]
             for m in a["models"] if a["models"][m]["form"]) and a["messages"] == b["messages"] else 1)
PY'
# calibctl status --pretty: the same JSON, a member a line, for people
status --pretty m > "$work/pretty.json"
check "calibctl status --pretty: indented, the same JSON as one line" \
    'python3 - "$work/pretty.json" "$work/ctl-status.json" <<PY
import json, sys
text = open(sys.argv[1]).read()
a, b = json.loads(text), json.load(open(sys.argv[2]))
lines = text.splitlines()
m, n = a["models"]["m"], b["models"]["m"]
sys.exit(0 if len(lines) > 50 and lines[1].startswith("  \\"") and
         all(len(l) < 400 for l in lines) and
         m["scored"] == n["scored"] and m["raw"] == n["raw"] and m["params"] == n["params"] else 1)
PY'
# history: a point each history_step (0.2 s here) for each model with data
wait_until '[ "$(curl -sS "$base/history?model=m" | python3 -c "import json,sys; print(len(json.load(sys.stdin)[\"points\"]))")" -ge 3 ]'
curl -sS "$base/history?model=m" > "$work/hist.json"
check "GET /history?model=m: points of both views' window mean Brier with intervals
$(head -c 300 "$work/hist.json")" \
    'python3 - "$work/hist.json" "$work/ctl-status.json" <<PY
import json, sys
h, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
p = h["points"][-1]
w = r["models"]["m"]["window"]
ok = h["model"] == "m" and len(h["columns"]) == len(p) == 11 and p[7] == w["scored"] \
    and abs(p[1] - w["raw"]["brier"]["mean"]) < 1e-6 and p[2] < p[1] < p[3] \
    and h["columns"][8:] == ["estimated", "estimated_lo", "estimated_hi"] and p[9] <= p[8] <= p[10] \
    and all(a[0] < b[0] for a, b in zip(h["points"], h["points"][1:]))
sys.exit(0 if ok else 1)
PY'
check "GET /history of an unknown model is 404" \
    '[ "$(curl -sS -o /dev/null -w "%{http_code}" "$base/history?model=nosuch")" = 404 ]'
check "POST /metrics is 405" '[ "$(curl -sS -o /dev/null -w "%{http_code}" -X POST -d x=1 "$HTTP")" = 405 ]'

# two slow clients from 127.0.0.2 trickle a header each 0.2 s while
# 127.0.0.1 scrapes; http_timeout = 2 cuts them. A scrape proves the server
# free when it is answered before the slow clients saw their cut (an order,
# not a time: a server they held would answer only after it); a round with
# no scrape in that window proves nothing and is run again (3 at most).
before=$(awk '$1 == "calibd_http_timeouts_total" {print $2}' "$work/metrics.txt")
for round in 1 2 3; do
    "$PY" "$srcdir/tests/integ/slowloris.py" "$HTTP" --clients 2 --seconds 30 --interval 0.2 \
        --until-cut > "$work/slow.out" &
    slow=$!
    track "$slow"
    wait_until 'grep -q connected "$work/slow.out"' || bad "the slow clients connected"
    scrapes=0 during=0 failed_scrapes=0
    while kill -0 "$slow" 2> /dev/null && [ $scrapes -lt 30 ]; do
        code=$(curl -sS --max-time "$(scaled 10)" -o "$work/scrape.txt" -w '%{http_code}' "$HTTP")
        if [ "$code" = 200 ] && grep -q '^calibd_messages_total' "$work/scrape.txt"; then
            grep -q '^cut' "$work/slow.out" || during=$((during + 1))
        else
            failed_scrapes=$((failed_scrapes + 1))
        fi
        scrapes=$((scrapes + 1))
        sleep 0.05
    done
    wait "$slow"
    echo "# round $round, slow clients: $(tail -1 "$work/slow.out"); $scrapes scrapes from 127.0.0.1, $during while they held, $failed_scrapes failed"
    [ $during -ge 1 ] && break
done
check "scrapes answered while slow clients trickle" '[ $during -ge 1 ] && [ $failed_scrapes -eq 0 ]'
check "the slow clients are cut at http_timeout" 'grep -q "cut 2 of 2" "$work/slow.out"'
check "and counted in calibd_http_timeouts_total" \
    'wait_until "[ \"\$(metrics | awk '"'"'\$1 == \"calibd_http_timeouts_total\" {print \$2}'"'"')\" -ge $((before + 2 * round)) ]"'
npoints=$(curl -sS "$base/history?model=m" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["points"]))')
stop_calibd
check "sigterm_exit_0" '[ $? -eq 0 ]'

# the history survives a restart: saved at exit, loaded at start
check "the history is saved in the state directory at exit" '[ -s "$work/state/history" ]'
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0
base=${HTTP%/metrics}
check "after a restart, /history?model=m still has the $npoints points of the last run" \
    '[ "$(curl -sS "$base/history?model=m" | python3 -c "import json,sys; print(len(json.load(sys.stdin)[\"points\"]))")" -ge "$npoints" ]'
stop_calibd

# a history file that is not one is moved aside, with one line, and calibd starts
printf '\x85garbage' > "$work/state/history"
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0
check "a corrupt history file is moved aside to history.bad and calibd starts without it
$(grep history "$work/calibd.log")" \
    '[ -s "$work/state/history.bad" ] && [ "$(grep -c "history: .*moved aside" "$work/calibd.log")" = 1 ]'
stop_calibd
finish
