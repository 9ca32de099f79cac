#!/usr/bin/env bash
# examples.sh — the shipped operations files hold together: the Prometheus
# rule files and configuration pass promtool's checks and the rules' unit
# tests; the Grafana dashboard is JSON whose every query panel has queries,
# each valid PromQL; every calibd_* metric name the rule files and the
# dashboard use is one a live calibd exports; examples/calibd.conf uses
# only known keys, with its commented defaults accepted too, and calibd
# starts with it; the systemd unit has no unknown directive.
. "$(dirname "$0")/lib.sh"
: "${srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
command -v promtool > /dev/null ||
    skip_all "promtool is not installed (scripts/deps.sh installs prometheus)"
ex="$srcdir/examples"
prom="$ex/prometheus"
dash="$ex/grafana/calibd.json"

# ------------------------------------------------------------ Prometheus
# promtool resolves rule files relative to the file that names them: run
# each command from examples/prometheus
in_prom() { (cd "$prom" && "$@") > "$work/promtool.out" 2>&1; }
in_prom promtool check rules calibd.rules.yml calibd.alerts.yml
rc=$?
check "promtool check rules: calibd.rules.yml and calibd.alerts.yml (exit $rc)
$(cat "$work/promtool.out")" '[ $rc -eq 0 ]'
in_prom promtool test rules calibd.rules_test.yml
rc=$?
check "promtool test rules calibd.rules_test.yml: pooled means, DSS, ECE, reliability, alerts (exit $rc)
$(cat "$work/promtool.out")" '[ $rc -eq 0 ]'
in_prom promtool check config prometheus.yml
rc=$?
check "promtool check config prometheus.yml, its two rule files loaded (exit $rc)
$(cat "$work/promtool.out")" '[ $rc -eq 0 ] && grep -q "2 rule files found" "$work/promtool.out"'

# ------------------------------------------------------------ Grafana
# every panel that queries (all but text panels and rows) has targets,
# each with a non-empty expr; panels nested in collapsed rows count too.
# Writes the exprs, one a line, to $work/dash.exprs.
python3 - "$dash" "$work/dash.exprs" > "$work/dash.out" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
wrong, exprs = [], []
def panels(ps):
    for p in ps:
        yield p
        yield from panels(p.get("panels", []))
ps = list(panels(d.get("panels", [])))
if not ps:
    wrong.append("no panels")
for p in ps:
    if p.get("type") in ("row", "text"):
        continue  # no queries by nature
    t = p.get("targets") or []
    if not t:
        wrong.append(f"panel {p.get('id')} '{p.get('title')}' has no targets")
    for x in t:
        e = (x.get("expr") or "").strip()
        if not e:
            wrong.append(f"panel {p.get('id')} '{p.get('title')}' target {x.get('refId')}: empty expr")
        exprs.append(" ".join(e.split()))
var = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
if d.get("schemaVersion") != 39:
    wrong.append(f"schemaVersion {d.get('schemaVersion')}, not 39")
if var.get("DS_PROMETHEUS", {}).get("type") != "datasource" or var["DS_PROMETHEUS"].get("query") != "prometheus":
    wrong.append("no datasource variable DS_PROMETHEUS of type prometheus")
q = var.get("model", {}).get("query")
if "label_values(calibd_scored_total, model)" not in (q.get("query") if isinstance(q, dict) else q or ""):
    wrong.append("no variable model from label_values(calibd_scored_total, model)")
open(sys.argv[2], "w").write("\n".join(exprs) + "\n")
print("\n".join(wrong) or f"{len(ps)} panels, {len(exprs)} queries")
sys.exit(1 if wrong else 0)
PY
rc=$?
check "the dashboard: every query panel has targets with an expr; the model and data source variables
$(cat "$work/dash.out")" '[ $rc -eq 0 ]'

