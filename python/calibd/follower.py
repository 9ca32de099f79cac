"""calibd.follower -- follow the recalibration parameters calibd publishes
("params" messages of calibd-protocol(7)) and apply them to a model's
outputs, in pure Python, as libcalib_client does (calib_client(3)).

Every message is validated as libcalib_client validates it; a bad one is
counted (Follower.rejects, by reason) and dropped, never raised.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import (TYPE_CHECKING, AbstractSet, Any, Callable, Dict, Iterable, List, Mapping,
                    Optional, Sequence, Tuple, Union, overload)

import msgpack
import numpy as np
import zmq

from . import _segments, _sockets
from ._errors import CalibdError

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["Follower", "Params", "Reject", "NotParams", "NotApplicable",
           "decode_params", "apply_params", "apply_rows",
           "LOGITS", "PROBS", "BINARY", "GAUSSIAN"]

PROTO_VERSION = 1
VERSION_WEIGHTS = 2    # "v" of a params message holding "prior_weights"
MAX_WEIGHTS = 64       # CALIB_PUBMSG_MAX_WEIGHTS
WEIGHT_MIN, WEIGHT_MAX = 1e-6, 1e6  # CALIB_PRIOR_WEIGHT_MIN, _MAX
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
    "location_scale": ("a", "b", "c"),
}

LOGITS, PROBS, BINARY, GAUSSIAN = "logits", "probs", "binary", "gaussian"


class Reject(CalibdError):
    """A malformed message; the argument is the reason (a counter label)."""


class NotParams(CalibdError):
    """A well-formed message of another type (alert, heartbeat, ...)."""


class Params:
    """One immutable set of parameters; swapped whole, so a reader that took
    a reference sees one version from start to end."""

    __slots__ = ("model", "version", "method", "names", "values", "segments", "weights",
                 "label_free")
    model: str
    version: int
    method: str
    names: Tuple[str, ...]
    values: Tuple[float, ...]
    segments: Tuple[Tuple[str, str, Tuple[float, ...]], ...]
    weights: Tuple[float, ...]
    label_free: bool

    def __init__(self, model: str, version: int = 0, method: str = "",
                 names: Iterable[str] = (), values: Iterable[float] = (),
                 segments: Iterable[Tuple[str, str, Tuple[float, ...]]] = (),
                 weights: Iterable[float] = (), label_free: bool = False) -> None:
        self.model = model
        self.version = version
        self.method = method
        self.names = tuple(names)
        self.values = tuple(values)
        # ((key, value, values), ...): a segment's own parameters, in the
        # message's order (the first a prediction has applies)
        self.segments = tuple(segments)
        # the prior correction of a label shift, applied after the map
        # (and a segment's): p'_k proportional to weights[k] * p_k
        self.weights = tuple(weights)
        self.label_free = bool(label_free)  # published before any label

    def for_segments(self, seg: Optional[Mapping[str, str]]) -> Params:
        """The parameters that apply to a prediction of segments seg (a dict
        of key to value, or None): those of the first listed segment it
        has, else these."""
        if seg:
            for key, value, values in self.segments:
                if seg.get(key) == value:
                    return Params(self.model, self.version, self.method, self.names, values,
                                  weights=self.weights, label_free=self.label_free)
        return self

    def line(self) -> str:
        """The line serving_node.c prints for this version: model, version,
        method, then name=value (%.17g) for each parameter."""
        kv = "".join(" %s=%.17g" % (n, v) for n, v in zip(self.names, self.values))
        if self.weights:  # a label-free prior correction, as serving_node.c prints it
            kv += " prior_weights=" + ",".join("%.17g" % w for w in self.weights)
        return "%s %d %s%s" % (self.model, self.version, self.method, kv)


# ---------------------------------------------------------------- decoding

def name_ok(b: bytes, maxlen: int, chars: AbstractSet[int]) -> bool:
    """Whether b is 1..maxlen bytes, each of chars: a topic is
    name_ok(model.encode(), MODEL_MAX, TOPIC_CHARS). Not an internal helper:
    examples/python/serving_node.py checks its --model names with it."""
    return 0 < len(b) <= maxlen and all(c in chars for c in b)


def _is_number(x: object) -> bool:
    # bool is an int in Python, but a msgpack true is not a number
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_uint(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _is_map(x: object) -> bool:
    # maps are unpacked as lists of pairs (object_pairs_hook=list) to see
    # duplicate and non-string keys; arrays are lists of anything else
    return isinstance(x, _Pairs)


class _Pairs(list[Tuple[Any, Any]]):  # list[], not List[]: no Generic among its bases
    """A msgpack map, as its (key, value) pairs in order."""


class _Ext:
    """An extension object, whatever its code (ExtType refuses negative
    ones): never a valid value of a known key."""

    def __init__(self, code: int, data: bytes) -> None:
        self.code, self.data = code, data


def _depth(x: object, d: int = 0) -> int:
    if isinstance(x, list):
        d += 1
        if d > MAX_DEPTH:
            return d
        items = (v for kv in x for v in kv) if _is_map(x) else x
        return max([d] + [_depth(v, d) for v in items])
    return d


def _unpack(payload: bytes) -> Any:
    try:
        obj = msgpack.unpackb(payload, raw=False, unicode_errors="surrogateescape",
                              strict_map_key=False, object_pairs_hook=_Pairs,
                              use_list=True, ext_hook=_Ext)
    except msgpack.ExtraData:
        raise Reject("trailing_bytes")
    except Exception:  # truncated, invalid, a count larger than the bytes
        raise Reject("bad_msgpack")
    if _depth(obj) > MAX_DEPTH:
        raise Reject("too_deep")
    return obj


ENVELOPE_KEYS = ("v", "type", "model", "version", "method", "params", "ts", "n",
                 "before", "after", "improvement", "ci", "severity", "kind",
                 "message", "segments", "prior_weights", "label_free")


def _envelope(topic: bytes, payload: bytes) -> Tuple[str, Dict[str, Any]]:
    """The keys every message shares; returns (type, known keys)."""
    if not name_ok(topic, MODEL_MAX, TOPIC_CHARS):
        raise Reject("bad_topic")
    root = _unpack(payload)
    if not _is_map(root):
        raise Reject("not_a_map")
    val: Dict[str, Any] = {}
    for k, v in root:
        if not isinstance(k, str):
            raise Reject("bad_key")
        if k in ENVELOPE_KEYS:
            if k in val:
                raise Reject("duplicate_key")
            val[k] = v
    v = val.get("v")
    if not _is_uint(v) or v not in (PROTO_VERSION, VERSION_WEIGHTS):
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


def _check_optional(val: Dict[str, Any]) -> None:
    """ts, n, before, after, improvement: optional, typed when present."""
    if "ts" in val:
        if not _is_number(val["ts"]):
            raise Reject("key_type")
        if not math.isfinite(val["ts"]):
            raise Reject("bad_value")
    if "n" in val and not _is_uint(val["n"]):
        raise Reject("key_type")
    for key in ("before", "after"):
        if key in val:
            m = val[key]
            if not _is_map(m) or any(not isinstance(k, str) or
                                     not (v is None or _is_number(v)) for k, v in m):
                raise Reject("key_type")
    # {"improvement": {"mean": x, "ci": [lo, hi]}}, or, as calibd sends it,
    # {"improvement": x, "ci": [lo, hi]}; numbers may be nil (unknown)
    def ci_ok(v: Any) -> bool:
        return v is None or (isinstance(v, list) and not _is_map(v) and len(v) == 2
                             and all(x is None or _is_number(x) for x in v))
    if "ci" in val and not ci_ok(val["ci"]):
        raise Reject("key_type")
    if "improvement" in val:
        m = val["improvement"]
        if not _is_map(m):
            if not (m is None or _is_number(m)):
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
            if k == "mean" and not (v is None or _is_number(v)):
                raise Reject("key_type")
            if k == "ci" and not ci_ok(v):
                raise Reject("key_type")


def decode_params(topic: bytes, payload: bytes) -> Params:
    """One params message (frames 0 and 1, bytes) -> Params, or raises
    Reject(reason) / NotParams."""
    mtype, val = _envelope(topic, payload)
    if mtype != "params":
        raise NotParams(mtype)
    for k in ("version", "method", "params"):
        if k not in val:
            raise Reject("missing_key")
    version, method, pmap = val["version"], val["method"], val["params"]
    if not _is_uint(version) or not isinstance(method, str) or not _is_map(pmap):
        raise Reject("key_type")
    if not name_ok(method.encode("utf-8", "surrogateescape"), METHOD_MAX, NAME_CHARS):
        raise Reject("bad_method")
    _check_optional(val)

    builtin = BUILTINS.get(method)
    if version == 0 and len(pmap) == 0:  # the identity, by any name
        return Params(val["model"], 0, method)
    names: List[str] = []
    values: List[float] = []
    if builtin is not None:
        found: Dict[str, float] = {}
        for k, v in pmap:
            if not isinstance(k, str):
                raise Reject("bad_params")
            if k in builtin:
                if k in found:
                    raise Reject("duplicate_key")
                if not _is_number(v):
                    raise Reject("key_type")
                found[k] = float(v)
        if len(found) != len(builtin):
            raise Reject("bad_params")
        names = list(builtin)
        values = [found[n] for n in builtin]
    else:  # a plugin's method: kept as sent, in the message's order
        if not 0 < len(pmap) <= MAX_PARAMS:
            raise Reject("bad_params")
        for k, v in pmap:
            if not isinstance(k, str) or not name_ok(
                    k.encode("utf-8", "surrogateescape"), PARAM_NAME_MAX, NAME_CHARS):
                raise Reject("bad_params")
            if k in names:
                raise Reject("duplicate_key")
            if not _is_number(v):
                raise Reject("key_type")
            names.append(k)
            values.append(float(v))
    _check_domain(method, values)
    return Params(val["model"], version, method, names, values,
                  _decode_segments(val.get("segments"), method, names),
                  _decode_weights(val), _decode_flag(val.get("label_free")))


def _decode_weights(val: Dict[str, Any]) -> Tuple[float, ...]:
    """"prior_weights": 2 to 64 numbers in [1e-6, 1e6], only in a message of
    "v": 2 (libcalib refuses them in a v1 message too)."""
    w = val.get("prior_weights")
    if w is None and "prior_weights" not in val:
        return ()
    if val["v"] != VERSION_WEIGHTS:
        raise Reject("bad_version")
    if not isinstance(w, list):
        raise Reject("key_type")
    if not 2 <= len(w) <= MAX_WEIGHTS:
        raise Reject("bad_params")
    if not all(_is_number(x) for x in w):
        raise Reject("key_type")
    weights = tuple(float(x) for x in w)
    if not all(WEIGHT_MIN <= x <= WEIGHT_MAX for x in weights):
        raise Reject("bad_value")
    return weights


def _decode_flag(x: object) -> bool:
    """An optional boolean."""
    if x is None:
        return False
    if not isinstance(x, bool):
        raise Reject("key_type")
    return x


def _check_domain(method: str, values: Sequence[float]) -> None:
    """Finite values in the built-in method's domain, or Reject."""
    if not all(math.isfinite(v) for v in values):
        raise Reject("bad_value")
    if method == "temperature" and not values[0] > 0:
        raise Reject("bad_value")
    if method == "variance" and not (values[0] > 0 and values[1] >= 0):
        raise Reject("bad_value")
    if method == "location_scale" and not (values[1] > 0 and values[2] > 0):
        raise Reject("bad_value")


