"""The Producer: the messages it writes (read back off a PULL socket), and
a real calibd that scores what it sends, of every output form, exactly as
the scores' formulas (calibd-protocol(7), Scores) give them; nothing lost
before calibd is up (PUSH); PUB waits for calibd's subscription."""
import math
import os
import time

import msgpack
import numpy as np
import pytest
import zmq

from calibd import MAX_BATCH, Producer

from conftest import LINGER, free_port


def brier(p, y):
    onehot = np.zeros_like(p)
    onehot[np.arange(len(y)), y] = 1
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_messages_on_the_wire():
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    with Producer("tcp://127.0.0.1:%d" % port, batch=1000, context=ctx) as p:
        assert p.predict("m-1", "a", probs=[0.25, 0.75], ts=1.7e9) == 1
        assert p.predict("m-1", np.arange(2500), logits=np.ones((2500, 3)), y=[1] * 2500) == 2500
        assert p.label("m-1", [7, 8], np.array([0, 2])) == 2
    msgs = [pull.recv_multipart() for _ in range(5)]
    ctx.destroy(0)
    bodies = [msgpack.unpackb(m[1], raw=False) for m in msgs]
    assert all(m[0] == b"m-1" for m in msgs)
    assert bodies[0] == {"v": 1, "type": "pred", "id": "a", "probs": [0.25, 0.75], "ts": 1.7e9}
    assert [b.get("n") for b in bodies[1:4]] == [1000, 1000, 500]
    b = bodies[3]
    assert b["k"] == 3 and b["id"][0] == 2000 and len(b["logits"]) == 8 * 500 * 3
    assert b["y"] == [1] * 500
    assert bodies[4] == {"v": 1, "type": "label", "n": 2, "id": [7, 8], "y": [0, 2]}


def test_shapes_and_ids_are_checked():
    ctx = zmq.Context()
    with Producer("tcp://127.0.0.1:1", linger=0, context=ctx) as p:
        with pytest.raises(ValueError):
            p.predict("m", [1, 2], logits=np.zeros((3, 2)))
        with pytest.raises(ValueError):
            p.predict("m", [1, 2], p=[0.5, 0.5], probs=[[0.5, 0.5]] * 2)
        with pytest.raises(ValueError):
            p.predict("m", -1, p=0.5)
        with pytest.raises(ValueError):
            p.predict("m", "x" * 65, p=0.5)
        with pytest.raises(ValueError):
            p.predict("bad topic", 1, p=0.5)
        with pytest.raises(ValueError):
            p.label("m", [1, 2], [1])
        with pytest.raises(ValueError):
            Producer("tcp://127.0.0.1:1", batch=MAX_BATCH + 1, context=ctx)
    ctx.term()


@pytest.mark.parametrize("float32", [False, True])
def test_every_form_scored(calibd, float32):
    rng = np.random.default_rng(11)
    n = 3000
    ids = np.arange(n)
    z = rng.normal(0, 2, size=(n, 4))
    q = softmax(rng.normal(0, 1, size=(n, 3)))
    pb = rng.uniform(0.01, 0.99, size=n)
    mean, var = rng.normal(0, 1, size=n), rng.uniform(0.5, 2, size=n)
    y4, y3 = rng.integers(0, 4, size=n), rng.integers(0, 3, size=n)
    yb, yg = rng.integers(0, 2, size=n), rng.normal(0, 1, size=n)
    with Producer(calibd.ep["ingest_pull"], batch=700, float32=float32, linger=LINGER) as p:
        p.predict("logits", ids, logits=z)
        p.predict("probs", ids, probs=q.tolist())  # lists of rows
        p.predict("binary", ids, p=pb)
        p.predict("gauss", ids, mean=mean, var=var)
        # the outcomes later, by id; a few rows one at a time
        p.label("logits", ids, y4)
        p.label("probs", ids[:-3], y3[:-3])
        for i in range(n - 3, n):
            p.label("probs", int(i), int(y3[i]))
        p.label("binary", ids, yb)
        p.label("gauss", ids, yg)
    s = calibd.wait(lambda s: all(s["models"].get(m, {}).get("scored") == n
                                  for m in ("logits", "probs", "binary", "gauss")))
    m = s["models"]
    cast = (lambda a: np.asarray(a, dtype=np.float32).astype(float)) if float32 else np.asarray
    want = {
        "logits": brier(softmax(cast(z)), y4),
        "probs": brier(cast(q), y3),
        "binary": brier(np.stack([1 - cast(pb), cast(pb)], axis=1), yb),
    }
    for name, w in want.items():
        assert math.isclose(m[name]["raw"]["brier"]["mean"], w, rel_tol=1e-9), name
    mu, v = cast(mean), cast(var)
    dss = float(np.mean((yg - mu) ** 2 / v + np.log(v)))
    assert math.isclose(m["gauss"]["raw"]["dss"]["mean"], dss, rel_tol=1e-9)
    assert all(sum(m[k]["rejected"].values()) == 0 for k in want)


