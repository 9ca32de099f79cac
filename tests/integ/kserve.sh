#!/usr/bin/env bash
# kserve.sh — KServe's payload logger pointed at calibd, unchanged: the
# CloudEvents it sends replayed as it writes them (binary mode, the
# headers and bodies of kserve/pkg/logger's handler and worker with the
# CloudEvents SDK: a request event and a response event per inference,
# both with the inference's Ce-Id, the request's Content-Type), for the V1
# protocol ({"predictions": [[p...], ...]}) and V2 ({"outputs": [{"name",
# "shape", "datatype", "data"}]}), one row and batches; the labels then
# posted by those ids (Ce-Id, or Ce-Id/i). calibd's figures must equal
# `calibctl score` on the same pairs. Also: the canary endpoint as its own
# model, a V2 output chosen and read as logits by [model] kserve_output
# and kserve_form, events without a usable output counted and ignored, and
# one without KServe's headers refused.
. "$(dirname "$0")/lib.sh"

cat > "$work/calibd.conf" <<EOF2
[daemon]
http_ingest = yes
max_msg_size = 65536
[model iris-v2-logits]
kserve_output = logits
kserve_form = logits
EOF2
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0
base=${HTTP%/metrics}
export base

cat > "$work/replay.py" <<'PY'
"""replay.py NAME PROTOCOL ROWS ENDPOINT OUT: inferences of a K = 3
classifier as KServe's logger reports them, then their labels; the pairs
to OUT (calibctl score's columns)."""
import csv, json, math, os, random, sys, uuid, urllib.request
from datetime import datetime, timezone
name, proto, rows, endpoint, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
base = os.environ["base"]
r = random.Random(name + proto + str(rows))
def send(path, body, headers):
    req = urllib.request.Request(base + path, data=body, method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.status, json.load(resp)
def event(kind, ce_id, body):
    # cloudevents sdk-go, binary mode, as kserve/pkg/logger/worker.go sets it
    return send("/v1/cloudevents", body, {
        "Ce-Id": ce_id, "Ce-Specversion": "1.0",
        "Ce-Type": "org.kubeflow.serving.inference." + kind,
        "Ce-Source": "http://localhost:9081/",
        "Ce-Time": datetime.now(timezone.utc).isoformat(),
        "Ce-Inferenceservicename": name, "Ce-Namespace": "default",
        "Ce-Component": "predictor", "Ce-Endpoint": endpoint, "Ce-Metadata": "{}",
        # the logger copies the inference request's (curl -d sends this)
        "Content-Type": "application/x-www-form-urlencoded"})
logits = proto.endswith("logits")
pairs = []
for inference in range(40):
    ce_id = str(uuid.UUID(int=r.getrandbits(128)))
    x = [[r.gauss(0, 1) for _ in range(4)] for _ in range(rows)]
    z = [[r.gauss(0, 2) for _ in range(3)] for _ in range(rows)]
    p = [[math.exp(v - max(row)) / sum(math.exp(u - max(row)) for u in row) for v in row]
         for row in z]
    if proto == "v1":
        request = {"instances": x}
        response = {"predictions": p}
    else:
        request = {"inputs": [{"name": "input-0", "shape": [rows, 4], "datatype": "FP32",
                               "data": [v for row in x for v in row]}]}
        outputs = [{"name": "label", "shape": [rows], "datatype": "INT64",
                    "data": [max(range(3), key=row.__getitem__) for row in p]}]
        if logits:
            outputs.append({"name": "logits", "shape": [rows, 3], "datatype": "FP64",
                            "data": [v for row in z for v in row]})
        outputs.append({"name": "probabilities", "shape": [rows, 3], "datatype": "FP64",
                        "data": [v for row in p for v in row]})
        response = {"model_name": name, "model_version": "1", "id": ce_id,
                    "parameters": {}, "outputs": outputs}
    st, got = event("request", ce_id, json.dumps(request).encode())
    assert st == 200 and got.get("ignored") == "request", got
    st, got = event("response", ce_id, json.dumps(response).encode())
    assert st == 200 and got["ok"] and got["records"] == rows and got["rejected"] == 0, got
    for i in range(rows):
        y = r.choices(range(3), weights=p[i])[0]
        pairs.append((ce_id if rows == 1 else f"{ce_id}/{i}", z[i] if logits else p[i], y))
model = name + (":canary" if endpoint == "canary" else "")
for a in range(0, len(pairs), 50):
    part = pairs[a:a + 50]
    st, got = send(f"/v1/models/{model}/labels",
                   json.dumps({"v": 1, "type": "label", "n": len(part),
                               "id": [i for i, _, _ in part],
                               "y": [y for _, _, y in part]}).encode(),
                   {"Content-Type": "application/json"})
    assert st == 200 and got["rejected"] == 0, got
with open(out, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow([("z%d" if logits else "p%d") % j for j in range(3)] + ["y"])
    for _, x, y in pairs:
        w.writerow([repr(v) for v in x] + [y])
print(len(pairs))
PY

# replay NAME PROTOCOL ROWS ENDPOINT: events, labels, and the comparison
replay() {
    local name=$1 proto=$2 rows=$3 endpoint=$4 model=$1 n
    [ "$endpoint" = canary ] && model="$1:canary"
    n=$("$PY" "$work/replay.py" "$name" "$proto" "$rows" "$endpoint" "$work/$name$endpoint.csv" \
        2> "$work/$name.err") || { bad "$model: replay: $(tail -n 3 "$work/$name.err")"; return; }
    wait_for "$work/$name.json" "r['models'].get('$model', {}).get('scored') == $n" ||
        { bad "$model: $n pairs not scored"; return; }
    "$CALIBCTL" score "$work/$name$endpoint.csv" > "$work/$name.ref" || { bad "$model: calibctl score"; return; }
    check "$model: $proto, $rows row(s) an event, $endpoint: the Brier and log scores of calibctl score" \
        '"$PY" - "$work/$name.json" "$work/$name.ref" "$model" <<'"'"'PY2'"'"'
import json, sys
m = json.load(open(sys.argv[1]))["models"][sys.argv[3]]
r = json.load(open(sys.argv[2]))
assert m["scored"] == r["n"] and not m["rejected"], (m["scored"], r["n"], m["rejected"])
for key in ("brier", "log"):
    assert abs(m["raw"][key]["mean"] - r[key]) <= 1e-12 * max(1, r[key]), (key, m["raw"][key], r[key])
PY2'
}
replay iris-v1 v1 1 default
replay iris-v1b v1 16 default
replay iris-v2 v2 1 default
replay iris-v2b v2 16 default
replay iris-v2b v2 8 canary
replay iris-v2-logits v2-logits 16 default

# events without a usable output: counted, ignored, answered 200
ce() { # TYPE ID NAME BODY -> "CODE BODY"
    curl -sS --max-time "$(scaled 10)" -o "$work/resp" -w '%{http_code}' -X POST \
        -H "Ce-Id: $2" -H "Ce-Specversion: 1.0" -H "Ce-Type: org.kubeflow.serving.inference.$1" \
        -H "Ce-Source: http://localhost:9081/" -H "Ce-Inferenceservicename: $3" \
        -H "Ce-Endpoint: default" -H "Content-Type: application/json" --data-binary "$4" \
        "$base/v1/cloudevents"
    printf ' '; cat "$work/resp"
}
r=$(ce response a1 iris-classes '{"predictions": [1, 1]}')
check "class labels (V1): ignored, not usable ($r)" '[[ "$r" == 200\ *\"ignored\":\"unusable\"* ]]'
r=$(ce response a2 iris-classes '{"outputs": [{"name": "y", "shape": [2], "datatype": "INT64", "data": [1, 0]}]}')
check "class labels (V2): ignored, not usable ($r)" '[[ "$r" == 200\ *\"ignored\":\"unusable\"* ]]'
r=$(ce response a3 iris-classes '{"predictions": ')
check "a response that is no JSON: 400 bad_json, counted ($r)" '[[ "$r" == 400\ *bad_json* ]]'
"$PY" -c 'import json; print(json.dumps({"instances": [[0.5] * 4] * 5000}))' > "$work/inputs.json"
r=$(ce request a4 iris-classes "@$work/inputs.json")
check "a request event past max_msg_size: answered 200 unread, ignored ($r)" \
    '[[ "$r" == 200\ *\"ignored\":\"request\"* ]]'
r=$(curl -sS -o /dev/null -w '%{http_code}' -X POST -H "Content-Type: application/json" \
    --data '{"predictions": [[0.5, 0.5]]}' "$base/v1/cloudevents")
check "an event without KServe's headers: 400 ($r)" '[ "$r" = 400 ]'
# ids that cannot collide: a 2-row event b1 has rows b1/0 and b1/1; an
# event whose ce-id is b1/0 would replace the first
r=$(ce response b1 iris-ids '{"predictions": [[0.2, 0.8], [0.6, 0.4]]}')
r2=$(ce response b1/0 iris-ids '{"predictions": [[0.9, 0.1]]}')
check "a ce-id with '/', the rows' separator: 400 bad_event, saying why ($r2)" \
    '[[ "$r" == 200\ * && "$r2" == 400\ *bad_event*separates* ]]'
# a service named as svc's canary would merge with it
r=$(ce response c1 'iris-ids:canary' '{"predictions": [[0.2, 0.8]]}')
check "a service name with ':', the canary's mark: 400 bad_event ($r)" '[[ "$r" == 400\ *bad_event*canary* ]]'
refusals() {
    curl -sS "$base/metrics" > "$work/metrics" &&
        grep -q '^calibd_kserve_ignored_total{reason="unusable"} 2$' "$work/metrics" &&
        grep -q '^calibd_kserve_ignored_total{reason="request"} 241$' "$work/metrics" &&
        grep -q '^calibd_http_ingest_refused_total{reason="bad_event"} 3$' "$work/metrics"
}
check "in /metrics: 241 requests and 2 unusable responses ignored, 3 events refused" \
    'wait_until refusals'
check "calibd stops cleanly" stop_calibd
finish
