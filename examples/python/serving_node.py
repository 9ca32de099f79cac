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

The wire contract is calibd-protocol(7) (the "params" message); every
message is validated the way libcalib_client does, and a bad one is counted
and dropped, never fatal.
"""

import argparse
import math
import signal
import sys
import threading
import time

import msgpack
import zmq
import zmq.auth

PROTO_VERSION = 1
MODEL_MAX = 128
METHOD_MAX = 63
PARAM_NAME_MAX = 31
MAX_PARAMS = 8
MAX_DEPTH = 32
MAX_MSG_SIZE = 1 << 20
LOG_FLOOR = 1e-15

NAME_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                       b"0123456789._-")
TOPIC_CHARS = NAME_CHARS | frozenset(b":")

# The built-in methods: parameter names, in the order they are applied.
BUILTINS = {
    "temperature": ("T",),
    "platt": ("a", "b"),
    "variance": ("w", "b"),
}

LOGITS, PROBS, BINARY, GAUSSIAN = "logits", "probs", "binary", "gaussian"


class Reject(Exception):
    """A malformed message; the argument is the reason (a counter label)."""


class NotParams(Exception):
    """A well-formed message of another type (alert, heartbeat, ...)."""


class Params:
    """One immutable set of parameters; swapped whole, so a reader that took
    a reference sees one version from start to end."""

    __slots__ = ("model", "version", "method", "names", "values")

    def __init__(self, model, version=0, method="", names=(), values=()):
        self.model = model
        self.version = version
        self.method = method
        self.names = tuple(names)
        self.values = tuple(values)

    def line(self):
        kv = "".join(" %s=%.17g" % (n, v) for n, v in zip(self.names, self.values))
        return "%s %d %s%s" % (self.model, self.version, self.method, kv)


# ---------------------------------------------------------------- decoding

def name_ok(b, maxlen, chars):
    return 0 < len(b) <= maxlen and all(c in chars for c in b)


def is_number(x):
    # bool is an int in Python, but a msgpack true is not a number
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_uint(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def is_map(x):
    # maps are unpacked as lists of pairs (object_pairs_hook=list) to see
    # duplicate and non-string keys; arrays are lists of anything else
    return isinstance(x, _Pairs)


class _Pairs(list):
    """A msgpack map, as its (key, value) pairs in order."""


class _Ext:
    """An extension object, whatever its code (ExtType refuses negative
    ones): never a valid value of a known key."""

    def __init__(self, code, data):
        self.code, self.data = code, data


def depth(x, d=0):
    if isinstance(x, list):
        d += 1
        if d > MAX_DEPTH:
            return d
        items = (v for kv in x for v in kv) if is_map(x) else x
        return max([d] + [depth(v, d) for v in items])
    return d


def unpack(payload):
    try:
        obj = msgpack.unpackb(payload, raw=False, unicode_errors="surrogateescape",
                              strict_map_key=False, object_pairs_hook=_Pairs,
                              use_list=True, ext_hook=_Ext)
    except msgpack.ExtraData:
        raise Reject("trailing_bytes")
    except Exception:  # truncated, invalid, a count larger than the bytes
        raise Reject("bad_msgpack")
    if depth(obj) > MAX_DEPTH:
        raise Reject("too_deep")
    return obj


ENVELOPE_KEYS = ("v", "type", "model", "version", "method", "params", "ts", "n",
                 "before", "after", "improvement", "ci", "severity", "kind",
                 "message")


def envelope(topic, payload):
    """The keys every message shares; returns (type, known keys)."""
    if not name_ok(topic, MODEL_MAX, TOPIC_CHARS):
        raise Reject("bad_topic")
    root = unpack(payload)
    if not is_map(root):
        raise Reject("not_a_map")
    val = {}
    for k, v in root:
        if not isinstance(k, str):
            raise Reject("bad_key")
        if k in ENVELOPE_KEYS:
            if k in val:
                raise Reject("duplicate_key")
            val[k] = v
    v = val.get("v")
    if not is_uint(v) or v != PROTO_VERSION:
        raise Reject("bad_version")
    if not isinstance(val.get("type"), str):
        raise Reject("bad_type")
    mtype = val["type"]
    if mtype not in ("params", "alert"):
        return mtype, val
    if "model" not in val:
        raise Reject("missing_key")
    if not isinstance(val["model"], str):
        raise Reject("key_type")
    if val["model"].encode("utf-8", "surrogateescape") != topic:
        raise Reject("model_mismatch")
    return mtype, val


def check_optional(val):
    """ts, n, before, after, improvement: optional, typed when present."""
    if "ts" in val:
        if not is_number(val["ts"]):
            raise Reject("key_type")
        if not math.isfinite(val["ts"]):
            raise Reject("bad_value")
    if "n" in val and not is_uint(val["n"]):
        raise Reject("key_type")
    for key in ("before", "after"):
        if key in val:
            m = val[key]
            if not is_map(m) or any(not isinstance(k, str) or
                                    not (v is None or is_number(v)) for k, v in m):
                raise Reject("key_type")
    # {"improvement": {"mean": x, "ci": [lo, hi]}}, or, as calibd sends it,
    # {"improvement": x, "ci": [lo, hi]}; numbers may be nil (unknown)
    def ci_ok(v):
        return v is None or (isinstance(v, list) and not is_map(v) and len(v) == 2
                             and all(x is None or is_number(x) for x in v))
    if "ci" in val and not ci_ok(val["ci"]):
        raise Reject("key_type")
    if "improvement" in val:
        m = val["improvement"]
        if not is_map(m):
            if not (m is None or is_number(m)):
                raise Reject("key_type")
            return
        seen = set()
        for k, v in m:
            if not isinstance(k, str):
                raise Reject("key_type")
            if k in ("mean", "ci"):
                if k in seen or (k == "ci" and "ci" in val):
                    raise Reject("duplicate_key")
                seen.add(k)
            if k == "mean" and not (v is None or is_number(v)):
                raise Reject("key_type")
            if k == "ci" and not ci_ok(v):
                raise Reject("key_type")


def decode_params(topic, payload):
    """One params message (frames 0 and 1, bytes) -> Params, or raises
    Reject(reason) / NotParams."""
    mtype, val = envelope(topic, payload)
    if mtype != "params":
        raise NotParams(mtype)
    for k in ("version", "method", "params"):
        if k not in val:
            raise Reject("missing_key")
    version, method, pmap = val["version"], val["method"], val["params"]
    if not is_uint(version) or not isinstance(method, str) or not is_map(pmap):
        raise Reject("key_type")
    if not name_ok(method.encode("utf-8", "surrogateescape"), METHOD_MAX, NAME_CHARS):
        raise Reject("bad_method")
    check_optional(val)

    names = BUILTINS.get(method)
    if version == 0 and len(pmap) == 0:  # the identity, by any name
        return Params(val["model"], 0, method)
    if names is not None:
        found = {}
        for k, v in pmap:
            if not isinstance(k, str):
                raise Reject("bad_params")
            if k in names:
                if k in found:
                    raise Reject("duplicate_key")
                if not is_number(v):
                    raise Reject("key_type")
                found[k] = float(v)
        if len(found) != len(names):
            raise Reject("bad_params")
        values = [found[n] for n in names]
    else:  # a plugin's method: kept as sent, in the message's order
        if not 0 < len(pmap) <= MAX_PARAMS:
            raise Reject("bad_params")
        names, values = [], []
        for k, v in pmap:
            if not isinstance(k, str) or not name_ok(
                    k.encode("utf-8", "surrogateescape"), PARAM_NAME_MAX, NAME_CHARS):
                raise Reject("bad_params")
            if k in names:
                raise Reject("duplicate_key")
            if not is_number(v):
                raise Reject("key_type")
            names.append(k)
            values.append(float(v))
    if not all(math.isfinite(v) for v in values):
        raise Reject("bad_value")
    if method == "temperature" and not values[0] > 0:
        raise Reject("bad_value")
    if method == "variance" and not (values[0] > 0 and values[1] >= 0):
        raise Reject("bad_value")
    return Params(val["model"], version, method, names, values)


# ---------------------------------------------------------------- applying
# The maps of calib_recal(3), in pure Python, as libcalib computes them.

def clamp_prob(p):
    return LOG_FLOOR if p < LOG_FLOOR else 1 - LOG_FLOOR if p > 1 - LOG_FLOOR else p


def sigmoid(u):
    if u >= 0:
        return 1 / (1 + math.exp(-u))
    e = math.exp(u)
    return e / (1 + e)


def softmax_scaled(z, beta):
    zmax = max(z)
    e = [math.exp(beta * (x - zmax)) for x in z]
    s = sum(e)
    return [x / s for x in e]


def check_input(form, x):
    """The checks libcalib applies before a map (calib_check_*)."""
    if form == LOGITS:
        if len(x) < 2 or not all(math.isfinite(v) for v in x):
            raise ValueError("logits: at least 2 finite numbers")
    elif form == PROBS:
        if len(x) < 2 or not all(math.isfinite(v) and 0 <= v <= 1 for v in x) \
                or abs(sum(x) - 1) > 1e-3:
            raise ValueError("probs: at least 2 in [0, 1] summing to 1")
    elif form == BINARY:
        if len(x) != 1 or not (math.isfinite(x[0]) and 0 <= x[0] <= 1):
            raise ValueError("binary: one p in [0, 1]")
    elif form == GAUSSIAN:
        if len(x) != 2 or not (math.isfinite(x[0]) and math.isfinite(x[1]) and x[1] > 0):
            raise ValueError("gaussian: mean and a variance > 0")
    else:
        raise ValueError("unknown form %r" % form)


class NotApplicable(Exception):
    """The held method is unknown here, or does not take this form."""


def apply_params(p, form, x):
    """The recalibrated prediction: probabilities for logits or probs, p for
    binary, [mean, var] for gaussian. x is a list; it is not modified."""
    check_input(form, x)
    x = [float(v) for v in x]
    if p.version == 0:  # the identity
        return softmax_scaled(x, 1.0) if form == LOGITS else list(x)
    v = p.values
    if p.method == "temperature" and form != GAUSSIAN:
        beta = 1 / v[0]
        if form == LOGITS:
            return softmax_scaled(x, beta)
        if form == PROBS:
            return softmax_scaled([math.log(max(q, LOG_FLOOR)) for q in x], beta)
        q = clamp_prob(x[0])
        return [sigmoid(beta * (math.log(q) - math.log1p(-q)))]
    if p.method == "platt" and form != GAUSSIAN:
        if form == BINARY:
            q = clamp_prob(x[0])
            s = math.log(q) - math.log1p(-q)
        elif len(x) != 2:
            raise NotApplicable("platt takes K = 2 only")
        elif form == LOGITS:
            s = x[1] - x[0]
        else:
            s = math.log(clamp_prob(x[1])) - math.log(clamp_prob(x[0]))
        u = v[0] * s + v[1]
        return [sigmoid(u)] if form == BINARY else [sigmoid(-u), sigmoid(u)]
    if p.method == "variance" and form == GAUSSIAN:
        return [x[0], v[0] * x[1] + v[1]]
    if p.method in BUILTINS:
        raise NotApplicable("%s does not handle %s" % (p.method, form))
    raise NotApplicable("method %s is unknown here" % p.method)


# ---------------------------------------------------------------- the client

class Client:
    """A SUB socket, the newest parameters per model, counters. poll() runs
    on one thread (the socket's); apply() and held() on any."""

    def __init__(self, endpoints, models, on_params=None, on_alert=None,
                 key=None, server_key=None):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.MAXMSGSIZE, MAX_MSG_SIZE)
        if key:
            # CURVE: our key pair (NAME.key_secret) and calibd's public key
            # (NAME.key), certificate files as calibctl keygen writes them
            public, secret = zmq.auth.load_certificate(key)
            server_public, _ = zmq.auth.load_certificate(server_key)
            if not secret:
                raise ValueError("%s: no secret-key: give the key pair "
                                 "(NAME.key_secret)" % key)
            self.sock.curve_publickey = public
            self.sock.curve_secretkey = secret
            self.sock.curve_serverkey = server_public
        self.params = {}
        for m in models:
            self.params[m.encode()] = Params(m)
            self.sock.setsockopt(zmq.SUBSCRIBE, m.encode())
        for ep in endpoints:
            if ep.startswith("@"):
                self.sock.bind(ep[1:])
            else:
                self.sock.connect(ep[1:] if ep.startswith(">") else ep)
        self.on_params = on_params
        self.on_alert = on_alert
        self.counters = {"received": 0, "accepted": 0, "stale": 0, "alerts": 0,
                         "other": 0, "unsubscribed": 0}
        self.rejects = {}

    def close(self):
        self.sock.close(0)
        self.ctx.term()

    def held(self, model):
        return self.params[model.encode()]

    def apply(self, model, form, x):
        # one reference, one version: the swap replaces the object whole
        p = self.params[model.encode()]
        return p.version, apply_params(p, form, x)

    def _reject(self, reason):
        self.rejects[reason] = self.rejects.get(reason, 0) + 1

    def _handle(self, frames):
        self.counters["received"] += 1
        if len(frames) != 2:
            return self._reject("framing")
        topic, payload = frames
        held = self.params.get(topic)
        if held is None:  # the SUB filter matched a prefix only
            if name_ok(topic, MODEL_MAX, TOPIC_CHARS):
                self.counters["unsubscribed"] += 1
            else:
                self._reject("bad_topic")
            return
        try:
            p = decode_params(topic, payload)
        except Reject as r:
            return self._reject(r.args[0])
        except NotParams as n:
            if n.args[0] != "alert":
                self.counters["other"] += 1
                return
            try:
                _, val = envelope(topic, payload)
                if "ts" in val and not is_number(val["ts"]):
                    raise Reject("key_type")
                if "ts" in val and not math.isfinite(val["ts"]):
                    raise Reject("bad_value")
                for k in ("severity", "kind", "message"):
                    if k in val and not isinstance(val[k], str):
                        raise Reject("key_type")
            except Reject as r:
                return self._reject(r.args[0])
            self.counters["alerts"] += 1
            if self.on_alert:
                self.on_alert(val)
            return
        if p.version <= held.version:
            self.counters["stale"] += 1
            return
        self.params[topic] = p  # the atomic swap
        self.counters["accepted"] += 1
        if self.on_params:
            self.on_params(p)

    def poll(self, timeout_ms):
        """Waits up to timeout_ms, then handles what is queued; returns the
        number of messages read."""
        n = 0
        if self.sock.poll(timeout_ms, zmq.POLLIN):
            while n < 1024:
                try:
                    frames = self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._handle(frames)
                n += 1
        return n


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
        client = Client(a.connect, a.model, print_params, print_alert,
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
