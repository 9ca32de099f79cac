#!/usr/bin/env bash
# https.sh — calibd's HTTP server over TLS, with authentication: a
# self-signed certificate made here with openssl, a bearer token and a
# basic-auth file. curl with --cacert speaks https to it, plain http to
# the TLS port gets no HTTP answer; /status, the page, /healthz and
# /history need the token or a user:password (without, or with wrong
# ones: 401 with a Bearer and a Basic challenge, counted by reason in
# calibd_http_unauthorized_total, logged with the peer's address and
# without the secrets); /metrics is open with http_auth_metrics = no and
# needs the same credentials with yes. A key that does not match the
# certificate, and a certificate file that holds none, refuse the start
# saying why.
. "$(dirname "$0")/lib.sh"
command -v openssl > /dev/null || skip_all "no openssl (scripts/deps.sh installs it)"
command -v curl > /dev/null || skip_all "no curl"

# a self-signed certificate for 127.0.0.1 (EC P-256: made at once)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2> "$work/openssl.log" || {
    sed 's/^/# /' "$work/openssl.log"
    echo "Bail out! openssl could not make a certificate"
    exit 1
}
openssl rand -hex 32 > "$work/token"
printf '# who may look\nalice:s3cret:x\nbob:hunter2hunter2\n' > "$work/users"
chmod 600 "$work/key.pem" "$work/token" "$work/users"
token=$(cat "$work/token")

# conf FILE yes|no: TLS, the token and the users, http_auth_metrics as said
conf() {
    cat > "$1" <<CONF
[daemon]
tick = 0.2
http_tls_cert = $work/cert.pem
http_tls_key = $work/key.pem
http_auth_token_file = $work/token
http_auth_basic_file = $work/users
http_auth_metrics = $2
CONF
}

# get PATH [CURL ARGS...]: GET PATH over TLS, trusting the certificate
# made above; prints the status code (000: no HTTP answer), leaves the
# body and the headers in $work/body and $work/headers
get() {
    local path=$1
    shift
    curl -sS -o "$work/body" -D "$work/headers" -w '%{http_code}' --max-time "$(scaled 5)" \
        --cacert "$work/cert.pem" "$@" "$base$path" 2> "$work/curl.err"
}
# challenged: the last answer carries both challenges
challenged() {
    grep -q '^WWW-Authenticate: Bearer realm="calibd"' "$work/headers" &&
        grep -q '^WWW-Authenticate: Basic realm="calibd"' "$work/headers"
}
# unauthorized REASON: calibd_http_unauthorized_total{reason=REASON} now
unauthorized() {
    get /metrics -H "Authorization: Bearer $token" > /dev/null
    awk -v s="calibd_http_unauthorized_total{reason=\"$1\"}" '$1 == s {print $2}' "$work/body"
}

# ------------------------------------------------------------ http_auth_metrics = no
conf "$work/open.conf" no
start_calibd -c "$work/open.conf" --http 127.0.0.1:0
base=${HTTP%/metrics}
check "the endpoints file has the https URL ($base)" '[[ "$base" == https://127.0.0.1:* ]]'
wait_until '[ "$(get /metrics)" = 200 ]'
code=$(get /metrics)
check "https with --cacert: GET /metrics is 200 without credentials (http_auth_metrics = no)
$(cat "$work/curl.err")" '[ "$code" = 200 ] && grep -q "^calibd_build_info{" "$work/body"'
check "calibd_http_unauthorized_total is 0 for both reasons before any refusal" \
    '[ "$(unauthorized missing)" = 0 ] && [ "$(unauthorized wrong)" = 0 ]'

code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time "$(scaled 5)" "${base/https:/http:}/metrics" \
    2> "$work/plain.err")
rc=$?
check "plain http to the TLS port gets no HTTP answer (curl exit $rc: $(head -1 "$work/plain.err"))" \
    '[ $rc -ne 0 ] && [ "$code" = 000 ]'
curl -sS -o /dev/null --max-time "$(scaled 5)" "$base/metrics" 2> /dev/null
rc=$?
check "without --cacert curl does not trust the certificate (curl exit $rc)" '[ $rc -ne 0 ]'

# without credentials: 401, challenged, counted, logged
code=$(get /status)
check "GET /status without credentials is 401 with a Bearer and a Basic challenge
$(tr -d '\r' < "$work/headers")" '[ "$code" = 401 ] && challenged && ! grep -q models "$work/body"'
for path in / /healthz "/history?model=m"; do
    code=$(get "$path")
    check "GET $path without credentials is 401" '[ "$code" = 401 ]'
done
wait_until '[ "$(unauthorized missing)" = 4 ]'
check "the 4 requests without credentials are counted (reason=\"missing\": $(unauthorized missing))" \
    '[ "$(unauthorized missing)" = 4 ] && [ "$(unauthorized wrong)" = 0 ]'
