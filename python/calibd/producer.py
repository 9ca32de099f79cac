"""calibd.producer -- send a model's predictions and their outcomes to calibd
(calibd-protocol(7), "pred" and "label" messages), from lists or numpy
arrays, in batches.

Which socket loses what (calibd-protocol(7), INGEST):

- "push" (the default): a PUSH socket connected to calibd's ingest_pull
  endpoint (calibd.conf: ingest_pull = @tcp://127.0.0.1:7454). Messages
  sent before the connection is up wait in the socket's queue and go once
  it is; when the queue is full (sndhwm messages), send waits: nothing is
  dropped. close() waits up to `linger` seconds for the queue to drain.
- "pub": an XPUB socket connected to calibd's ingest endpoint (the SUB
  socket, default tcp://127.0.0.1:7450). A PUB socket drops what it sends
  before calibd's subscription reaches it, so the first send waits for
  that subscription, up to `subscription_wait` seconds (TimeoutError
  after). Later, a full queue drops, and so does a calibd that restarts.
- "kafka": a Kafka producer (confluent-kafka) on the brokers given as the
  endpoint ("host:port,..."), writing to `kafka_topic`, each message keyed
  by its model's name, so that a model's predictions and labels land on
  one partition, in order (calibd(8), KAFKA): the partition librdkafka's
  consistent_random partitioner (CRC-32 of the name) gives it, the one
  calibd expects unless its [kafka] partitioner says another (pass the
  same "partitioner" in kafka_config). The brokers keep what is
  sent: nothing is lost while calibd is down. close() waits up to `linger`
  seconds for every message to be acknowledged (RuntimeError if not).
"""

from __future__ import annotations

import math
import time
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence,
                    SupportsFloat, Tuple, Union, cast)

import msgpack
import numpy as np
import zmq

from . import _segments, _sockets
from ._errors import CalibdError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    # ids as predict() and label() take them: one, or the n of a batch
    _OneId = Union[str, int, np.integer[Any]]
    _Ids = Union[_OneId, Iterable[_OneId]]

__all__ = ["Producer", "MAX_BATCH", "MAX_MSG_SIZE", "MAX_SEG"]

MAX_BATCH = 65536      # rows of one batch message (protocol v1)
MAX_MSG_SIZE = 1 << 20  # calibd's default max_msg_size, bytes of one message
_ID_MAX = 64           # bytes of a string id
_MODEL_MAX = 128
_TOPIC_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                         b"0123456789._-:")

Id = Union[str, int]

MAX_SEG = 8            # segment keys of a prediction


def _seg_value(v: Any, key: str) -> str:
    """A segment value: 1..64 bytes of UTF-8, no control character."""
    if not _segments.value_ok(v):
        raise ValueError("seg[%r]: %r is not 1..64 bytes of UTF-8 without control characters"
                         % (key, v))
    return str(v)  # numpy's str_ too


def _seg(seg: Any, n: Optional[int]) -> Dict[str, Any]:
    """A checked seg map: keys of [A-Za-z0-9_.-], each to one value or, for
    n predictions (n not None), to one value for all or a sequence of n."""
    if not isinstance(seg, dict) or len(seg) > MAX_SEG:
        raise ValueError("seg: a dict of at most %d segment keys" % MAX_SEG)
    out: Dict[str, Any] = {}
    for key, v in seg.items():
        if not _segments.key_ok(key):
            raise ValueError("seg: key %r is not 1..64 of [A-Za-z0-9_.-]" % (key,))
        if n is not None and not isinstance(v, str):
            vals = [_seg_value(x, key) for x in v]
            if len(vals) != n:
                raise ValueError("seg[%r]: one value, or %d" % (key, n))
            out[key] = vals
        else:
            out[key] = _seg_value(v, key)
    return out


def _topic(model: str) -> bytes:
    t = model.encode("utf-8")
    if not 0 < len(t) <= _MODEL_MAX or any(c not in _TOPIC_CHARS for c in t):
        raise ValueError("model %r: not 1..128 bytes of [A-Za-z0-9._:-]" % model)
    return t