def test_batches_split_to_fit_max_msg_size(calibd):
    """A batch whose message would pass calibd's max_msg_size (ZeroMQ would
    cut the connection and lose it) goes in smaller messages: 1,000 rows of
    K = 300 in float64 are 2.4 MB at the default batch, all scored."""
    rng = np.random.default_rng(5)
    n, k = 1000, 300
    z = rng.normal(0, 1, size=(n, k))
    y = rng.integers(0, k, size=n)
    with Producer(calibd.ep["ingest_pull"], linger=LINGER) as p:
        p.predict("wide", np.arange(n), logits=z, y=y)
        assert p.sent["messages"] == 4, p.sent  # halved twice: 250 rows, 600 KB each
    s = calibd.wait(lambda s: s["models"].get("wide", {}).get("scored") == n)
    assert math.isclose(s["models"]["wide"]["raw"]["brier"]["mean"], brier(softmax(z), y),
                        rel_tol=1e-9)
    with Producer(calibd.ep["ingest_pull"], linger=LINGER, max_msg_size=2048) as p:
        with pytest.raises(ValueError, match="message_size: one prediction packs to"):
            p.predict("wide", 5000, logits=z[0])  # 2.4 KB: cannot be split
        assert p.sent["messages"] == 0
    with pytest.raises(ValueError, match="max_msg_size"):
        Producer(calibd.ep["ingest_pull"], max_msg_size=100)


def test_nothing_lost_before_calibd_is_up(make_calibd):
    """PUSH queues what it sends until the connection is up: calibd started
    after the sends scores every one."""
    port = free_port()
    rng = np.random.default_rng(3)
    p = Producer("tcp://127.0.0.1:%d" % port, batch=100)
    p.predict("early", np.arange(2000), p=rng.uniform(0, 1, 2000), y=rng.integers(0, 2, 2000))
    d = make_calibd(ingest_pull="@tcp://127.0.0.1:%d" % port)
    d.wait(lambda s: s["models"].get("early", {}).get("scored") == 2000)
    p.close()


def test_readme_snippet(make_calibd):
    """The README's first block runs as written: the Producer's defaults
    reach a calibd's default PULL endpoint, and its 3 pairs are scored."""
    import re
    readme = os.path.join(os.path.dirname(__file__), "..", "README.md")
    block = re.search(r"```python\n(.*?)```", open(readme, encoding="utf-8").read(), re.S).group(1)
    d = make_calibd(ingest_pull="@tcp://127.0.0.1:7454")  # calibd's default
    exec(compile(block, "README.md", "exec"), {})
    d.wait(lambda s: s["models"].get("churn", {}).get("scored") == 3)


def test_http_mode_raises_each_rejection(make_calibd):
    """Producer("http://...") posts each message to calibd's HTTP ingest
    and raises Rejected with calibd's reason when it refuses records."""
    from calibd import Rejected
    d = make_calibd(conf="http_ingest = yes\n", http="127.0.0.1:0")
    base = d.ep["http"].rsplit("/metrics", 1)[0]
    with Producer(base) as p:
        p.predict("h", [1, 2], probs=[[0.5, 0.5], [0.2, 0.8]], y=[0, 1])
        with pytest.raises(Rejected) as e:
            p.predict("h", 3, probs=[0.5, 0.6], y=1)  # sums to 1.1
        assert e.value.reason == "prob_sum" and e.value.status == 400, e.value
        assert e.value.detail == "they sum to %.17g" % (0.5 + 0.6), e.value.detail
        with pytest.raises(Rejected) as e:
            p.predict("h", 4, probs=[0.2, 0.3, 0.5], y=1)  # K = 3, the model's is 2
        assert e.value.reason == "shape_mismatch", e.value
        p.label("h", 5, 1)  # a label waits: taken
    d.wait(lambda s: s["models"]["h"]["scored"] == 2 and s["models"]["h"]["labels"] == 1)


