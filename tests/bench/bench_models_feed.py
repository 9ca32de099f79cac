#!/usr/bin/env python3
"""bench_models_feed.py — the producer and the prober of bench_models.sh.

    bench_models_feed.py feed --pull EP --control EP --pid PID --models N
        [--first I] [--rounds R] [--pending-round R --pending P]
        [--rate MSG_PER_S] --expect TOTAL
  sends R rounds of row-form K = 10 logit predictions with inline y,
  round-robin over models m{I}..m{I+N-1} on the PULL endpoint (pre-encoded;
  with --pending-round, that round also sends each model P predictions
  without y, which wait in its join table), then waits until calibd has
  taken TOTAL messages since it started ("messages" of `status m0` on the
  control socket), and for a tick after that (m0's window summed later:
  /metrics is rendered at the tick). Prints "sent=... send_s=...
  done_s=..." (seconds from the first send to the last send, and to the
  last message taken).

    bench_models_feed.py tick --control EP
  waits for calibd's next tick (m0's window summed after the call).

    bench_models_feed.py stall --control EP [--seconds S]
  pings back to back for S seconds (default 3.5: three ticks at the
  default tick): "count=... median_ms=... p99_ms=... max_ms=...", the
  longest the idle loop leaves the control socket waiting.

    bench_models_feed.py poll --control EP --calibctl PATH --models N
  until SIGTERM: after random pauses (exponential, mean --interval
  seconds), asks `status MODEL` of a random model m0..m{N-1}, either
  (at random) as a whole `calibctl status` process or as a request on a
  REQ socket of its own (the request calibctl sends), and times it
  wall-clock. Prints one line per way: "NAME count=...
  absent=... failed=... over_50ms=... median_ms=... p99_ms=... max_ms=...". absent:
  answered "no such model" (not created yet, or refused); failed: no
  answer within --timeout, or any other error.
"""
import argparse
import math
import os
import random
import signal
import struct
import subprocess
import sys
import time

import msgpack
import zmq

K = 10


def pack(payload):
    return msgpack.packb(payload, use_bin_type=True)


def variants(n, seed=1):
    """n row-form predictions with inline y: random logits, y drawn from
    their softmax, so the models stay calibrated and do not drift."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        z = [rng.gauss(0, 2) for _ in range(K)]
        e = [math.exp(x - max(z)) for x in z]
        y = rng.choices(range(K), weights=e)[0]
        out.append(pack({"v": 1, "type": "pred", "k": K, "y": y,
                         "logits": struct.pack("<%df" % K, *z)}))
    return out


def status(sock, model, timeout_ms):
    """One status request; the decoded answer, or None without one."""
    sock.send(pack({"v": 1, "cmd": "status", "model": model}))
    if not sock.poll(timeout_ms):
        return None
    return msgpack.unpackb(sock.recv(), raw=False)


def wait_tick(ctl):
    """Waits for the next tick of calibd: m0's window summed later."""
    wall = time.time()
    while True:
        ans = status(ctl, "m0", 10000)
        if ans is None or not ans.get("ok"):
            sys.exit("status m0: %r" % (ans,))
        w = ans["models"]["m0"].get("window")
        if w and w["at"] > wall:
            return
        if time.time() - wall > 60:
            sys.exit("no tick for 60 s")
        time.sleep(0.01)


def tick(a):
    ctx = zmq.Context()
    ctl = ctx.socket(zmq.REQ)
    ctl.setsockopt(zmq.LINGER, 0)
    ctl.connect(a.control)
    wait_tick(ctl)
    ctl.close()
    ctx.term()


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("calibd (pid %d) died" % pid)


