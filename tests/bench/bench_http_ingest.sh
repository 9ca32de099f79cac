#!/usr/bin/env bash
# bench_http_ingest.sh [BUILD_DIR] — calibd's HTTP ingest rate (http_ingest
# = yes) against its ZeroMQ path, for K = 10 logits in batches of 100 rows
# with their outcomes inline: pre-encoded bodies, JSON (numbers) and
# msgpack (a float32 bin, as the ZeroMQ case sends), POSTed by CLIENTS
# keep-alive connections (4) of one Python process, each waiting for its
# answer (which calibd gives once the loop has ingested the body); timed
# from the first POST until calibd's status shows every prediction
# scored. The ZeroMQ path of the same case is bench_throughput.sh's
# (CASES=10/100/inline/identity), run after.
# Run: tests/bench/bench_http_ingest.sh build/plain   (PAIRS=200000 CLIENTS=4)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-build/plain}" && pwd)
pairs=${PAIRS:-200000} clients=${CLIENTS:-4}
work=$(mktemp -d)
pid=
trap '[ -z "$pid" ] || kill "$pid" 2> /dev/null; rm -rf "$work"' EXIT
printf '[daemon]\nsnapshot_interval = 0\nhttp_ingest = yes\n' > "$work/calibd.conf"
"$dir/calibd" -c "$work/calibd.conf" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
    --control 'tcp://127.0.0.1:*' --http 127.0.0.1:0 --state-dir "$work" --log-level warn \
    2> "$work/log" &
pid=$!
until [ -s "$work/endpoints" ]; do sleep 0.05; done
http=$(awk '$1 == "http" {print $2}' "$work/endpoints")
ctl=$(awk '$1 == "control" {print $2}' "$work/endpoints")
for enc in json msgpack; do
    /usr/bin/python3 - "${http%/metrics}" "$enc" "$pairs" "$clients" "$dir/calibctl" "$ctl" <<'PY'
import http.client, json, random, struct, subprocess, sys, threading, time, urllib.parse
import msgpack
base, enc, pairs, clients, calibctl, ctl = sys.argv[1:7]
pairs, clients = int(pairs), int(clients)
u = urllib.parse.urlparse(base)
r = random.Random(1)
model = "bench_" + enc
z = [[r.gauss(0, 2) for _ in range(10)] for _ in range(100)]
y = [r.randrange(10) for _ in range(100)]
msg = {"v": 1, "type": "pred", "n": 100, "k": 10, "y": y}
if enc == "json":
    msg["logits"] = z
    body, ctype = json.dumps(msg).encode(), "application/json"
else:
    msg["logits"] = struct.pack("<1000f", *[v for row in z for v in row])
    body, ctype = msgpack.packb(msg, use_bin_type=True), "application/msgpack"
per = pairs // 100 // clients
def post():
    c = http.client.HTTPConnection(u.hostname, u.port)
    for _ in range(per):
        c.request("POST", f"/v1/models/{model}/predictions", body, {"Content-Type": ctype})
        resp = c.getresponse()
        resp.read()
        assert resp.status == 200, resp.status
    c.close()
def scored():
    out = subprocess.run([calibctl, "status", "--control", ctl, model], capture_output=True,
                         text=True).stdout
    try:
        return json.loads(out)["models"][model]["scored"]
    except (KeyError, ValueError):
        return 0
t0 = time.monotonic()
threads = [threading.Thread(target=post) for _ in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
total = per * clients * 100
while scored() < total:
    time.sleep(0.005)
dt = time.monotonic() - t0
print(f"http {enc}: {total} predictions in {dt:.2f} s: {total / dt:,.0f}/s "
      f"({len(body)} bytes a body of 100)")
PY
done
kill "$pid"
wait "$pid" 2> /dev/null || true
pid=
CASES=10/100/inline/identity tests/bench/bench_throughput.sh "$dir" | tail -n 3