SEG_MAX = 16           # CALIB_PUBMSG_MAX_SEGMENTS


def _decode_segments(smap: Any, method: str, names: Sequence[str]
                     ) -> Tuple[Tuple[str, str, Tuple[float, ...]], ...]:
    """"segments": {"key=value": {name: value}} in the message's method, as
    libcalib's calib_pubmsg_decode checks it."""
    if smap is None:
        return ()
    if not _is_map(smap) or len(smap) > SEG_MAX or (len(smap) and not names):
        raise Reject("bad_params")
    out: List[Tuple[str, str, Tuple[float, ...]]] = []
    seen = set()
    for kv, pm in smap:
        if not isinstance(kv, str) or "=" not in kv:
            raise Reject("bad_params")
        key, value = kv.split("=", 1)
        if not _segments.key_ok(key) or not _segments.value_ok(value):
            raise Reject("bad_params")
        if kv in seen:
            raise Reject("duplicate_key")
        seen.add(kv)
        if not _is_map(pm) or len(pm) != len(names):
            raise Reject("bad_params")
        found: Dict[str, float] = {}
        for k, v in pm:
            if k not in names or k in found:
                raise Reject("bad_params")
            if not _is_number(v):
                raise Reject("key_type")
            found[k] = float(v)
        values = [found[n] for n in names]
        _check_domain(method, values)
        out.append((key, value, tuple(values)))
    return tuple(out)


