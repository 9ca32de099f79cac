#!/usr/bin/env bash
# curve.sh — CURVE on every socket. With curve_secret_key and allow-lists, a
# producer without a key pair, or with a key not allowed, gets nothing
# scored (its connection refused, counted and logged with its key and
# address), while an allowed one gets everything scored; calibctl answers
# only with an operator's key; a serving node (C and Python) without
# calibd's public key, or with a key not allowed, receives nothing, and an
# allowed one receives the parameters. SIGHUP reloads the allow-lists.
. "$(dirname "$0")/lib.sh"
SERVING=$(built examples/serving_node)
PYSERVING="$srcdir/examples/python/serving_node.py"

# ---------------------------------------------------------------- keys
mkdir -p "$work/keys" "$work/producers" "$work/operators" "$work/subscribers"
for name in calibd prod op node stranger; do
    "$CALIBCTL" keygen "$work/keys/$name" > /dev/null || bad "keygen $name"
done
check "keygen: the pair is private, the public key readable" \
    '[ "$(stat -c %a "$work/keys/calibd.key_secret")" = 600 ] && [ "$(stat -c %a "$work/keys/calibd.key")" = 644 ]'
check "keygen never overwrites a key" \
    '! "$CALIBCTL" keygen "$work/keys/calibd" 2> "$work/again.err" && grep -q "File exists" "$work/again.err"'
check "pyzmq reads calibctl's certificates" \
    '/usr/bin/python3 -c "import sys, zmq.auth; p, s = zmq.auth.load_certificate(sys.argv[1]); assert len(p) == 40 and len(s) == 40" "$work/keys/node.key_secret"'
cp "$work/keys/prod.key" "$work/producers/"
cp "$work/keys/op.key" "$work/operators/"
cp "$work/keys/node.key" "$work/subscribers/"
K="$work/keys"

# version 3 of model m, stored as a previous daemon would have left it:
# republished every second to whoever subscribes
mkdir -p "$work/state"
printf '# calibd\nversion 3\nmethod temperature\nts 1\nfit_n 10\nshadow_n 10\nparam T 1.5\n' \
    > "$work/state/model.m.params"
cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
params_interval = 1
curve_secret_key = $K/calibd.key_secret
curve_producers = $work/producers
curve_operators = $work/operators
curve_subscribers = $work/subscribers
[model m]
form = logits
k = 10
EOF2

# calibctl (start_calibd's ping included) as the operator
export CALIBD_KEY="$K/op.key_secret" CALIBD_SERVER_KEY="$K/calibd.key"
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0 --log-level info
# metric FAMILY [k=v,k=v]: the sample's value, 0 when absent
metric() {
    local key=$1
    [ -n "${2:-}" ] && key="$1{$(sed -E 's/([a-z_]+)=([^,]*)/\1="\2"/g' <<< "$2")}"
    curl -sS --max-time "$(scaled 5)" "$HTTP" | awk -v k="$key" '$1 == k { v = $2 } END { print v + 0 }'
}
# metric_ge FAMILY LABELS N: the sample has reached N
metric_ge() { [ "$(metric "$1" "$2")" -ge "$3" ]; }
check "the operator's key is answered" '"$CALIBCTL" ping --control "$CONTROL" --timeout "$(scaled 5)" > /dev/null'
check "no key: no answer" \
    '! env -u CALIBD_KEY -u CALIBD_SERVER_KEY "$CALIBCTL" ping --control "$CONTROL" --timeout 2 > /dev/null 2>&1'
check "a key not allowed: no answer" \
    '! "$CALIBCTL" ping --control "$CONTROL" --timeout 2 --key "$K/stranger.key_secret" > /dev/null 2>&1'
check "the operator refused is counted" \
    'wait_until "metric_ge calibd_curve_clients_total role=operators,result=refused 1"'
# the wait for an answer from the environment (CALIBD_TIMEOUT), as the keys
# are; --timeout overrides it; a bad value is refused, named
env CALIBD_TIMEOUT=0.3 "$CALIBCTL" ping --control "$CONTROL" --key "$K/stranger.key_secret" 2> "$work/t1.err"
env CALIBD_TIMEOUT=0.3 "$CALIBCTL" ping --control "$CONTROL" --key "$K/stranger.key_secret" --timeout 0.4 2> "$work/t2.err"
env CALIBD_TIMEOUT=soon "$CALIBCTL" ping --control "$CONTROL" 2> "$work/t3.err"
rc=$?
check "CALIBD_TIMEOUT sets calibctl's wait, --timeout overrides it, a bad one is refused" \
    'grep -q "no answer from calibd within 300 ms" "$work/t1.err" &&
     grep -q "no answer from calibd within 400 ms" "$work/t2.err" &&
     [ $rc -eq 2 ] && grep -q "CALIBD_TIMEOUT: expected seconds in (0, 86400\]" "$work/t3.err"'

# ---------------------------------------------------------------- producers
sim() { "$SIMULATE" --endpoint ">$INGEST" --model m --linger-ms "$LINGER_MS" "$@"; }
# refused: a producer that ZeroMQ keeps trying to connect until calibd has
# counted its handshake (a short-lived one may exit before it ever shakes)
refused_sim() {
    (exec "$SIMULATE" --endpoint ">$INGEST" --model m --linger-ms 0 --count 0 --rate 100 "$@" \
        2> /dev/null) &
    refused_pid=$!
    track $refused_pid
}
refused_sim --seed 1
check "a producer without CURVE fails its handshake, counted" \
    'wait_until "metric_ge calibd_socket_handshake_failures_total socket=ingest 1"'