# the dashboard's queries are valid PromQL: promtool parses them as
# recording rules, Grafana's $__rate_interval and $model replaced
{
    echo "groups:"
    echo "  - name: dashboard"
    echo "    rules:"
    n=0
    while IFS= read -r e; do
        [ -n "$e" ] || continue
        n=$((n + 1))
        e=${e//\$__rate_interval/5m}
        e=${e//\$model/.*}
        printf '      - record: dashboard:query%d\n        expr: %s\n' "$n" \
            "$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$e")"
    done < "$work/dash.exprs"
} > "$work/dash.rules.yml"
promtool check rules "$work/dash.rules.yml" > "$work/promtool.out" 2>&1
rc=$?
check "the dashboard's $n queries parse as PromQL (exit $rc)
$(cat "$work/promtool.out")" '[ $rc -eq 0 ] && [ $n -gt 0 ]'

# ------------------------------------------------------------ metric names
# every calibd_* name in the rule files (their lines that are not
# comments: expressions, and the metrics annotations point to) and in the
# dashboard's queries; recording rules (calibd:...) and up are not calibd's
{
    grep -hv '^[[:space:]]*#' "$prom/calibd.rules.yml" "$prom/calibd.alerts.yml"
    cat "$work/dash.exprs"
} | grep -oE '\bcalibd_[a-z0-9_]+' | sort -u > "$work/names"
check "the rule files and the dashboard name calibd metrics ($(wc -l < "$work/names"))" \
    '[ "$(wc -l < "$work/names")" -ge 20 ]'

# Gauges that exist only in some states: with no sample now, their
# "# TYPE" line (calibd declares every family in every scrape) shows the
# name is calibd's.
#  - calibd_shadow_*: only while a candidate is in its shadow run, which a
#    short test cannot hold open.
# Everything else must have a sample. Some need a state this test sets up:
#  - calibd_params_value: only for a model with a shape whose method
#    applies (before any publish, the identity: version 0, T = 1); model m
#    has its form and K configured, so it has parameters from the start;
#  - calibd_drift_log_e: not while the reference is measured;
#    drift_reference = 100 (the least) is passed within the pairs sent;
#  - calibd_rejected_total: only reasons that occurred; a producer that
#    sends K = 5 to the K = 3 model is rejected (shape_mismatch).
state_only='^calibd_shadow_(samples|log_e|improvement|improvement_ci_low|improvement_ci_high)$'

cat > "$work/live.conf" <<CONF
[daemon]
tick = 0.2
[model m]
form = logits
k = 3
drift_reference = 100
CONF
start_calibd -c "$work/live.conf" --http 127.0.0.1:0 --ingest-pull 'tcp://127.0.0.1:*'
metrics() { curl -sS --max-time "$(scaled 5)" "$HTTP"; }
# pairs with inline labels (each scored at once), pushed: nothing dropped
"$SIMULATE" --endpoint ">$PULL" --push --model m --k 3 --temperature 1.5 --seed 11 \
    --count 2000 --batch 50 --linger-ms "$LINGER_MS" 2> /dev/null || bad "the simulator sent its pairs"
"$SIMULATE" --endpoint ">$PULL" --push --model m --k 5 --seed 12 --count 10 --batch 10 \
    --linger-ms "$LINGER_MS" 2> /dev/null || bad "the simulator sent the rejected batch"

# missing: the names without what they need on /metrics (a sample, or for
# the state-only gauges at least their TYPE line); empty when none is
missing() {
    local n
    metrics > "$work/metrics.txt" || return 1
    while read -r n; do
        if grep -qE "^$n(\{| )" "$work/metrics.txt"; then
            continue
        elif [[ $n =~ $state_only ]] && grep -qx "# TYPE $n [a-z]*" "$work/metrics.txt"; then
            continue
        fi
        echo "$n"
    done < "$work/names"
}
all_there() { [ -z "$(missing)" ] && [ -s "$work/metrics.txt" ]; }
wait_until all_there 20
missing > "$work/missing"
check "every calibd metric the rule files and the dashboard use is exported once pairs are scored
$(sed 's/^/missing: /' "$work/missing")" '[ ! -s "$work/missing" ] && [ -s "$work/metrics.txt" ]'
grep -E "$state_only" "$work/names" | while read -r n; do
    grep -qE "^$n(\{| )" "$work/metrics.txt" && echo "# $n: sampled" || echo "# $n: declared only (no shadow run now)"
done
stop_calibd

# ------------------------------------------------------------ calibd.conf
# run_conf FILE LOG: calibd with FILE, the endpoints overridden to free
# loopback ports and its own state directory; sets calibd_pid, writes the
# endpoints to $work/conf-state/endpoints; 1 if it did not start
run_conf() {
    rm -rf "$work/conf-state"
    "$CALIBD" --config "$1" --state-dir "$work/conf-state" --ingest 'tcp://127.0.0.1:*' \
        --ingest-pull 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
        --control 'tcp://127.0.0.1:*' --http 127.0.0.1:0 2> "$2" &
    calibd_pid=$!
    wait_until "[ -s '$work/conf-state/endpoints' ] || ! kill -0 $calibd_pid 2> /dev/null" &&
        [ -s "$work/conf-state/endpoints" ] && kill -0 "$calibd_pid" 2> /dev/null
}
run_conf "$ex/calibd.conf" "$work/conf.log"
rc=$?
check "calibd starts with examples/calibd.conf (ports overridden)
$(sed 's/^/log: /' "$work/conf.log")" '[ $rc -eq 0 ]'
CONTROL=$(awk '$1 == "control" {print $2; exit}' "$work/conf-state/endpoints" 2> /dev/null)
shape=$(status classifier --timeout 5 2> /dev/null |
        python3 -c 'import json, sys; m = json.load(sys.stdin)["models"]["classifier"]; print(m["form"], m["k"])')
check "the example's [model classifier] is created from the file: $shape" '[ "$shape" = "logits 10" ]'
check "calibd warns about no key or section of examples/calibd.conf" '! grep -qi "unknown" "$work/conf.log"'
stop_calibd

# the commented keys' defaults are values calibd accepts: uncommented, the
# file still loads without a warning
sed -E 's/^# ([a-z_]+ = )/\1/' "$ex/calibd.conf" > "$work/defaults.conf"
nkeys=$(grep -cE '^# [a-z_]+ = ' "$ex/calibd.conf")
run_conf "$work/defaults.conf" "$work/defaults.log"
rc=$?
check "with its $nkeys commented defaults uncommented, examples/calibd.conf loads without a warning
$(grep -iE 'unknown|error|refus' "$work/defaults.log")" \
    '[ $rc -eq 0 ] && [ "$nkeys" -gt 0 ] && ! grep -qiE "unknown|error" "$work/defaults.log"'
stop_calibd

# every [daemon] key calibd knows (src/daemon/core/cfg.c: config_set_daemon's
# names and its table) appears in the example, set or commented
grep -oE '^    DK\("[a-z_]+"' "$srcdir/src/daemon/core/cfg.c" |
    grep -oE '"[a-z_]+"' | tr -d '"' | sort -u > "$work/daemon_keys"
# and [kafka]'s, commented out whole (uncommented, they need a broker)
kafka_missing=$(for k in brokers topics group state_dir; do
    grep -qE "^#$k = " "$ex/calibd.conf" || echo "$k"
done)
check "examples/calibd.conf shows the [kafka] section's keys, commented${kafka_missing:+: missing $kafka_missing}" \
    '[ -z "$kafka_missing" ] && grep -q "^#\[kafka\]$" "$ex/calibd.conf"'
undocumented=$(while read -r k; do
    grep -qE "^(# )?$k = " "$ex/calibd.conf" || echo "$k"
done < "$work/daemon_keys")
check "examples/calibd.conf shows every [daemon] key of cfg.c ($(wc -l < "$work/daemon_keys"))
${undocumented:+missing: $undocumented}" \
    '[ -z "$undocumented" ] && [ "$(wc -l < "$work/daemon_keys")" -ge 20 ]'

# ------------------------------------------------------------ systemd
# the unit as make install writes it (make check builds it from
# examples/calibd.service.in with this build's paths)
unit="${BUILDDIR:-.}/examples/calibd.service"
check "calibd.service is generated with this build's paths (no @var@ left)" \
    '[ -s "$unit" ] && grep -q "^ExecStart=/.*/calibd --config /.*/calibd/calibd.conf$" "$unit" &&
     ! grep -E "@(sbindir|sysconfdir)@" "$unit"'
if command -v systemd-analyze > /dev/null; then
    # a missing calibd binary or man page is expected on a build host;
    # an unknown directive or a value systemd cannot parse is not
    systemd-analyze verify "$unit" > "$work/unit.out" 2>&1
    check "systemd-analyze verify calibd.service: no unknown directive, no unparsable value
$(cat "$work/unit.out")" \
        '! grep -qiE "unknown (key|lvalue|section)|failed to parse|invalid" "$work/unit.out"'
else
    echo "# systemd-analyze is not installed: the unit is not verified"
fi
finish