def _id(i: Any) -> Id:
    """An id as the protocol takes it: a string of 1..64 bytes or an
    unsigned integer (numpy integers included)."""
    if isinstance(i, bool):
        raise ValueError("an id is a string or an unsigned integer, not %r" % i)
    if isinstance(i, str):
        if not 0 < len(i.encode("utf-8")) <= _ID_MAX:
            raise ValueError("id %r: a string id has 1 to 64 bytes" % i)
        return i
    if isinstance(i, (int, np.integer)):
        if int(i) < 0:
            raise ValueError("id %r: an integer id is unsigned" % i)
        return int(i)
    raise ValueError("an id is a string or an unsigned integer, not %r" % (i,))


def _matrix(out: Any, n: int, form: str) -> Tuple[NDArray[np.float64], int]:
    """n rows of K >= 2 numbers (a 2-D array or a list of rows), and K."""
    a = np.asarray(out, dtype=float)
    if a.ndim == 2 and a.shape[0] == n and a.shape[1] >= 2:
        return a, int(a.shape[1])
    raise ValueError("%s: %d rows of K >= 2 numbers expected" % (form, n))


def _floats(x: ArrayLike, float32: bool) -> bytes:
    """A flat sequence of numbers as a bin of little-endian float64 (or
    float32)."""
    return np.asarray(x, dtype="<f4" if float32 else "<f8").tobytes(order="C")


def _outcome(v: Any) -> Union[int, float]:
    """A class index stays an integer, a regression outcome a float; a
    string is refused as calibd refuses it (key_type), never converted."""
    if isinstance(v, (str, bytes, np.str_, np.bytes_)):
        raise ValueError("key_type: y %r is a string; an outcome is a number (the class "
                         "index, or the regression outcome)" % (v,))
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    return float(v)


def _ids(ids: Iterable[Any]) -> List[Id]:
    """The ids of one call, all of one kind: string "5" and integer 5 are
    different ids that never join, so a call mixing them is refused."""
    out = [_id(i) for i in ids]
    if len({isinstance(i, str) for i in out}) > 1:
        raise ValueError("key_type: ids of mixed types in one call (strings and integers): "
                         "string \"5\" and integer 5 never join; send one type")
    return out


class Rejected(CalibdError, ValueError):
    """calibd refused records of a message sent over HTTP (the synchronous
    mode): reason is calibd's (calibd-protocol(7), the rejections), key and
    detail what was wrong, records and rejected the counts of the message."""

    def __init__(self, reason: str, key: Optional[str], detail: Optional[str],
                 records: int, rejected: int, status: int) -> None:
        super().__init__("%s: %d of %d records rejected%s%s (HTTP %d)" % (
            reason, rejected, records, ", key %r" % key if key else "",
            ": " + detail if detail else "", status))
        self.reason, self.key, self.detail = reason, key, detail
        self.records, self.rejected, self.status = records, rejected, status