# ---------------------------------------------------------------- applying
# The maps of calib_recal(3), in pure Python, as libcalib computes them.

def _log_floor(p: float) -> float:
    """ln max(p, 1e-15), as libcalib's log_floor."""
    return math.log(p if p > LOG_FLOOR else LOG_FLOOR)


def _log1m_floor(p: float) -> float:
    """ln max(1 - p, 1e-15), with log1p where 1 - p would round."""
    return math.log1p(-p) if 1 - p > LOG_FLOOR else math.log(LOG_FLOOR)


def _binary_logit(p: float) -> float:
    """The logit of a binary p as every libcalib fit and apply sees it."""
    return _log_floor(p) - _log1m_floor(p)


def _sigmoid(u: float) -> float:
    if u >= 0:
        return 1 / (1 + math.exp(-u))
    e = math.exp(u)
    return e / (1 + e)


def _softmax_scaled(z: Sequence[float], beta: float) -> List[float]:
    zmax = max(z)
    e = [math.exp(beta * (x - zmax)) for x in z]
    s = sum(e)
    return [x / s for x in e]


def _check_input(form: str, x: Sequence[float]) -> None:
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


class NotApplicable(CalibdError):
    """The held method is unknown here, or does not take this form."""


def _prior_weigh(w: Sequence[float], form: str, out: List[float]) -> List[float]:
    """The prior correction after the map, as libcalib's calib_prior_weigh:
    p'_k = w_k p_k / sum_i w_i p_i (binary: two classes [1 - p, p])."""
    if form == GAUSSIAN or len(w) != (2 if form == BINARY else len(out)):
        raise NotApplicable("%d prior weights for a %s prediction of %d" % (
            len(w), form, len(out)))
    if form == BINARY:
        a = w[1] * out[0]
        den = a + w[0] * (1 - out[0])
        return [a / den] if den > 0 else out
    s = 0.0
    for wk, pk in zip(w, out):
        s += wk * pk
    if not (s > 0 and math.isfinite(s)):
        return out
    return [wk * pk / s for wk, pk in zip(w, out)]


