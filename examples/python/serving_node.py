#!/usr/bin/python3
"""serving_node.py -- a serving node in Python: follows calibd's recalibration
parameters (pyzmq + msgpack) and applies them, in pure Python, while it
"predicts". The same command line and output as examples/serving_node.c:

  serving_node.py --connect EP [--connect EP2] --model NAME [--model NAME2 ...]
                  [--until-version V] [--timeout SECONDS] [--verbose]
                  [--key FILE --server-key FILE]

With --key (this node's key pair, NAME.key_secret) and --server-key (calibd's
public key, NAME.key), the connection uses ZeroMQ's CURVE, as a calibd with
curve_secret_key requires (calibd(8), SECURITY).

One line per new version received, flushed at once, on stdout:
  NAME VERSION METHOD key=value [key=value ...]      (values as %.17g)
With --until-version it exits 0 as soon as every model holds a version >= V;
with --timeout it exits 1 when that many seconds pass first; otherwise it
runs until SIGINT or SIGTERM and exits 0. Usage errors exit 2.

The wire contract is calibd-protocol(7) (the "params" message); the
calibd package (python/, `pip install ./python`) validates every message
the way libcalib_client does, and a bad one is counted and dropped, never
fatal.
"""

import argparse
import math
import signal
import sys
import threading
import time

import zmq

from calibd.follower import (BINARY, GAUSSIAN, LOGITS, MODEL_MAX, TOPIC_CHARS,
                             Follower, NotApplicable, name_ok)

# ---------------------------------------------------------------- the node

def predict_loop(client, models, ident, verbose, stop):
    """A request thread: applies what is held to fixed demo outputs."""
    demos = ((LOGITS, [2.0, 0.5, -1.0]), (BINARY, [0.8]), (GAUSSIAN, [1.0, 0.5]))
    last = {}
    while not stop.is_set():
        for m in models:
            result = None
            for form, x in demos:
                try:
                    version, out = client.apply(m, form, x)
                    result = (version, form, x, out)
                    break
                except NotApplicable:
                    version = client.held(m).version
            if verbose and last.get(m) != version:
                last[m] = version
                if result is None:
                    msg = "not applicable"
                else:
                    msg = "%s %s -> %s" % (result[1], result[2],
                                           ["%.4f" % v for v in result[3]])
                # one write per line: the threads' lines must not interleave
                sys.stderr.write("serving_node: predict[%d]: %s v%d: %s\n"
                                 % (ident, m, version, msg))
        stop.wait(0.01)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="serving_node", allow_abbrev=False,
                                 description="Follow calibd's recalibration"
                                 " parameters and apply them.")
    ap.add_argument("--connect", action="append", required=True, metavar="EP",
                    help="a calibd PUB endpoint, e.g. tcp://127.0.0.1:7451")
    ap.add_argument("--model", action="append", required=True, metavar="NAME")
    ap.add_argument("--until-version", type=int, metavar="V")
    ap.add_argument("--timeout", type=float, metavar="SECONDS")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--key", metavar="FILE",
                    help="CURVE: this node's key pair (NAME.key_secret)")
    ap.add_argument("--server-key", metavar="FILE",
                    help="CURVE: calibd's public key (NAME.key)")
    a = ap.parse_args(argv)  # exits 2 on a usage error
    if (a.key is None) != (a.server_key is None):
        ap.error("CURVE needs both --key and --server-key")
    if a.until_version is not None and a.until_version < 0:
        ap.error("--until-version: not an unsigned integer")
    if a.timeout is not None and not (math.isfinite(a.timeout) and a.timeout >= 0):
        ap.error("--timeout: not a number of seconds")
    for m in a.model:
        if not name_ok(m.encode("utf-8", "surrogateescape"), MODEL_MAX, TOPIC_CHARS):
            ap.error("--model %s: not 1..128 bytes of [A-Za-z0-9._:-]" % m)
    return a


def main(argv):
    a = parse_args(argv)

    def print_params(p):
        sys.stdout.write(p.line() + "\n")
        sys.stdout.flush()

    def print_alert(val):
        if a.verbose:
            print("serving_node: alert %s %s %s: %s" % (
                val.get("model"), val.get("severity", ""), val.get("kind", ""),
                val.get("message", "")), file=sys.stderr)

    try:
        client = Follower(a.connect, a.model, print_params, print_alert,
                          a.key, a.server_key)
    except zmq.ZMQError as e:
        print("serving_node: %s" % e, file=sys.stderr)
        return 2 if e.errno in (zmq.EINVAL, zmq.EPROTONOSUPPORT) else 1
    except (OSError, ValueError) as e:  # a key file unreadable or malformed
        print("serving_node: %s" % e, file=sys.stderr)
        return 2

    stopping = {"signal": False}

    def on_signal(signum, frame):
        stopping["signal"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    stop = threading.Event()
    threads = [threading.Thread(target=predict_loop, daemon=True,
                                args=(client, a.model, i, a.verbose, stop))
               for i in range(2)]
    for t in threads:
        t.start()

    deadline = time.monotonic() + a.timeout if a.timeout is not None else math.inf
    status = 0
    while True:
        if a.until_version is not None and all(
                client.held(m).version >= a.until_version for m in a.model):
            break
        if stopping["signal"]:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            if a.verbose:
                print("serving_node: timed out", file=sys.stderr)
            status = 1
            break
        client.poll(int(math.ceil(min(left, 0.2) * 1000)))

    stop.set()
    for t in threads:
        t.join()
    if a.verbose:
        c = client.counters
        print("serving_node: received %d, accepted %d, stale %d, rejected %d"
              % (c["received"], c["accepted"], c["stale"],
                 sum(client.rejects.values())), file=sys.stderr)
        for reason, n in sorted(client.rejects.items()):
            print("serving_node:   %s %d" % (reason, n), file=sys.stderr)
    client.close()
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
