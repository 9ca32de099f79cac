"""status.py — the test scripts' waits on calibd's status, in one process.

A wait polls the control socket over a REQ socket of its own (pyzmq), as
`calibctl status` asks, until a python expression on the answers holds:
every 50 ms in the first second, every 100 ms to the fifth, every 250 ms
to the fifteenth, then every 500 ms. Starting a calibctl and a python for
each poll cost 80 ms of CPU each under the sanitizers, most of a core
while a script waited (tests/integ/lib.sh: wait_for; kafka.sh: kwait).
The script's helper (tests/integ/helper.py) runs one() and every() for
it; the command line below is what lib.sh uses with CURVE keys set.

    status.py one FILE EXPR SECONDS PID ENDPOINT TIMEOUT
        r: ENDPOINT's status (as calibctl prints it, read back by json);
        exit 0 once EXPR holds, 1 at SECONDS, 2 as soon as PID is not
        running; FILE then holds the last answer (written once, at the
        end: a poll only decodes and evaluates).
    status.py all EXPR SECONDS TIMEOUT NAME=ENDPOINT...
        s: each NAME's status (None while it does not answer), parts(NAME)
        the Kafka partitions it holds, scored(NAME) the pairs its models
        scored; exit 0 once EXPR holds, 1 at SECONDS.

TIMEOUT: seconds to wait for one answer. With CURVE keys in the
environment (CALIBD_KEY), calibctl (CALIBCTL) asks: it reads them.
"""
import json
import math
import os
import subprocess
import sys
import time

CURVE = bool(os.environ.get("CALIBD_KEY"))
if not CURVE:
    import msgpack
    import zmq

    CTX = zmq.Context()
    REQUEST = msgpack.packb({"v": 1, "cmd": "status"})


def as_json(o):
    """What calibctl prints for a msgpack object (src/ctl/msgpack_json.c),
    as json reads it back: a float as %.17g (120.0 is 120, an int), one
    not finite or bytes as null."""
    if isinstance(o, float):
        if not math.isfinite(o):
            return None
        t = "%.17g" % o
        return int(t) if t.lstrip("-").isdigit() else float(t)
    if isinstance(o, (bytes, bytearray)):
        return None
    if isinstance(o, dict):
        return {k if isinstance(k, str) else "?": as_json(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [as_json(v) for v in o]
    return o


class Asker:
    """One daemon's control socket: ask() is its status as calibctl
    prints it, read back by json (dicts, lists, numbers, strings, None),
    or None when no answer came in time."""

    def __init__(self, endpoint, timeout):
        self.endpoint = endpoint.lstrip(">@")
        self.timeout = float(timeout)
        self.sock = None

    def ask(self):
        if CURVE:
            r = subprocess.run([os.environ["CALIBCTL"], "status", "--control", self.endpoint,
                                "--timeout", str(self.timeout)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            return json.loads(r.stdout) if r.returncode == 0 else None
        if self.sock is None:
            self.sock = CTX.socket(zmq.REQ)
            self.sock.setsockopt(zmq.LINGER, 0)
            self.sock.connect(self.endpoint)
        self.sock.send(REQUEST)
        if not self.sock.poll(int(self.timeout * 1000)):
            self.sock.close()  # a REQ socket without its answer: a new one next time
            self.sock = None
            return None
        return as_json(msgpack.unpackb(self.sock.recv(), raw=False, strict_map_key=False))


def poll(step, seconds):
    """Calls step() until it returns an exit status, or returns 1 past
    seconds."""
    start = time.monotonic()
    while True:
        rc = step()
        if rc is not None:
            return rc
        waited = time.monotonic() - start
        if waited >= seconds:
            return 1
        time.sleep(0.05 if waited < 1 else 0.1 if waited < 5 else 0.25 if waited < 15 else 0.5)


def holds(code, names):
    try:
        # the names are globals, which a lambda in the expression sees too
        return bool(eval(code, dict(names, json=json, sys=sys)))
    except Exception:
        return False


def one(f, expr, seconds, pid, endpoint, timeout):
    code = compile(expr, "wait_for", "eval")
    asker = Asker(endpoint, timeout)
    last = []

    def step():
        try:
            os.kill(int(pid), 0)
        except (ValueError, OSError):
            return 2
        r = asker.ask()
        if r is None:
            return None
        last[:] = [r]
        return 0 if holds(code, {"r": r}) else None

    rc = poll(step, float(seconds))
    if last:
        with open(f, "w", encoding="utf-8") as out:
            json.dump(last[0], out, ensure_ascii=False)
    return rc


def every(expr, seconds, timeout, named):
    code = compile(expr, "kwait", "eval")
    askers = {}
    for n in named:
        name, endpoint = n.split("=", 1)
        askers[name] = Asker(endpoint, timeout)

    def step():
        s = {}
        for name, a in askers.items():
            s[name] = a.ask()
        names = {"s": s,
                 "parts": lambda n: len(s[n]["kafka"]["partitions"]),
                 "scored": lambda n: sum(m["scored"] for m in s[n]["models"].values())}
        return 0 if holds(code, names) else None

    return poll(step, float(seconds))


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "one":
        sys.exit(one(*sys.argv[2:]))
    if len(sys.argv) >= 5 and sys.argv[1] == "all":
        sys.exit(every(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]))
    sys.exit(__doc__)