def feed(a):
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.setsockopt(zmq.SNDTIMEO, 1000)  # blocked a second: is calibd alive?
    push.connect(a.pull)

    def send(topic, payload):
        while True:
            try:
                push.send_multipart((topic, payload))
                return
            except zmq.Again:
                alive(a.pid)

    ctl = ctx.socket(zmq.REQ)
    ctl.setsockopt(zmq.LINGER, 0)
    ctl.connect(a.control)
    pays = variants(97)
    topics = [b"m%d" % (a.first + i) for i in range(a.models)]
    pending = []
    if a.pending_round is not None:
        pending = [pack({"v": 1, "type": "pred", "k": K, "id": "w%d" % j,
                         "logits": struct.pack("<%df" % K, *([0.1 * j] * K))})
                   for j in range(a.pending)]
    sent = 0
    t0 = time.monotonic()
    for r in range(a.rounds):
        for i, topic in enumerate(topics):
            send(topic, pays[(7 * i + r) % len(pays)])
            sent += 1
            if r == a.pending_round:
                for p in pending:
                    send(topic, p)
                sent += len(pending)
            if a.rate:
                ahead = t0 + sent / a.rate - time.monotonic()
                if ahead > 0.001:
                    time.sleep(ahead)
    t_sent = time.monotonic()
    # calibd takes the messages of one connection in order, in one thread:
    # once it has taken TOTAL, every message sent here has been handled
    last, last_change = -1, time.monotonic()
    while True:
        alive(a.pid)
        ans = status(ctl, "m0", 10000)
        if ans is None or not ans.get("ok"):
            sys.exit("status m0: %r" % (ans,))
        if ans["messages"] >= a.expect:
            break
        if ans["messages"] != last:
            last, last_change = ans["messages"], time.monotonic()
        elif time.monotonic() - last_change > 60:
            sys.exit("calibd took no message for 60 s (%d of %d)" % (last, a.expect))
        time.sleep(0.002)
    t_done = time.monotonic()
    wait_tick(ctl)  # which /metrics shows
    print("sent=%d send_s=%.3f done_s=%.3f" % (sent, t_sent - t0, t_done - t0))
    push.close()
    ctl.close()
    ctx.term()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def poll(a):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ctx = zmq.Context()
    sock = None
    rng = random.Random(2)
    ways = {"calibctl": [[], 0, 0], "zmq": [[], 0, 0]}  # times, absent, failed
    while not stop:
        # one way at random, after a random pause: samples at random
        # moments, not locked to the loop's tick or to the other way
        time.sleep(rng.expovariate(1 / a.interval))
        model = "m%d" % rng.randrange(a.models)
        way = rng.choice(("calibctl", "zmq"))
        if way == "calibctl":
            t = time.monotonic()
            p = subprocess.run([a.calibctl, "status", "--control", a.control,
                                "--timeout", str(a.timeout), model],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            ms = (time.monotonic() - t) * 1000
            ok, absent = p.returncode == 0, b"no such model" in p.stdout
            why = "exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip())
        else:
            if sock is None:
                sock = ctx.socket(zmq.REQ)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(a.control)
            t = time.monotonic()
            ans = status(sock, model, int(a.timeout * 1000))
            ms = (time.monotonic() - t) * 1000
            if ans is None:
                sock.close()  # a REQ socket that lost its answer must be replaced
                sock = None
            ok = ans is not None and ans.get("ok")
            absent = ans is not None and ans.get("error") == "no such model"
            why = "no answer" if ans is None else repr(ans)
        w = ways[way]
        if ok or absent:
            w[0].append(ms)
            w[1] += absent
        else:
            w[2] += 1
            sys.stderr.write("%s status %s: %s\n" % (way, model, why))
    for name, (xs, absent, failed) in ways.items():
        print("%s count=%d absent=%d failed=%d over_50ms=%d median_ms=%.1f p99_ms=%.1f "
              "max_ms=%.1f" % (name, len(xs), absent, failed, sum(x > 50 for x in xs),
                               pct(xs, 0.5), pct(xs, 0.99), max(xs) if xs else float("nan")))
    if sock is not None:
        sock.close()
    ctx.term()


def stall(a):
    """pings back to back for --seconds: the longest answer is the longest
    the loop does not answer, idle (the tick, at the default 1 s)"""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(a.control)
    xs = []
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        t = time.monotonic()
        sock.send(pack({"v": 1, "cmd": "ping"}))
        if not sock.poll(int(a.timeout * 1000)):
            sys.exit("ping: no answer within %g s" % a.timeout)
        sock.recv()
        xs.append((time.monotonic() - t) * 1000)
    print("count=%d median_ms=%.2f p99_ms=%.1f max_ms=%.1f" % (
        len(xs), pct(xs, 0.5), pct(xs, 0.99), max(xs)))
    sock.close()
    ctx.term()


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    f = sub.add_parser("feed")
    f.add_argument("--pull", required=True)
    f.add_argument("--control", required=True)
    f.add_argument("--pid", type=int, required=True)
    f.add_argument("--models", type=int, required=True)
    f.add_argument("--first", type=int, default=0)
    f.add_argument("--rounds", type=int, default=1)
    f.add_argument("--pending-round", type=int)
    f.add_argument("--pending", type=int, default=20)
    f.add_argument("--rate", type=float, default=0, help="messages per second (0: at once)")
    f.add_argument("--expect", type=int, required=True)
    p = sub.add_parser("poll")
    p.add_argument("--control", required=True)
    p.add_argument("--calibctl", required=True)
    p.add_argument("--models", type=int, required=True)
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--timeout", type=float, default=5)
    t = sub.add_parser("tick")
    t.add_argument("--control", required=True)
    s = sub.add_parser("stall")
    s.add_argument("--control", required=True)
    s.add_argument("--seconds", type=float, default=3.5)
    s.add_argument("--timeout", type=float, default=5)
    a = ap.parse_args()
    {"feed": feed, "poll": poll, "tick": tick, "stall": stall}[a.mode](a)


if __name__ == "__main__":
    main()
