#!/usr/bin/env bash
# http_ingest.sh — protocol v1 messages over HTTP (http_ingest = yes):
# every output form, in JSON and in msgpack, rows and batches, labels later
# by id, posted to /v1/models/NAME/predictions and .../labels; calibd's
# figures must equal `calibctl score` on the same pairs (the poster writes
# them to a CSV), as ingest.sh checks the ZeroMQ sockets. Then what it
# refuses and how: 400 with the reason (and counted as the sockets count
# it), 413 past max_msg_size, 415 for another content type, 405 for GET,
# 401 without the producers' token, which opens nothing else.
. "$(dirname "$0")/lib.sh"

echo "producer-token-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" > "$work/producer.token"
echo "operator-token-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" > "$work/operator.token"
chmod 600 "$work/producer.token" "$work/operator.token"
cat > "$work/calibd.conf" <<EOF2
[daemon]
http_ingest = yes
http_ingest_token_file = $work/producer.token
http_auth_token_file = $work/operator.token
max_msg_size = 65536
EOF2
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0
base=${HTTP%/metrics}
ptok=$(cat "$work/producer.token") otok=$(cat "$work/operator.token")
export base ptok
status() { "$CALIBCTL" status --control "$CONTROL" "$@"; }

# post.py NAME FORM ENCODING: predictions then labels of 400 pairs, as
# batches of 50 and then rows; writes NAME.csv (calibctl score's columns)
cat > "$work/post.py" <<'PY'
import csv, json, math, os, random, sys, urllib.request
import msgpack
name, form, enc, out = sys.argv[1:5]
r = random.Random(len(name))
base, tok = os.environ["base"], os.environ["ptok"]
def post(kind, body):
    data = json.dumps(body).encode() if enc == "json" else msgpack.packb(body)
    req = urllib.request.Request(f"{base}/v1/models/{name}/{kind}", data=data, method="POST",
        headers={"Content-Type": "application/" + enc, "Authorization": "Bearer " + tok})
    with urllib.request.urlopen(req, timeout=60) as resp:
        got = json.load(resp)
    assert resp.status == 200 and got["ok"] and got["rejected"] == 0, got
K = 4
rows = []
for i in range(400):
    if form == "logits":
        x = [r.gauss(0, 2) for _ in range(K)]
        z = [math.exp(v - max(x)) for v in x]; q = [v / sum(z) for v in z]
        y = r.choices(range(K), weights=q)[0]; cols = {f"z{j}": x[j] for j in range(K)}
    elif form == "probs":
        z = [r.random() + 0.01 for _ in range(K)]; x = [v / sum(z) for v in z]
        y = r.choices(range(K), weights=x)[0]; cols = {f"p{j}": x[j] for j in range(K)}
    elif form == "binary":
        x = r.random(); y = int(r.random() < x); cols = {"p": x}
    else:
        x = (r.gauss(0, 1), r.uniform(0.5, 2)); y = r.gauss(x[0], math.sqrt(x[1]))
        cols = {"mean": x[0], "var": x[1]}
    rows.append((i, x, y, cols))
key = {"logits": "logits", "probs": "probs", "binary": "p"}.get(form)
def pred(batch):
    ids = [i for i, *_ in batch]
    if len(batch) == 1:
        i, x, _, _ = batch[0]
        m = {"v": 1, "type": "pred", "id": f"id-{i}"}
        if key: m[key] = x
        else: m["mean"], m["var"] = x
        return m
    m = {"v": 1, "type": "pred", "n": len(batch), "id": [f"id-{i}" for i in ids]}
    if key in ("logits", "probs"): m["k"] = K; m[key] = [x for _, x, _, _ in batch]
    elif key: m["p"] = [x for _, x, _, _ in batch]
    else: m["mean"] = [x[0] for _, x, _, _ in batch]; m["var"] = [x[1] for _, x, _, _ in batch]
    return m
for a in range(0, 300, 50):
    post("predictions", pred(rows[a:a + 50]))
for row in rows[300:]:
    post("predictions", pred([row]))
for a in range(0, 400, 100):
    post("labels", {"v": 1, "type": "label", "n": 100, "id": [f"id-{i}" for i, *_ in rows[a:a + 100]],
                    "y": [y for _, _, y, _ in rows[a:a + 100]]})
with open(out, "w", newline="") as f:
    w = csv.writer(f)
    head = list(rows[0][3]) + ["y"]
    w.writerow(head)
    for _, _, y, cols in rows:
        w.writerow([repr(cols[h]) for h in head[:-1]] + [y])
