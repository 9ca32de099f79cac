#!/usr/bin/env python3
"""slowloris.py — slow HTTP clients for tests/integ/metrics.sh and soak.sh:
--clients connections from 127.0.0.2 (another loopback address than the
scraper's, so a per-address limit does not hit the scraper) each send the
start of a request and then one header line every --interval seconds, for
--seconds, never finishing it. Prints "connected N" once the connections
are open, and at the end "cut C of N": the connections the server closed.
With --until-cut it stops as soon as the server has closed them all.
Loopback only, bounded in time."""
import argparse
import socket
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--until-cut", action="store_true")
    a = ap.parse_args()
    host, port = a.url.split("//")[1].split("/")[0].split(":")
    conns, cut = [], 0
    for _ in range(a.clients):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        try:
            s.connect((host, int(port)))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            conns.append(s)
        except OSError:
            s.close()
            cut += 1
    print("connected %d" % len(conns), flush=True)
    end = time.monotonic() + a.seconds
    while time.monotonic() < end and not (a.until_cut and not conns):
        for s in list(conns):
            try:
                s.sendall(b"X-Trickle: 1\r\n")
            except OSError:
                conns.remove(s)
                s.close()
                cut += 1
        time.sleep(a.interval)
    print("cut %d of %d" % (cut, a.clients))


if __name__ == "__main__":
    main()