wait_until 'log_has "unauthorized: GET /status from 127.0.0.1: no credentials"'
check "the log says which request, from which address, and why
$(grep unauthorized "$work/calibd.log" | head -4)" \
    'log_has "unauthorized: GET /status from 127.0.0.1: no credentials"'

# the right credentials
code=$(get /status -H "Authorization: Bearer $token")
check "GET /status with the bearer token is 200 with the status" \
    '[ "$code" = 200 ] && [ "$(json_get "$work/body" "r[\"ok\"]")" = True ]'
code=$(get /status -u 'alice:s3cret:x')
check "GET /status as alice (a password with a colon) is 200" '[ "$code" = 200 ]'
code=$(get / -u 'bob:hunter2hunter2')
check "GET / (the page) as bob is 200, HTML" '[ "$code" = 200 ] && grep -q "<html" "$work/body"'
code=$(get /healthz -H "Authorization: bearer $token")
check "GET /healthz with the token (scheme in lower case) is 200" '[ "$code" = 200 ]'

# wrong ones: 401, counted as wrong, logged
code=$(get /status -H "Authorization: Bearer ${token}0")
check "GET /status with a wrong token is 401 (invalid_token)" \
    '[ "$code" = 401 ] && challenged && grep -q "error=\"invalid_token\"" "$work/headers"'
code=$(get /status -u 'alice:hunter2hunter2')
check "GET /status with alice and bob's password is 401" '[ "$code" = 401 ] && challenged'
code=$(get /status -u 'mallory:s3cret:x')
check "GET /status as an unknown user is 401" '[ "$code" = 401 ]'
wait_until '[ "$(unauthorized wrong)" = 3 ]'
check "the 3 wrong credentials are counted (reason=\"wrong\": $(unauthorized wrong)), the missing stay 4" \
    '[ "$(unauthorized wrong)" = 3 ] && [ "$(unauthorized missing)" = 4 ]'
wait_until 'log_has "unauthorized: GET /status from 127.0.0.1: wrong credentials"'
check "wrong credentials are logged as such, and no secret is in the log" \
    'log_has "unauthorized: GET /status from 127.0.0.1: wrong credentials" &&
     ! grep -qF -e "$token" -e s3cret -e hunter2 -e mallory "$work/calibd.log"'
stop_calibd

# ------------------------------------------------------------ http_auth_metrics = yes
conf "$work/closed.conf" yes
start_calibd -c "$work/closed.conf" --http 127.0.0.1:0
base=${HTTP%/metrics}
wait_until '[ "$(get /metrics -H "Authorization: Bearer $token")" = 200 ]'
code=$(get /metrics)
check "with http_auth_metrics = yes, GET /metrics without credentials is 401" \
    '[ "$code" = 401 ] && challenged && ! grep -q calibd_ "$work/body"'
code=$(get /metrics -H "Authorization: Bearer $token")
check "... and 200 with the token" '[ "$code" = 200 ] && grep -q "^calibd_build_info{" "$work/body"'
code=$(get /metrics -u 'bob:hunter2hunter2')
check "... and 200 as bob" '[ "$code" = 200 ]'
code=$(get /metrics -u 'bob:wrong')
check "... and 401 with a wrong password" '[ "$code" = 401 ]'
stop_calibd

# ------------------------------------------------------------ refused starts
# refused CONF: calibd started with CONF exits at once, not 0 (and not
# timeout's 124); its log in $work/refused.log
refused() {
    timeout "$(scaled 20)" "$CALIBD" -c "$1" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
        --control 'tcp://127.0.0.1:*' --http 127.0.0.1:0 --state-dir "$work/refused" \
        2> "$work/refused.log"
    local rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ]
}
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/other.pem" 2> /dev/null
chmod 600 "$work/other.pem"
sed "s|^http_tls_key = .*|http_tls_key = $work/other.pem|" "$work/open.conf" > "$work/mismatch.conf"
refused "$work/mismatch.conf"
rc=$?
check "a key that is not the certificate's refuses the start, with GnuTLS's reason
$(grep error "$work/refused.log")" \
    '[ $rc -eq 0 ] && grep -q "http: cannot serve TLS on 127.0.0.1:0: .*do not match" "$work/refused.log"'
sed "s|^http_tls_cert = .*|http_tls_cert = $work/token|" "$work/open.conf" > "$work/nocert.conf"
refused "$work/nocert.conf"
rc=$?
check "a certificate file without a certificate refuses the start, naming the key and the file
$(grep error "$work/refused.log")" \
    '[ $rc -eq 0 ] && grep -qF "http: http_tls_cert $work/token: no PEM certificate" "$work/refused.log"'
finish