PY

for form in logits probs binary gaussian; do
    for enc in json msgpack; do
        name="${form}_$enc"
        if ! "$PY" "$work/post.py" "$name" "$form" "$enc" "$work/$name.csv" 2> "$work/$name.err"; then
            bad "$name: posted $(tail -n 3 "$work/$name.err")"
            continue
        fi
        wait_for "$work/$name.json" "r['models']['$name']['scored'] >= 400" ||
            { bad "$name: scored $(json_get "$work/$name.json" "r['models'].get('$name', {}).get('scored')")"; continue; }
        "$CALIBCTL" score "$work/$name.csv" > "$work/$name.ref" || { bad "$name: calibctl score"; continue; }
        check "$name: 400 pairs over HTTP, the figures of calibctl score on them" \
            '"$PY" - "$work/$name.json" "$work/$name.ref" "$name" <<'"'"'PY2'"'"'
import json, sys
m = json.load(open(sys.argv[1]))["models"][sys.argv[3]]
r = json.load(open(sys.argv[2]))
assert m["scored"] == r["n"] == 400 and not m["rejected"], (m["scored"], m["rejected"])
key = "dss" if r["form"] == "gaussian" else "brier"
a, b = m["raw"][key]["mean"], r[key]
assert abs(a - b) <= 1e-12 * max(1, abs(b)), (a, b)
if key == "brier":
    assert abs(m["raw"]["log"]["mean"] - r["log"]) <= 1e-12 * max(1, r["log"])
PY2'
    done
done

# what it refuses: code, the reason in the body, and the count
post() { # ENC PATH BODY|@FILE [TOKEN] -> "CODE BODY"
    local tok=${4-$ptok} auth=()
    [ -z "$tok" ] || auth=(-H "Authorization: Bearer $tok")
    curl -sS --max-time "$(scaled 10)" -o "$work/resp" -w '%{http_code}' -X POST \
        -H "Content-Type: application/$1" "${auth[@]}" --data-binary "$3" "$base$2"
    printf ' '; cat "$work/resp"
}
r=$(post json /v1/models/logits_json/predictions '{"v": 1, "type": "pred", "id": "x", "logits": [1, 2, 3]}')
check "a prediction of another K: 400 shape_mismatch ($r)" '[[ "$r" == 400\ *shape_mismatch* ]]'
r=$(post json /v1/models/logits_json/labels '{"v": 1, "type": "label", "id": "x"}')
check "a label without y: 400 missing_key, key y ($r)" '[[ "$r" == 400\ *missing_key*\"key\":\"y\"* ]]'
r=$(post json /v1/models/logits_json/labels '{"v": 1, "type": "label", "id": "x", "y": 1')
check "a body that is no JSON: 400 bad_json, with where ($r)" '[[ "$r" == 400\ *bad_json*column* ]]'
r=$(post json /v1/models/logits_json/predictions '{"v": 1, "type": "label", "id": "x", "y": 1}')
check "a label to the predictions route: 400 bad_type ($r)" '[[ "$r" == 400\ *bad_type* ]]'
r=$(post msgpack /v1/models/logits_json/labels 'not msgpack')
check "msgpack that is not: 400 ($r)" '[[ "$r" == 400\ *\"error\":* ]]'
status > "$work/rej.json"
check "each refusal counted on the model as the sockets count it" \
    '[ "$(json_get "$work/rej.json" "sorted(r[\"models\"][\"logits_json\"][\"rejected\"].items())")" = \
      "[('"'"'bad_json'"'"', 1), ('"'"'bad_type'"'"', 1), ('"'"'missing_key'"'"', 1), ('"'"'shape_mismatch'"'"', 1), ('"'"'trailing_bytes'"'"', 1)]" ]'
"$PY" -c 'import json; print(json.dumps({"v": 1, "type": "label", "n": 20000,
    "id": list(range(20000)), "y": [0] * 20000}))' > "$work/big.json"