def apply_params(p: Params, form: str, x: Sequence[float]) -> List[float]:
    """The recalibrated prediction: probabilities for logits or probs, p for
    binary, [mean, var] for gaussian. x is a list; it is not modified. Prior
    weights, if the version has them, follow the map."""
    if p.version == 0 or not p.weights:
        return _apply_map(p, form, x)
    if form == GAUSSIAN or len(p.weights) != (2 if form == BINARY else len(x)):
        _check_input(form, x)
        raise NotApplicable("%d prior weights for a %s prediction of %d" % (
            len(p.weights), form, len(x)))
    return _prior_weigh(p.weights, form, _apply_map(p, form, x))


def _apply_map(p: Params, form: str, xs: Sequence[float]) -> List[float]:
    """The method's map alone."""
    _check_input(form, xs)
    x = [float(v) for v in xs]
    if p.version == 0:  # the identity
        return _softmax_scaled(x, 1.0) if form == LOGITS else list(x)
    v = p.values
    if p.method == "temperature" and form != GAUSSIAN:
        beta = 1 / v[0]
        if form == LOGITS:
            return _softmax_scaled(x, beta)
        if form == PROBS:
            return _softmax_scaled([_log_floor(q) for q in x], beta)
        return [_sigmoid(beta * _binary_logit(x[0]))]
    if p.method == "platt" and form != GAUSSIAN:
        if form == BINARY:
            s = _binary_logit(x[0])
        elif len(x) != 2:
            raise NotApplicable("platt takes K = 2 only")
        elif form == LOGITS:
            # two finite logits can differ by more than a double holds:
            # kept finite, as libcalib does
            s = x[1] - x[0]
            if math.isinf(s):
                s = math.copysign(sys.float_info.max, s)
        else:
            s = _log_floor(x[1]) - _log_floor(x[0])
        u = v[0] * s + v[1]
        return [_sigmoid(u)] if form == BINARY else [_sigmoid(-u), _sigmoid(u)]
    if p.method == "variance" and form == GAUSSIAN:
        return [x[0], v[0] * x[1] + v[1]]
    if p.method == "location_scale" and form == GAUSSIAN:
        return [v[0] + v[1] * x[0], v[2] * x[1]]
    if p.method in BUILTINS:
        raise NotApplicable("%s does not handle %s" % (p.method, form))
    raise NotApplicable("method %s is unknown here" % p.method)