def test_dead_endpoint_raises():
    """Nothing lost without a word: a PUSH producer whose endpoint nothing
    takes raises at close, naming the endpoint and what was not delivered;
    one that sent nothing closes quietly."""
    port = free_port()
    p = Producer("tcp://127.0.0.1:%d" % port, linger=0.3)
    p.predict("m", [1, 2, 3], p=[0.1, 0.5, 0.9])
    p.label("m", 1, 1)
    with pytest.raises(ConnectionError) as e:
        p.close()
    assert "2 messages (3 predictions, 1 labels) not delivered" in str(e.value)
    assert "tcp://127.0.0.1:%d" % port in str(e.value)
    with pytest.raises(ConnectionError):
        with Producer("tcp://127.0.0.1:%d" % port, linger=0.3) as q:
            q.predict("m", "a", p=0.5)
    Producer("tcp://127.0.0.1:%d" % port, linger=0.3).close()


@pytest.mark.parametrize("listener", ["sub", "tcp"])
def test_wrong_listener_raises(listener):
    """A connection is not a delivery: PUSH to calibd's SUB port (a ZeroMQ
    peer of another type) or to a plain TCP listener (its HTTP port) makes
    a TCP connection and takes nothing; close() raises all the same."""
    import socket
    ctx = zmq.Context()
    if listener == "sub":
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        port = sub.bind_to_random_port("tcp://127.0.0.1")
    else:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        port = srv.getsockname()[1]
    p = Producer("tcp://127.0.0.1:%d" % port, linger=0.5)
    p.predict("m", [1, 2], p=[0.1, 0.9])
    with pytest.raises(ConnectionError, match="2 predictions"):
        p.close()
    if listener == "tcp":
        conn, _ = srv.accept()  # it did connect
        conn.close()
        srv.close()
    ctx.destroy(0)


def test_refused_inputs_not_coerced():
    """Inputs the protocol does not take are refused with calibd's reason
    name, never converted: a string outcome, ids of both kinds in a call."""
    port = free_port()
    p = Producer("tcp://127.0.0.1:%d" % port, linger=0)
    for call in (lambda: p.label("m", 1, "3"), lambda: p.label("m", [1, 2], ["3", 1]),
                 lambda: p.predict("m", 1, p=0.5, y="1"),
                 lambda: p.label("m", ["5", 6], [1, 0]),
                 lambda: p.predict("m", [1, "b"], p=[0.5, 0.5])):
        with pytest.raises(ValueError, match="^key_type: "):
            call()
    assert p.sent["messages"] == 0
    p.close()  # nothing sent: nothing to tell


def test_pub_waits_for_the_subscription(calibd):
    with Producer(calibd.ep["ingest"], socket="pub", linger=LINGER, subscription_wait=LINGER) as p:
        p.predict("pub", np.arange(1000), p=np.full(1000, 0.5), y=np.ones(1000, dtype=int))
    calibd.wait(lambda s: s["models"].get("pub", {}).get("scored") == 1000)


def test_pub_without_calibd_times_out():
    port = free_port()
    with Producer("tcp://127.0.0.1:%d" % port, socket="pub", subscription_wait=0.3,
                  linger=0) as p:
        with pytest.raises(TimeoutError):
            p.predict("m", 1, p=0.5)


def test_segments_on_the_wire_and_checked():
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    with Producer("tcp://127.0.0.1:%d" % port, batch=2, context=ctx) as p:
        p.predict("m", "a", p=0.5, seg={"country": "DE"})
        p.predict("m", [1, 2, 3], p=[0.1, 0.2, 0.3],
                  seg={"country": np.array(["DE", "FR", "S\u00e3o"]), "tier": "gold"})
        for bad in ({"a b": "x"}, {"a": ""}, {"a": "x\ny"}, {"a": 5}, {"k%d" % i: "x" for i in range(9)}):
            with pytest.raises(ValueError):
                p.predict("m", "b", p=0.5, seg=bad)
        with pytest.raises(ValueError):
            p.predict("m", [1, 2], p=[0.1, 0.2], seg={"a": ["x"]})
    bodies = [msgpack.unpackb(pull.recv_multipart()[1], raw=False) for _ in range(3)]
    ctx.destroy(0)
    assert bodies[0]["seg"] == {"country": "DE"}
    assert bodies[1]["seg"] == {"country": ["DE", "FR"], "tier": "gold"}
    assert bodies[2]["seg"] == {"country": ["S\u00e3o"], "tier": "gold"}


