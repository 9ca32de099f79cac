"""kafka_watch.py -- records every params message of a set of calibd PUB
sockets, for tests/integ/kafka.sh: which instance published which version
of which model, in the order received.

  kafka_watch.py ENDPOINTS OUT

ENDPOINTS holds lines "LABEL ENDPOINT", read again every 50 ms: a line
added later (an instance restarted on another port) is connected then.
OUT gets one line per params message, "SECONDS LABEL MODEL VERSION",
flushed at once. Runs until killed.
"""
import os
import sys
import time

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from calibd.follower import NotParams, Reject, decode_params  # noqa: E402

path, out = sys.argv[1], sys.argv[2]
ctx = zmq.Context()
poller = zmq.Poller()
socks = {}  # socket -> label
seen = set()
with open(out, "w") as f:
    while True:
        try:
            lines = open(path).read().split("\n")
        except FileNotFoundError:
            lines = []
        for line in lines:
            parts = line.split()
            if len(parts) != 2 or line in seen:
                continue
            seen.add(line)
            s = ctx.socket(zmq.SUB)
            s.setsockopt(zmq.SUBSCRIBE, b"")
            s.connect(parts[1])
            socks[s] = parts[0]
            poller.register(s, zmq.POLLIN)
        for s, _ in poller.poll(50):
            frames = s.recv_multipart()
            if len(frames) != 2:
                continue
            try:
                p = decode_params(frames[0], frames[1])
            except (NotParams, Reject):
                continue
            f.write(f"{time.monotonic():.6f} {socks[s]} {p.model} {p.version}\n")
            f.flush()