def _is_rows(x: Any) -> bool:
    if isinstance(x, np.ndarray):
        return x.ndim == 2
    return len(x) > 0 and isinstance(x[0], (list, tuple, np.ndarray))


@overload
def apply_rows(p: Params, form: str, x: NDArray[Any]) -> NDArray[np.float64]: ...


@overload
def apply_rows(p: Params, form: str, x: Sequence[float]) -> List[float]: ...


@overload
def apply_rows(p: Params, form: str, x: Sequence[Union[Sequence[float], NDArray[Any]]]
               ) -> List[List[float]]: ...


def apply_rows(p: Params, form: str, x: Any) -> Any:
    """apply_params on one prediction or on each row of a batch (a 2-D
    numpy array or a list of rows); numpy in, numpy out."""
    as_np = isinstance(x, np.ndarray)
    if form == BINARY and as_np and x.ndim == 1 and len(x) != 1:
        x = x.reshape(-1, 1)  # a vector of n p's
    if _is_rows(x):
        rows = [apply_params(p, form, [float(v) for v in row]) for row in x]
        return np.asarray(rows, dtype=float) if as_np else rows
    out = apply_params(p, form, [float(v) for v in x])
    return np.asarray(out, dtype=float) if as_np else out


# ---------------------------------------------------------------- the client