kill $refused_pid
refused_sim --seed 2 --key "$K/stranger.key_secret" --server-key "$K/calibd.key"
check "a producer whose key is not allowed is refused, counted" \
    'wait_until "metric_ge calibd_curve_clients_total role=producers,result=refused 1"'
kill $refused_pid
stranger=$(awk -F'"' '/public-key/ {print $2}' "$K/stranger.key")
check "the refusal is logged with the key and the peer's address" \
    'grep -F "producers: refused key $stranger from 127.0.0.1" "$work/calibd.log"'
sim --count 300 --seed 3 --key "$K/prod.key_secret" --server-key "$K/calibd.key" 2> /dev/null
check "an allowed producer: everything scored, nothing of the others" \
    'wait_for "$work/s1.json" "r[\"models\"][\"m\"][\"scored\"] == 300"'
check "the allowed producer was admitted" \
    'wait_until "metric_ge calibd_curve_clients_total role=producers,result=accepted 1"'

# ---------------------------------------------------------------- serving nodes
check "a C serving node with an allowed key receives version 3" \
    '"$SERVING" --connect "$PUBLISH" --model m --until-version 3 --timeout "$(scaled 10)" --key "$K/node.key_secret" --server-key "$K/calibd.key" | grep -q "^m 3 temperature T=1.5"'
check "a Python serving node with an allowed key receives version 3" \
    '/usr/bin/python3 "$PYSERVING" --connect "$PUBLISH" --model m --until-version 3 --timeout "$(scaled 10)" --key "$K/node.key_secret" --server-key "$K/calibd.key" | grep -q "^m 3 temperature T=1.5"'
check "a serving node without calibd's key receives nothing" \
    '"$SERVING" --connect "$PUBLISH" --model m --until-version 3 --timeout 3 > "$work/none.out"; [ $? -eq 1 ] && [ ! -s "$work/none.out" ]'
check "... and its handshake failure is counted" \
    'wait_until "metric_ge calibd_socket_handshake_failures_total socket=publish 1"'
check "a serving node whose key is not allowed receives nothing" \
    '"$SERVING" --connect "$PUBLISH" --model m --until-version 3 --timeout 3 --key "$K/stranger.key_secret" --server-key "$K/calibd.key" > "$work/str.out"; [ $? -eq 1 ] && [ ! -s "$work/str.out" ]'
check "... refused and counted" \
    'wait_until "metric_ge calibd_curve_clients_total role=subscribers,result=refused 1"'
check "a serving node with another server key receives nothing" \
    '"$SERVING" --connect "$PUBLISH" --model m --until-version 3 --timeout 3 --key "$K/node.key_secret" --server-key "$K/stranger.key" > "$work/other.out"; [ $? -eq 1 ] && [ ! -s "$work/other.out" ]'

# ---------------------------------------------------------------- reload
cp "$K/stranger.key" "$work/producers/"
kill -HUP "$calibd_pid"
check "SIGHUP reloads the allow-lists" 'wait_until "log_has \"allow-lists reloaded: 2 producer\""'
sim --count 200 --seed 4 --key "$K/stranger.key_secret" --server-key "$K/calibd.key" 2> /dev/null
check "a producer allowed by the reload is scored" \
    'wait_for "$work/s2.json" "r[\"models\"][\"m\"][\"scored\"] == 500"'
# its key removed, and a half-copied key file beside: the bad file is
# skipped, named, and the removed key is revoked all the same
rm "$work/producers/stranger.key"
printf 'curve\n    public-key = "trunc' > "$work/producers/half.key"
kill -HUP "$calibd_pid"
check "a reload with a malformed key file skips it, named" \
    'wait_until "log_has \"allow-lists reloaded: 1 producer\"" && log_has "half.key" && log_has "skipped, its key is not allowed"'
before=$(metric calibd_curve_clients_total role=producers,result=refused)
refused_sim --seed 5 --key "$K/stranger.key_secret" --server-key "$K/calibd.key"
check "... and the key removed from the directory is refused" \
    'wait_until "metric_ge calibd_curve_clients_total role=producers,result=refused $((before + 1))"'
kill $refused_pid
check "nothing of the revoked producer is scored" \
    'wait_for "$work/s3.json" "r[\"models\"][\"m\"][\"scored\"] == 500"'
check "calibd stops cleanly" "stop_calibd"

# ---------------------------------------------------------------- refusals at start
printf '[daemon]\ncurve_secret_key = %s\ncurve_producers = any\n' "$K/calibd.key_secret" \
    > "$work/half.conf"
"$CALIBD" -c "$work/half.conf" --state-dir "$work/state" --http off --ingest 'tcp://127.0.0.1:*' \
    --ingest-pull 'tcp://127.0.0.1:*' \
    --publish 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' 2> "$work/half.log"
rc=$?
check "a role left unset stops the start, named" \
    '[ $rc -ne 0 ] && grep -q "curve_operators is not" "$work/half.log"'
finish
