#!/usr/bin/env python3
"""abuse.py — legal but abusive producer traffic for tests/integ/soak.sh.

Every message is valid protocol v1 (or, for `oversize`, valid but one byte
over the daemon's max_msg_size); what makes it abusive is volume, shape or
variety. Each mode runs for a bounded time or count and prints one line,
"sent N messages", on stdout. Loopback only.

    abuse.py MODE --endpoint EP [--seconds S] [--count N] [options]

Modes:
  flood-unique   unique-id predictions, K logits (float32 bin), batches of
                 --batch rows, never labelled, as fast as the socket takes
  flood-max      batches as large as --max-size allows (K = 61 float32
                 logits with inline y: every row is scored), as fast as
                 possible
  never-labelled --count row-form predictions of K = --k float32 logits
                 with unique ids
  huge-k         --count row-form predictions of K = --k (with "k")
  new-models     --count models, one prediction of --k logits with y each
                 (a binary p with --k 2)
  oversize       one batch one byte over --max-size
  segment-flood  batches of --batch rows of K = --k float32 logits with
                 inline y, each row naming a new value of each of --keys
                 segment keys (every value a slot would take is new), for
                 --seconds or --count messages
"""
import argparse
import struct
import sys
import time

import msgpack
import zmq


def pack(payload):
    return msgpack.packb(payload, use_bin_type=True)


def batch(k, n, start, with_y=False):
    m = {"v": 1, "type": "pred", "n": n, "k": k,
         "id": list(range(start, start + n)),
         "logits": struct.pack("<%df" % (n * k), *([0.5] * (n * k)))}
    if with_y:
        m["y"] = [i % k for i in range(n)]
    return m


def fit_rows(k, max_size):
    """The largest n whose flood-max batch fits max_size bytes."""
    lo, hi = 1, 65536
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(pack(batch(k, mid, 2**40, True))) <= max_size:
            lo = mid
        else:
            hi = mid - 1
    return lo


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--model", default="abuse")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--max-size", type=int, default=1 << 20)
    ap.add_argument("--push", action="store_true", help="PUSH instead of PUB")
    ap.add_argument("--keys", type=int, default=8, help="segment keys (segment-flood)")
    ap.add_argument("--warmup", type=float, default=60,
                    help="seconds to wait for calibd's subscription at most")
    a = ap.parse_args()

    ctx = zmq.Context()
    # an XPUB sends as a PUB does, and hands over the subscriptions
    s = ctx.socket(zmq.PUSH if a.push else zmq.XPUB)
    s.setsockopt(zmq.SNDHWM, 1000)
    s.setsockopt(zmq.LINGER, 2000)
    s.connect(a.endpoint)
    topic = a.model.encode()
    if not a.push:
        # a PUB drops what no subscriber has asked for: wait for calibd's
        # subscription to this topic (a prefix of it), not a fixed delay
        deadline = time.monotonic() + a.warmup
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not s.poll(int(left * 1000), zmq.POLLIN):
                sys.exit(f"abuse.py: no subscription to '{a.model}' within {a.warmup} s")
            msg = s.recv()
            if msg[:1] == b"\x01" and topic.startswith(msg[1:]):
                break
    sent = 0
    deadline = time.monotonic() + a.seconds

    def send(payload, model=topic):
        nonlocal sent
        s.send_multipart([model, payload if isinstance(payload, bytes) else pack(payload)])
        sent += 1

    if a.mode == "flood-unique":
        body = batch(a.k, a.batch, 0)
        start = 0
        while time.monotonic() < deadline:
            body["id"] = list(range(start, start + a.batch))
            start += a.batch
            send(body)
    elif a.mode == "flood-max":
        n = fit_rows(61, a.max_size)
        body = batch(61, n, 0, True)
        start = 0
        while time.monotonic() < deadline:
            body["id"] = list(range(start, start + n))
            start += n
            send(body)
    elif a.mode in ("never-labelled", "huge-k"):
        row = struct.pack("<%df" % a.k, *([0.25] * a.k))
        for i in range(a.count):
            send({"v": 1, "type": "pred", "id": 10**9 + i, "k": a.k, "logits": row})
            if time.monotonic() > deadline:
                break
    elif a.mode == "new-models":
        body = pack({"v": 1, "type": "pred", "p": 0.5, "y": 1} if a.k == 2 else
                    {"v": 1, "type": "pred", "k": a.k, "y": 1,
                     "logits": struct.pack("<%df" % a.k, *([0.25] * a.k))})
        for i in range(a.count):
            send(body, model=b"%s-%d" % (topic, i))
            if time.monotonic() > deadline:
                break
    elif a.mode == "segment-flood":
        body = batch(a.k, a.batch, 0, True)
        start = 0
        for i in range(a.count):
            body["id"] = list(range(start, start + a.batch))
            body["seg"] = {"k%d" % j: ["v%d" % (start + r) for r in range(a.batch)]
                           for j in range(a.keys)}
            start += a.batch
            send(body)
            if time.monotonic() > deadline:
                break
    elif a.mode == "oversize":
        # a valid batch grown with an unknown key (which the protocol
        # ignores) to exactly max_size + 1 bytes
        m = batch(61, fit_rows(61, a.max_size), 0, True)
        m["pad"] = b""
        while len(pack(m)) != a.max_size + 1:
            m["pad"] = b"x" * max(0, len(m["pad"]) + a.max_size + 1 - len(pack(m)))
        send(m)
    else:
        sys.exit("abuse.py: unknown mode " + a.mode)
    s.close()
    ctx.term()
    print("sent %d messages" % sent)


if __name__ == "__main__":
    main()