def test_segments_scored_per_value(calibd):
    """calibd splits the pairs by the segments the producer sent."""
    rng = np.random.default_rng(5)
    n = 4000
    z = rng.normal(0, 2, size=(n, 3))
    y = rng.integers(0, 3, size=n)
    country = np.where(np.arange(n) % 4 == 0, "DE", "FR")
    with Producer(calibd.ep["ingest_pull"], batch=500, linger=LINGER) as p:
        p.predict("segs", np.arange(n), logits=z, seg={"country": country})
        p.label("segs", np.arange(n), y)
    s = calibd.wait(lambda s: s["models"].get("segs", {}).get("scored") == n)
    segs = s["models"]["segs"]["segments"]["by_key"]["country"]["segments"]
    got = {v["value"]: v for v in segs}
    for c in ("DE", "FR"):
        sel = country == c
        assert got[c]["pairs"] == int(sel.sum())
        assert math.isclose(got[c]["raw"]["brier"]["mean"], brier(softmax(z[sel]), y[sel]),
                            rel_tol=1e-9)
    assert got[None]["other"] and got[None]["pairs"] == 0  # the other bucket


@pytest.fixture
def kafka_brokers():
    """librdkafka's mock cluster (tests/kafka/mock), topic "t" of 2
    partitions: its bootstrap servers."""
    import os
    import subprocess
    pytest.importorskip("confluent_kafka")
    mock = os.path.join(os.environ.get("BUILDDIR", ""), "tests", "kafka", "mock")
    if not os.access(mock, os.X_OK):
        pytest.skip("no tests/kafka/mock in BUILDDIR")
    proc = subprocess.Popen([mock, "t:2"], stdout=subprocess.PIPE, text=True)
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_kafka_messages_keyed_by_model(kafka_brokers):
    """socket="kafka": the same messages as the other sockets, each keyed
    by its model's name (so a model keeps to one partition), in order."""
    import confluent_kafka
    with Producer(kafka_brokers, socket="kafka", kafka_topic="t", batch=2) as p:
        assert p.predict("m-1", ["a", "b", "c"], p=[0.1, 0.2, 0.3]) == 3
        assert p.predict("m-2", 7, logits=[1.0, 2.0]) == 1
        assert p.label("m-1", ["a", "b", "c"], [0, 1, 1]) == 3
        assert p.flush(30) == 0
        assert p.sent["messages"] == 5
    c = confluent_kafka.Consumer({"bootstrap.servers": kafka_brokers, "group.id": "t",
                                  "auto.offset.reset": "earliest"})
    c.subscribe(["t"])
    got, deadline = [], time.monotonic() + 60
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.key(), m.partition(), msgpack.unpackb(m.value(), raw=False)))
    c.close()
    assert len(got) == 5, got
    by_model = {}
    for key, part, body in got:
        by_model.setdefault(key, []).append((part, body))
    assert sorted(by_model) == [b"m-1", b"m-2"]
    assert len({part for part, _ in by_model[b"m-1"]}) == 1  # one partition a model
    bodies = [b for _, b in by_model[b"m-1"]]
    assert [b["type"] for b in bodies] == ["pred", "pred", "label", "label"]
    assert bodies[0]["id"] == ["a", "b"] and bodies[1]["id"] == ["c"]
    assert bodies[2] == {"v": 1, "type": "label", "n": 2, "id": ["a", "b"], "y": [0, 1]}
    assert bodies[3] == {"v": 1, "type": "label", "n": 1, "id": ["c"], "y": [1]}
    assert by_model[b"m-2"][0][1] == {"v": 1, "type": "pred", "id": 7, "logits": [1.0, 2.0]}


def test_kafka_arguments_are_checked():
    pytest.importorskip("confluent_kafka")
    with pytest.raises(ValueError, match="kafka_topic"):
        Producer("127.0.0.1:1", socket="kafka", kafka_topic="a/b")
    with pytest.raises(ValueError, match="kafka_topic"):
        Producer("127.0.0.1:1", socket="kafka", kafka_topic="..")
    with pytest.raises(ValueError, match="brokers"):
        Producer(["127.0.0.1:1"], socket="kafka")
    with pytest.raises(ValueError, match="socket"):
        Producer("127.0.0.1:1", socket="kafka2")