class Follower:
    """Follows calibd's "params" messages: a SUB socket, the newest
    parameters of each model followed, counters of what came and what was
    refused. poll() (or the thread start() runs) reads the socket; apply()
    and held() may be called from any thread: the parameters of a model are
    swapped whole, so one call sees one version."""

    def __init__(self, endpoints: Union[str, Sequence[str]], models: Union[str, Sequence[str]],
                 on_params: Optional[Callable[["Params"], None]] = None,
                 on_alert: Optional[Callable[[Dict[str, Any]], None]] = None,
                 key: Optional[str] = None, server_key: Optional[str] = None) -> None:
        """endpoints: calibd's PUB endpoint(s), "tcp://host:7451" (a leading
        ">" connects, "@" binds; bare, it connects). models: the names to
        follow (exact topics). on_params(Params) is called for each newer
        version, on_alert(dict) for each alert, on the polling thread. key,
        server_key: CURVE, this node's key pair file (NAME.key_secret) and
        calibd's public key file (NAME.key), as `calibctl keygen` writes
        them; both or neither."""
        if isinstance(models, str):
            models = [models]
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.MAXMSGSIZE, MAX_MSG_SIZE)
        self.params: Dict[bytes, Params] = {}
        try:
            _sockets.curve(self.sock, key, server_key)
            for m in models:
                if not name_ok(m.encode("utf-8", "surrogateescape"), MODEL_MAX, TOPIC_CHARS):
                    raise ValueError("model %r: not 1..128 bytes of [A-Za-z0-9._:-]" % m)
                self.params[m.encode()] = Params(m)
                self.sock.setsockopt(zmq.SUBSCRIBE, m.encode())
            _sockets.attach(self.sock, endpoints)
        except Exception:
            self.sock.close(0)
            self.ctx.term()
            raise
        self.on_params = on_params
        self.on_alert = on_alert
        self.counters = {"received": 0, "accepted": 0, "stale": 0, "alerts": 0,
                         "other": 0, "unsubscribed": 0}
        self.rejects: Dict[str, int] = {}

    def __enter__(self) -> "Follower":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Polls the socket in a background thread until stop() or close()."""
        if self._thread is not None:
            return
        self._stop.clear()

        def run() -> None:
            while not self._stop.is_set():
                self.poll(100)

        self._thread = threading.Thread(target=run, name="calibd-follower", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ends the thread start() began (a poll under way finishes first)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        """Ends the thread, if any, and closes the socket."""
        self.stop()
        self.sock.close(0)
        self.ctx.term()

    def held(self, model: str) -> Params:
        """The parameters held for model now (version 0: the identity)."""
        return self.params[model.encode()]

    def wait_version(self, model: str, version: int, timeout: float) -> bool:
        """Polls (unless the thread does) until model holds at least version,
        at most timeout seconds; whether it does."""
        deadline = time.monotonic() + timeout
        while self.held(model).version < version:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._thread is None:
                self.poll(int(math.ceil(min(left, 0.1) * 1000)))
            else:
                time.sleep(min(left, 0.01))
        return True

    @overload
    def apply(self, model: str, form: str, x: NDArray[Any],
              seg: Optional[Mapping[str, str]] = None) -> Tuple[int, NDArray[np.float64]]: ...

    @overload
    def apply(self, model: str, form: str, x: Sequence[float],
              seg: Optional[Mapping[str, str]] = None) -> Tuple[int, List[float]]: ...

    @overload
    def apply(self, model: str, form: str, x: Sequence[Union[Sequence[float], NDArray[Any]]],
              seg: Optional[Mapping[str, str]] = None) -> Tuple[int, List[List[float]]]: ...

    def apply(self, model: str, form: str, x: Any,
              seg: Optional[Mapping[str, str]] = None) -> Tuple[int, Any]:
        """(version, output): the parameters held for model applied to x, one
        prediction (a sequence or a 1-D numpy array) or, as a 2-D numpy array
        or a list of rows, one per row. seg: the prediction's segments (a
        dict of key to value, as the producer sends them): the parameters
        calibd published for the first listed segment it has apply instead
        of the model's (for every row of a batch). form: "logits", "probs", "binary"
        (x = [p]) or "gaussian" (x = [mean, var]). The output is
        probabilities for logits and probs, [p] for binary, [mean, var] for
        gaussian; a numpy array when x is one. Raises ValueError for an
        input libcalib refuses, NotApplicable for a method that does not
        take the form (or is a plugin's, unknown here)."""
        # one reference, one version: the swap replaces the object whole
        p = self.params[model.encode()].for_segments(seg)
        return p.version, apply_rows(p, form, x)

    def _reject(self, reason: str) -> None:
        self.rejects[reason] = self.rejects.get(reason, 0) + 1

    def _handle(self, frames: List[bytes]) -> None:
        self.counters["received"] += 1
        if len(frames) != 2:
            self._reject("framing")
            return
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
            self._reject(r.args[0])
            return
        except NotParams as n:
            if n.args[0] != "alert":
                self.counters["other"] += 1
                return
            try:
                _, val = _envelope(topic, payload)
                if "ts" in val and not _is_number(val["ts"]):
                    raise Reject("key_type")
                if "ts" in val and not math.isfinite(val["ts"]):
                    raise Reject("bad_value")
                for k in ("severity", "kind", "message"):
                    if k in val and not isinstance(val[k], str):
                        raise Reject("key_type")
            except Reject as r:
                self._reject(r.args[0])
                return
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

    def poll(self, timeout_ms: int) -> int:
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