class Producer:
    """Sends predictions and outcomes to calibd.

        p = Producer("tcp://127.0.0.1:7454")            # calibd's ingest_pull
        p.predict("churn", ids, probs=model.predict_proba(X))
        ...
        p.label("churn", ids, y)                         # when they are known
        p.close()

    A call with one id sends one prediction (the row form); a call with a
    sequence or array of n ids sends them in batch messages of at most
    `batch` rows. Outputs may be lists or numpy arrays: logits and probs n
    rows of K, p, mean and var n numbers. They travel as float64 (exact),
    or as float32 with float32=True (half the bytes). Values are checked by
    calibd, which counts what it refuses (calibctl status, "rejected");
    shapes and ids are checked here (ValueError).
    """

    def __init__(self, endpoint: Union[str, Sequence[str]] = "tcp://127.0.0.1:7454", *,
                 socket: str = "push", batch: int = 1000, float32: bool = False,
                 key: Optional[str] = None, server_key: Optional[str] = None,
                 linger: float = 10.0, subscription_wait: float = 10.0,
                 context: Optional[zmq.Context[Any]] = None, kafka_topic: str = "calibd",
                 kafka_config: Optional[Dict[str, Any]] = None,
                 token: Optional[str] = None, max_msg_size: int = MAX_MSG_SIZE) -> None:
        """endpoint: calibd's ingest_pull endpoint (socket="push") or ingest
        endpoint (socket="pub"); a leading ">" connects (the default), "@"
        binds. key, server_key: CURVE, this producer's key pair file
        (NAME.key_secret) and calibd's public key file (NAME.key), as
        `calibctl keygen` writes them. socket="kafka": endpoint is the
        brokers, kafka_topic the topic, kafka_config librdkafka's
        properties besides (SASL, TLS, ...). An endpoint "http://HOST:PORT"
        (or https) is calibd's HTTP ingest (http_ingest = yes): each message
        is a POST answered once calibd has taken it, and a rejection raises
        Rejected with calibd's reason; token: http_ingest_token_file's.
        max_msg_size: calibd's (calibd.conf(5)); a batch whose message would
        be larger is sent in smaller messages, since calibd cannot take it
        (ZeroMQ cuts the connection that sends it, HTTP answers 413), and a
        single prediction larger than that raises ValueError."""
        if not 1024 <= max_msg_size <= 1 << 31:
            raise ValueError("max_msg_size: 1024 to 2^31 bytes, as calibd's")
        self.max_msg_size = max_msg_size
        self._http: Optional[str] = None
        self._kafka: Any = None  # a confluent_kafka.Producer, socket="kafka"
        self.sent: Dict[str, int] = {"messages": 0, "predictions": 0, "labels": 0}
        if isinstance(endpoint, str) and endpoint.startswith(("http://", "https://")):
            # synchronous: each message a POST, answered once calibd took it
            self._http = endpoint.rstrip("/")
            self._token = token
            self.batch, self.float32, self.linger = batch, float32, linger
            if not 1 <= batch <= MAX_BATCH:
                raise ValueError("batch: 1 to %d rows" % MAX_BATCH)
            return
        if socket not in ("push", "pub", "kafka"):
            raise ValueError("socket: \"push\", \"pub\" or \"kafka\", not %r" % socket)
        if not 1 <= batch <= MAX_BATCH:
            raise ValueError("batch: 1 to %d rows" % MAX_BATCH)
        self.batch = batch
        self.float32 = float32
        self.subscription_wait = subscription_wait
        self.linger = linger
        if socket == "kafka":
            self._kafka_open(endpoint, kafka_topic, kafka_config)
            return
        self._own_ctx = context is None
        self.ctx = context or zmq.Context()
        self.sock = self.ctx.socket(zmq.PUSH if socket == "push" else zmq.XPUB)
        self._subscribed = socket == "push"
        self.sock.setsockopt(zmq.LINGER, int(linger * 1000) if math.isfinite(linger) else -1)
        self._endpoint = endpoint
        self._connected = False
        self._mon: Optional[zmq.Socket[bytes]] = None
        try:
            _sockets.curve(self.sock, key, server_key)
            if socket == "push":  # to know at close() whether anything took the messages
                # a ZMTP handshake with a PULL peer (libzmq >= 4.3): a TCP
                # connection alone may be to any listener, calibd's SUB or
                # HTTP port included, which takes nothing
                self._mon = self.sock.get_monitor_socket(
                    zmq.EVENT_HANDSHAKE_SUCCEEDED if zmq.zmq_version_info() >= (4, 3)
                    else zmq.EVENT_CONNECTED | zmq.EVENT_ACCEPTED)
            _sockets.attach(self.sock, endpoint)
        except Exception:
            if self._mon is not None:
                self.sock.disable_monitor()
                self._mon.close(0)
            self.sock.close(0)
            if self._own_ctx:
                self.ctx.term()
            raise

    def _kafka_open(self, brokers: Union[str, Sequence[str]], topic: str,
                    config: Optional[Dict[str, Any]]) -> None:
        try:
            import confluent_kafka
        except ImportError as e:  # pragma: no cover - optional dependency
            raise ImportError("socket=\"kafka\" needs confluent-kafka (Debian: "
                              "python3-confluent-kafka)") from e
        if not isinstance(brokers, str) or not brokers:
            raise ValueError("kafka: the endpoint is the brokers, \"host:port,...\"")
        if not topic or len(topic) > 249 or topic in (".", "..") or \
                not all(c.isascii() and (c.isalnum() or c in "._-") for c in topic):
            raise ValueError("kafka_topic: 1..249 characters of [A-Za-z0-9._-]")
        conf = dict(config or {})
        conf["bootstrap.servers"] = brokers
        # a retry must not put a label before its prediction, nor send a
        # message twice
        conf.setdefault("enable.idempotence", True)
        # the partitioner calibd expects by default ([kafka] partitioner):
        # a model's partition is the one its name hashes to
        conf.setdefault("partitioner", "consistent_random")
        self._kafka = confluent_kafka.Producer(conf)
        self._kafka_topic = topic
        self._kafka_failed: List[str] = []

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._kafka_failed.append(str(err))

    def _kafka_send(self, topic: bytes, payload: bytes) -> None:
        while True:
            try:
                self._kafka.produce(self._kafka_topic, key=topic, value=payload,
                                    on_delivery=self._delivered)
                break
            except BufferError:  # the local queue is full: wait for acknowledgements
                self._kafka.poll(0.1)
        self._kafka.poll(0)

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        except ConnectionError:
            if exc[0] is None:  # not over an exception already on its way
                raise

    def _post(self, topic: bytes, body: Dict[str, Any], payload: bytes) -> None:
        """One message to calibd's HTTP ingest; retried while calibd answers
        503 with Retry-After, up to `linger` seconds; a rejection raises."""
        import json
        import urllib.error
        import urllib.request
        route = "predictions" if body["type"] == "pred" else "labels"
        req = urllib.request.Request(
            "%s/v1/models/%s/%s" % (self._http, topic.decode(), route),
            data=payload, method="POST",
            headers={"Content-Type": "application/msgpack",
                     **({"Authorization": "Bearer " + self._token} if self._token else {})})
        deadline = time.monotonic() + (self.linger if math.isfinite(self.linger) else 1e9)
        while True:
            try:
                timeout = max(1.0, self.linger) if math.isfinite(self.linger) else None
                with urllib.request.urlopen(req, timeout=timeout) as r:
                    status, answer = r.status, r.read()
            except urllib.error.HTTPError as e:
                status, answer = e.code, e.read()
                try:  # calibd sends seconds; a proxy may send a date: no retry then
                    wait = float(e.headers.get("Retry-After") or "nan")
                except ValueError:
                    wait = math.nan
                if status == 503 and math.isfinite(wait) and time.monotonic() + wait < deadline:
                    time.sleep(wait)
                    continue
            try:
                a = json.loads(answer.decode("utf-8") or "{}")
            except ValueError:
                a = {}
            if status == 200 and not a.get("rejected"):
                return
            if status in (200, 400):
                raise Rejected(a.get("error", "rejected"), a.get("key"), a.get("detail"),
                               int(a.get("records", 0)), int(a.get("rejected", 0)), status)
            raise ConnectionError("%s: HTTP %d %s" % (req.full_url, status,
                                                      a.get("error", answer[:200])))

    def flush(self, timeout: Optional[float] = None) -> int:
        """socket="kafka": waits up to timeout seconds (None: `linger`) for
        what was sent to be acknowledged by the brokers; returns how many
        messages are not yet. ZeroMQ sockets: 0 (close() waits for them)."""
        if self._kafka is None:
            return 0
        t = self.linger if timeout is None else timeout
        return int(self._kafka.flush(t if math.isfinite(t) else -1))

    def close(self) -> None:
        """Closes the socket; PUSH waits up to `linger` seconds for what is
        queued to go, Kafka for every message to be acknowledged."""
        if self._http is not None:
            return  # every message was answered as it was sent
        if self._kafka is not None:
            left = self._kafka.flush(self.linger if math.isfinite(self.linger) else -1)
            failed, self._kafka_failed = self._kafka_failed, []
            if left or failed:
                raise RuntimeError("kafka: %d messages not acknowledged, %d refused%s" %
                                   (left, len(failed), ": " + failed[0] if failed else ""))
            return
        try:
            undelivered = self._push_connected() is False
        finally:
            if self._mon is not None:
                self.sock.disable_monitor()
                self._mon.close(0)
                self._mon = None
        self.sock.close(0 if undelivered else None)
        if self._own_ctx:
            self.ctx.term()
        if undelivered:
            raise ConnectionError(
                "%d messages (%d predictions, %d labels) not delivered: no ZeroMQ PULL "
                "socket took a connection to %s within linger = %g s (is calibd running, "
                "with its ingest_pull there? its default is @tcp://127.0.0.1:7454; its "
                "other ports take no PUSH)" % (
                    self.sent["messages"], self.sent["predictions"], self.sent["labels"],
                    self._endpoint, self.linger))

    def _push_connected(self) -> Optional[bool]:
        """PUSH with messages sent: whether a PULL peer took a connection (its
        handshake succeeded), waiting
        up to `linger` for one; None when that is not the question (PUB,
        nothing sent, or the monitor is gone)."""
        if self._mon is None or not self.sent["messages"]:
            return None
        deadline = time.monotonic() + (self.linger if math.isfinite(self.linger) else 1e9)
        while not self._connected:
            left = deadline - time.monotonic()
            if not self._mon.poll(max(0, int(left * 1000)), zmq.POLLIN):
                if left <= 0:
                    return False
                continue
            self._mon.recv_multipart()  # an event of the one kind it watches
            self._connected = True
        return True

    # ------------------------------------------------------------ sending

    def _wait_subscription(self) -> None:
        """XPUB: the first subscription message is calibd's."""
        deadline = time.monotonic() + self.subscription_wait
        while not self._subscribed:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sock.poll(int(math.ceil(left * 1000)), zmq.POLLIN):
                raise TimeoutError("calibd did not subscribe within %g s: is it running, "
                                   "and is this its ingest endpoint?" % self.subscription_wait)
            msg = self.sock.recv()
            self._subscribed = len(msg) > 0 and msg[0] == 1

    def _send(self, topic: bytes, body: Dict[str, Any], payload: Optional[bytes] = None) -> None:
        if payload is None:
            payload = msgpack.packb(body, use_bin_type=True)
        if len(payload) > self.max_msg_size:
            raise ValueError("message_size: one %s packs to %d bytes, over max_msg_size = %d "
                             "(calibd's; raise both)" % (
                                 "prediction" if body["type"] == "pred" else "label",
                                 len(payload), self.max_msg_size))
        if self._http is not None:
            self._post(topic, body, payload)
        elif self._kafka is not None:
            self._kafka_send(topic, payload)
        else:
            if not self._subscribed:
                self._wait_subscription()
            self.sock.send_multipart([topic, payload])
        self.sent["messages"] += 1

    def _send_rows(self, topic: bytes, make: Callable[[int, int], Dict[str, Any]], a: int,
                   b: int) -> None:
        """Rows a to b as one message made by make(a, b), or, where that
        message would be over max_msg_size, as halves of it, and so on."""
        body = make(a, b)
        payload = msgpack.packb(body, use_bin_type=True)
        if b - a > 1 and len(payload) > self.max_msg_size:
            m = (a + b) // 2
            self._send_rows(topic, make, a, m)
            self._send_rows(topic, make, m, b)
            return
        self._send(topic, body, payload)
        # counted as each message goes: a later one that raises leaves
        # these counted (close() names what was not delivered)
        self.sent["predictions" if body["type"] == "pred" else "labels"] += b - a

    def predict(self, model: str, ids: _Ids, *, logits: Optional[ArrayLike] = None,
                probs: Optional[ArrayLike] = None, p: Optional[ArrayLike] = None,
                mean: Optional[ArrayLike] = None, var: Optional[ArrayLike] = None,
                y: Optional[ArrayLike] = None, ts: Optional[ArrayLike] = None,
                seg: Optional[Dict[str, Any]] = None) -> int:
        """Sends predictions of model: one (ids a string or an integer) or n
        (ids a sequence or array). Exactly one output form: logits or probs
        (K numbers a prediction), p (a binary classifier's probability of
        class 1), or mean and var (a Gaussian). y: the outcomes when already
        known (scored at once, no label needed). ts: seconds since the epoch
        (one for all, or one a prediction); calibd's receive time when None.
        seg: the predictions' segments, a dict of up to 8 keys ("country")
        to a value ("DE") or, for n predictions, also to a sequence of n
        values; calibd then watches each segment's calibration
        (calibd(8), SEGMENTS). Returns the number of predictions sent."""
        topic = _topic(model)
        forms = [f for f, v in (("logits", logits), ("probs", probs), ("p", p),
                                ("mean", mean)) if v is not None]
        if len(forms) != 1 or (mean is None) != (var is None):
            raise ValueError("exactly one of logits, probs, p, or mean with var")
        form = forms[0]
        if isinstance(ids, (str, int, np.integer)):
            return self._predict_row(topic, _id(ids), form, logits, probs, p, mean, var, y, ts,
                                     None if seg is None else _seg(seg, None))
        idl = _ids(ids)
        n = len(idl)
        # n of each, from here: sequences or arrays, sized and sliced
        y_n, ts_n = cast(Any, y), cast(Any, ts)
        segs = None if seg is None else _seg(seg, n)
        cols: Dict[str, Any]
        if form in ("logits", "probs"):
            rows, k = _matrix(logits if form == "logits" else probs, n, form)
            cols = {form: rows}
        else:
            cols = {"p": p} if form == "p" else {"mean": mean, "var": var}
            for key, v in cols.items():
                if len(v) != n:
                    raise ValueError("%s: %d numbers expected, not %d" % (key, n, len(v)))
            k = 0
        if y_n is not None and len(y_n) != n:
            raise ValueError("y: %d outcomes expected, not %d" % (n, len(y_n)))
        ts_many = ts_n is not None and not isinstance(ts_n, (int, float))
        if ts_many and len(ts_n) != n:
            raise ValueError("ts: one time, or %d" % n)
        def make(a: int, b: int) -> Dict[str, Any]:
            msg: Dict[str, Any] = {"v": 1, "type": "pred", "n": b - a, "id": idl[a:b]}
            if k:
                msg["k"] = k
            for key, v in cols.items():
                msg[key] = _floats(v[a:b].ravel() if k else v[a:b], self.float32)
            if y_n is not None:
                msg["y"] = [_outcome(v) for v in y_n[a:b]]
            if ts_n is not None:
                msg["ts"] = [float(t) for t in ts_n[a:b]] if ts_many else float(ts_n)
            if segs:
                msg["seg"] = {key: v if isinstance(v, str) else v[a:b] for key, v in segs.items()}
            return msg
        for a in range(0, n, self.batch):
            self._send_rows(topic, make, a, min(n, a + self.batch))
        return n

    def _predict_row(self, topic: bytes, i: Id, form: str, logits: Any, probs: Any, p: Any,
                     mean: Any, var: Any, y: Any, ts: Any,
                     seg: Optional[Dict[str, Any]]) -> int:
        msg: Dict[str, Any] = {"v": 1, "type": "pred", "id": i}
        if form in ("logits", "probs"):
            row = logits if form == "logits" else probs
            row = [float(v) for v in np.asarray(row).ravel()]
            if len(row) < 2:
                raise ValueError("%s: K >= 2 numbers" % form)
            msg[form] = row
        elif form == "p":
            msg["p"] = float(p)
        else:
            msg["mean"], msg["var"] = float(mean), float(var)
        if y is not None:
            msg["y"] = _outcome(y)
        if ts is not None:
            msg["ts"] = float(ts)
        if seg:
            msg["seg"] = seg
        self._send(topic, msg)
        self.sent["predictions"] += 1
        return 1

    def label(self, model: str, ids: _Ids, y: ArrayLike, *,
              ts: Optional[SupportsFloat] = None) -> int:
        """Sends the outcomes of earlier predictions, by their ids: one (ids
        a string or an integer, y one outcome) or n. y: the class index
        (0 or 1 for a binary p), or the observed value of a regression.
        Returns the number of labels sent."""
        topic = _topic(model)
        if isinstance(ids, (str, int, np.integer)):
            msg: Dict[str, Any] = {"v": 1, "type": "label", "id": _id(ids), "y": _outcome(y)}
            if ts is not None:
                msg["ts"] = float(ts)
            self._send(topic, msg)
            self.sent["labels"] += 1
            return 1
        idl = _ids(ids)
        n = len(idl)
        y_n = cast(Any, y)  # n outcomes: a sequence or an array
        if len(y_n) != n:
            raise ValueError("y: %d outcomes expected, not %d" % (n, len(y_n)))
        def make(a: int, b: int) -> Dict[str, Any]:
            msg = {"v": 1, "type": "label", "n": b - a, "id": idl[a:b],
                   "y": [_outcome(v) for v in y_n[a:b]]}
            if ts is not None:
                msg["ts"] = float(ts)
            return msg
        for a in range(0, n, self.batch):
            self._send_rows(topic, make, a, min(n, a + self.batch))
        return n
