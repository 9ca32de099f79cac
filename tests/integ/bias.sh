#!/usr/bin/env bash
# bias.sh — a biased regression model is seen and fixed, on the loop's
# defaults (issue 40). Model "biased" says N(mean, 1) while its outcomes
# are N(mean + 0.5, 1) from its first pair: the miscalibration trigger's
# challenger, a location-scale fit (method auto for regression), must
# reject, and the version published must move the mean by 0.5 and leave
# the spread, so that its calibrated DSS is the true law's (1) within
# 0.02 over 50,000 pairs. Model "drifts" is unbiased for 20,000 pairs and
# then biased by -0.5 (its trigger off): the drift detector's location
# test on the side below must alarm, and the drift's refit publish a near
# -0.5. Model "shift" (fit_params = a) is biased as "biased" is: its
# version moves the mean alone, b and c held at 1. Variance scaling, the
# default before, fixed none of them.
. "$(dirname "$0")/lib.sh"

cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
[defaults]
form = gaussian
[model drifts]
miscal_trigger = no
[model shift]
fit_params = a
EOF2
start_calibd -c "$work/calibd.conf" --log-level info
sim() {
    exec "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --batch 50 --rate 4000 \
        --form gaussian --model "$1" --seed "$2" --count 0 "${@:3}" 2> /dev/null
}
sim biased 1 --bias 0.5 &
biased=$!
sim drifts 2 --bias-after -0.5 --switch-after 20000 &
drifts=$!
sim shift 3 --bias 0.5 &
shift_pid=$!
track "$biased" "$drifts" "$shift_pid"

m() { echo "r['models']['$1']"; }
# fit_ok FILE MODEL A: the published version is location_scale with a
# within 4 standard errors of A and b, c of 1, for the n samples its refit
# took (the refit's event says; se 1/sqrt(n) for a and b with mean and
# outcome of unit variance, sqrt(2/n) for c)
fit_ok() {
    json_get "$1" "(lambda m: (lambda p, n: p['method'] == 'location_scale' and abs(p['values']['a'] - $3) < 4 / n ** 0.5 and abs(p['values']['b'] - 1) < 4 / n ** 0.5 and abs(p['values']['c'] - 1) < 4 * (2 / n) ** 0.5)(m['params'], int(__import__('re').search(r'on the (\\d+) newest', [e['text'] for e in m['events'] if e['kind'] == 'refit'][0]).group(1))))(r['models']['$2'])"
}
check "biased: version 1 is location_scale, a near 0.5, b and c near 1 (4 standard errors)" \
    'wait_for "$work/b.json" "$(m biased)[\"params\"][\"version\"] >= 1" &&
     [ "$(fit_ok "$work/b.json" biased 0.5)" = True ]'
json_get "$work/b.json" "$(m biased)['params']['values'], [e['text'] for e in $(m biased)['events'] if e['kind'] == 'refit']" |
    sed 's/^/# biased: params, refits: /'
# the calibrated DSS of the pairs after the version: the true law's
# expected DSS is E[z^2] + ln 1 = 1; its standard error over 50,000 pairs
# is sqrt(2 / 50000) = 0.0063
check "biased: its calibrated DSS over 50,000 pairs after the publish is the true law's (1) within 0.02" \
    'wait_for "$work/b2.json" "$(m biased)[\"calibrated_since_params\"][\"dss\"][\"n\"] >= 50000" &&
     [ "$(json_get "$work/b2.json" "abs($(m biased)[\"calibrated_since_params\"][\"dss\"][\"mean\"] - 1) < 0.02")" = True ]'
json_get "$work/b2.json" "$(m biased)['calibrated_since_params']['dss'], $(m biased)['raw']['dss']['mean']" |
    sed 's/^/# biased: calibrated DSS since the version, raw DSS: /'
check "drifts: the location test alarms on the side below, and the drift's refit publishes a near -0.5" \
    'wait_for "$work/d.json" "$(m drifts)[\"params\"][\"version\"] >= 1" &&
     [ "$(json_get "$work/d.json" "$(m drifts)[\"loop\"][\"drift\"][\"alarms\"] == 1")" = True ] &&
     [ "$(fit_ok "$work/d.json" drifts -0.5)" = True ] &&
     json_get "$work/d.json" "[e[\"text\"] for e in $(m drifts)[\"events\"] if e[\"kind\"] == \"drift\"][0]" |
         grep -q "residual lay below"'
json_get "$work/d.json" "[e['text'] for e in $(m drifts)['events'] if e['kind'] == 'drift']" |
    sed 's/^/# drifts: /'
check "shift: fit_params = a: its version has b and c exactly 1, a near 0.5" \
    'wait_for "$work/s.json" "$(m shift)[\"params\"][\"version\"] >= 1" &&
     [ "$(json_get "$work/s.json" "(lambda v: v[\"b\"] == 1 and v[\"c\"] == 1)($(m shift)[\"params\"][\"values\"])")" = True ] &&
     [ "$(fit_ok "$work/s.json" shift 0.5)" = True ]'
kill "$biased" "$drifts" "$shift_pid" 2> /dev/null
wait "$biased" "$drifts" "$shift_pid"
check "calibd stops cleanly" "stop_calibd"
finish