r=$(post json /v1/models/logits_json/labels "@$work/big.json")
check "a body past max_msg_size: 413 ($r)" '[[ "$r" == 413\ *too_large* ]]'
r=$(post text /v1/models/logits_json/labels 'y=1')
check "another content type: 415 ($r)" '[[ "$r" == 415\ * ]]'
r=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ptok" "$base/v1/models/m/labels")
check "GET on an ingest route: 405 ($r)" '[ "$r" = 405 ]'
r=$(post json /v1/models/logits_json/labels '{"v": 1, "type": "label", "id": "x", "y": 1}' "")
check "no token: 401 ($r)" '[[ "$r" == 401\ * ]]'
r=$(post json /v1/models/logits_json/labels '{"v": 1, "type": "label", "id": "x", "y": 1}' "$otok")
check "the operators' token does not open ingest: 401 ($r)" '[[ "$r" == 401\ * ]]'
r=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ptok" "$base/status")
check "nor does the producers' open /status: 401 ($r)" '[ "$r" = 401 ]'
# /metrics is rendered by the loop's rounds: the next one counts them
refusals() {
    curl -sS -H "Authorization: Bearer $otok" "$base/metrics" > "$work/metrics" &&
        grep -q "^calibd_http_ingest_refused_total{reason=\"too_large\"} 1$" "$work/metrics" &&
        grep -q "^calibd_http_ingest_refused_total{reason=\"unsupported_media_type\"} 1$" \
            "$work/metrics"
}
check "the refusals before the loop in /metrics (too_large 1, unsupported 1)" \
    'wait_until refusals'
# 8 models of 6 batches, 100 rows and 4 label batches each, and the 5
# refused by the loop above
check "and the messages the loop answered: $((8 * 110 + 5))" \
    'grep -q "^calibd_http_ingest_messages_total $((8 * 110 + 5))$" "$work/metrics"'
check "calibd stops cleanly" stop_calibd

# Answers under queueing: 12 producers post 3 batches of 40,000 inline-
# labelled rows (about 1 MB of JSON) each at once, with http_timeout =
# 0.1 s, less than the queue takes. A message calibd takes is answered 200
# however long it waited; one it would answer too late is refused, 503
# with Retry-After (a connection may also be cut before its body was
# taken). Whatever the machine's speed: every message ingested is a 200,
# and the rows scored are exactly the 200s' rows.
cat > "$work/late.conf" <<EOF2
[daemon]
http_ingest = yes
http_timeout = 0.1
max_msg_size = 4194304
ingest_memory = 268435456
EOF2
start_calibd -c "$work/late.conf" --http 127.0.0.1:0
base=${HTTP%/metrics}
"$PY" - "$base" > "$work/late.out" <<'PY'
import http.client, json, random, sys, threading, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
rows = 40000
results = []
def post(i):
    r = random.Random(i)
    body = json.dumps({"v": 1, "type": "pred", "n": rows,
                       "p": [r.random() for _ in range(rows)],
                       "y": [r.randrange(2) for _ in range(rows)]}).encode()
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        c.request("POST", "/v1/models/late/predictions", body, {"Content-Type": "application/json"})
        a = c.getresponse()
        a.read()
        results.append((a.status, a.getheader("Retry-After")))
    except OSError as e:  # cut before its body was taken
        results.append(("cut", None))
threads = [threading.Thread(target=lambda t=t: [post(3 * t + k) for k in range(3)]) for t in range(12)]
for t in threads: t.start()
for t in threads: t.join()
ok = sum(s == 200 for s, _ in results)
late = [a for s, a in results if s == 503]
print("posted=%d ok=%d refused=%d cut=%d retry_after_ok=%d rows=%d" % (
    len(results), ok, len(late), sum(s == "cut" for s, _ in results),
    all(a is not None and int(a) >= 1 for a in late), ok * rows))
PY
echo "# $(cat "$work/late.out")"
late() { tr ' ' '\n' < "$work/late.out" | sed -n "s/^$1=//p"; }
check "every post answered or cut before calibd took it; 503s carry Retry-After" \
    '[ "$(late posted)" = 36 ] && [ "$(late retry_after_ok)" = 1 ]'
# (/metrics is rendered by the loop's rounds, each read under one lock:
# the count and the queue of one moment; the posters have all ended)
drained() {
    curl -sS "$HTTP" > "$work/late.prom" && grep -q "^calibd_http_ingest_queued_bytes 0$" "$work/late.prom" &&
        grep -q "^calibd_http_ingest_messages_total $(late ok)$" "$work/late.prom"
}
check "every message calibd took was answered 200 (the 200s: $(late ok))" 'wait_until drained'
check "the rows scored are the 200s' rows, none ingested unanswered" \
    'wait_for "$work/late.json" "r[\"models\"].get(\"late\", {}).get(\"scored\", 0) == $(late rows)"'
check "calibd stops cleanly after it" stop_calibd

