#!/usr/bin/env python3
"""probe.py — how fast calibd answers while it is under load: sends "ping"
and "status" requests alternately to the control socket every --interval
seconds for --seconds (the status of the model --model, or of all), and,
with --http URL, fetches /metrics as well.
Prints one line of key=value figures: requests, failures (no answer within
--timeout seconds), and the worst and 99th-percentile latency in ms of the
control socket and of HTTP."""
import argparse
import time
import urllib.request

import msgpack
import zmq


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--control", required=True)
    ap.add_argument("--http")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--interval", type=float, default=0.02)
    ap.add_argument("--timeout", type=float, default=2)
    ap.add_argument("--model", help="status of this model alone")
    a = ap.parse_args()
    ctx = zmq.Context()
    ctl, http, fails, n = [], [], 0, 0
    sock = None
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        if sock is None:
            sock = ctx.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(a.control)
        cmd = "ping" if n % 2 == 0 else "status"
        n += 1
        t = time.monotonic()
        req = {"v": 1, "cmd": cmd}
        if cmd == "status" and a.model:
            req["model"] = a.model
        sock.send(msgpack.packb(req))
        if sock.poll(int(a.timeout * 1000)):
            sock.recv()
            ctl.append((time.monotonic() - t) * 1000)
        else:
            fails += 1
            sock.close()  # a REQ socket that lost its reply must be replaced
            sock = None
        if a.http:
            t = time.monotonic()
            try:
                urllib.request.urlopen(a.http, timeout=a.timeout).read()
                http.append((time.monotonic() - t) * 1000)
            except Exception:
                fails += 1
        time.sleep(a.interval)
    if sock is not None:
        sock.close()
    ctx.term()
    print("requests=%d failures=%d control_max_ms=%.1f control_p99_ms=%.1f "
          "http_max_ms=%.1f http_p99_ms=%.1f" % (
              n, fails, max(ctl, default=0), pct(ctl, 0.99), max(http, default=0),
              pct(http, 0.99)))


if __name__ == "__main__":
    main()