# Bodies being read count against ingest_memory with the waiting ones: 40
# connections each send all but the last byte of a 1 MiB body and hold it.
# calibd keeps at most ingest_memory (4 MiB) of them and discards the rest
# of the others as it comes; once complete, the kept ones are answered 200,
# the others 503 busy with Retry-After. Before, each held its 1 MiB.
cat > "$work/read.conf" <<EOF2
[daemon]
http_ingest = yes
http_timeout = 60
max_msg_size = 1048576
ingest_memory = 4194304
http_max_per_address = 64
EOF2
start_calibd -c "$work/read.conf" --http 127.0.0.1:0
rss() { awk '/^VmRSS/ {print $2}' "/proc/$calibd_pid/status"; }
rss0=$(rss)
mkfifo "$work/go"
"$PY" - "${HTTP%/metrics}" "$work/go" > "$work/read.out" <<'PY' &
import socket, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
n, size = 40, (1 << 20) - 1
conns = []
for i in range(n):
    head = '{"v": 1, "type": "pred", "id": "r%d", "p": 0.25, "pad": "' % i
    body = (head + "x" * (size - len(head) - 2) + '"}').encode()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(b"POST /v1/models/read/predictions HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % size)
    s.sendall(body[:-1])
    conns.append((s, body[-1:]))
print("held %d" % n, flush=True)
open(sys.argv[2]).read()  # the checks of the held bodies are done
codes = {}
for s, last in conns:
    s.sendall(last)
    f = s.makefile("rb")
    status = int(f.readline().split()[1])
    retry = False
    while True:
        line = f.readline().strip()
        if not line:
            break
        retry |= line.lower().startswith(b"retry-after:")
    key = "%d%s" % (status, "+retry" if retry else "")
    codes[key] = codes.get(key, 0) + 1
    s.close()
print(" ".join("%s=%d" % kv for kv in sorted(codes.items())), flush=True)
PY
poster=$!
wait_until "grep -q '^held 40' '$work/read.out'"
# every byte sent is in calibd, kept or discarded, before the RSS is read
reading() { curl -sS "$HTTP" | awk '$1 == "calibd_http_ingest_reading_bytes" {print $2}'; }
received() { curl -sS "$HTTP" | awk '$1 == "calibd_http_ingest_received_bytes_total" {print $2}'; }
check "calibd received every byte sent ($(( 40 * ((1 << 20) - 2) )))" \
    'wait_until "[ \"\$(received)\" = $(( 40 * ((1 << 20) - 2) )) ]"'

rss1=$(rss)
peak=$(curl -sS "$HTTP" | awk '$1 == "calibd_http_ingest_reading_max_bytes" {print $2}')
check "40 bodies of 1 MiB held: at most ingest_memory of them kept ($peak bytes at most)" \
    '[ "$peak" -le 4194304 ]'
if [ "${CALIB_SANITIZERS:-no}" != yes ]; then # a sanitizer's shadow memory is no measure
    check "and the resident memory grew by less than ingest_memory and 8 MiB ($(( (rss1 - rss0) / 1024 )) MiB)" \
        '[ $(( rss1 - rss0 )) -lt $(( 4096 + 8192 )) ]'
fi
echo > "$work/go"
wait "$poster"
echo "# $(tail -n 1 "$work/read.out")"
codes() { tr ' ' '\n' < <(tail -n 1 "$work/read.out") | sed -n "s/^$1=//p"; }
# (/metrics is rendered by the loop's rounds: the next one counts them)
busy_counted() { curl -sS "$HTTP" | grep -F "calibd_http_ingest_refused_total{reason=\"busy\"} $(codes 503+retry)" > /dev/null; }
check "once complete, the kept ones answered 200, the others 503 with Retry-After, counted busy ($(tail -n 1 "$work/read.out"))" \
    '[ "$(( $(codes 200) + $(codes 503+retry) ))" = 40 ] && [ "$(codes 200)" -ge 1 ] && [ "$(codes 503+retry)" -ge 1 ] &&
     wait_until busy_counted'
post_one() {
    curl -sS -o /dev/null -w "%{http_code}" -H "Content-Type: application/json" \
        --data "{\"v\": 1, \"type\": \"pred\", \"id\": \"after\", \"p\": 0.5}" "${HTTP%/metrics}/v1/models/read/predictions"
}
check "nothing held after: the gauge back to 0 ($(reading)), a new post answered 200" \
    'wait_until "[ \"\$(reading)\" = 0 ]" && [ "$(post_one)" = 200 ]'
check "calibd stops cleanly after it" stop_calibd
finish
