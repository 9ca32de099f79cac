#!/usr/bin/python3
"""make_seeds.py — writes the seed corpora of the fuzz targets into
tests/fuzz/corpus/TARGET/ and their list into tests/fuzz/corpus.am (the
files `make dist` ships). The seeds are checked in; run this again after a
change of the formats, then check the new seeds in:

    tests/fuzz/make_seeds.py [--calibd BUILD/calibd]

With --calibd, the snapshot seeds are made afresh by that calibd: it is fed
small models of every form, stopped, and its snapshot file taken (whole,
and each model's map for fuzz_snapshot's framed mode). Without, the snapshot
seeds already there are kept; those of earlier formats are kept under
formatN- names (format3-whole, ...). A crash input that fuzzing found goes into the
target's folder too (named crash-WHAT), and is listed the same way.

Needs python3-msgpack, and python3-zmq with --calibd (Debian's python3).
"""
import argparse
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def pk(obj):
    return msgpack.packb(obj, use_bin_type=True)


def f32(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def f64(*xs):
    return struct.pack("<%dd" % len(xs), *xs)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ------------------------------------------------------------------ protocol
# fuzz_protocol.c: messages of 1 byte topic length, topic, 2 bytes payload
# length (little-endian), payload; 0xff / 0xfe: one frame / three frames.

def msg(topic, payload):
    t = topic.encode()
    p = payload if isinstance(payload, bytes) else pk(payload)
    return bytes([len(t)]) + t + struct.pack("<H", len(p)) + p


def pred(**kw):
    return dict({"v": 1, "type": "pred"}, **kw)


def label(**kw):
    return dict({"v": 1, "type": "label"}, **kw)


def protocol():
    s = {}
    s["row_logits_then_label"] = (
        msg("m", pred(id="a1", logits=[1, -2, 0.5])) + msg("m", label(id="a1", y=2)))
    s["label_then_row_logits"] = (
        msg("m", label(id=7, y=0, ts=1.7e9)) + msg("m", pred(id=7, logits=[0.1, 0.2])))
    s["row_probs_bin32_inline_y"] = msg(
        "model-1", pred(id=42, probs=f32(0.2, 0.3, 0.5), k=3, y=2, ts=1700000000.5))
    s["row_probs_bin64"] = msg("m", pred(id="p", probs=f64(0.25, 0.75), k=2))
    s["row_logits_bin_no_k"] = (
        msg("m", pred(id="x", logits=[0, 1, 2])) + msg("m", pred(id="y", logits=f32(3, 2, 1)))
        + msg("m", label(id="y", y=1)))
    s["row_bin_ambiguous"] = msg("m", pred(id="a", logits=f32(1, 2, 3, 4)))
    s["row_binary"] = (
        msg("b", pred(id=1, p=0.7)) + msg("b", label(id=1, y=1))
        + msg("b", pred(id=2, p=0.1, y=0)))
    s["row_gaussian"] = (
        msg("g", pred(id="r1", mean=1.5, var=0.25)) + msg("g", label(id="r1", y=1.2))
        + msg("g", pred(mean=-3, var=2.0, y=-2.5)))
    n, k = 4, 3
    s["batch_logits_bin32"] = msg("batch", pred(
        n=n, k=k, id=["a", "b", "c", "d"], ts=[1.7e9, 1.7e9 + 1, 1.7e9 + 2, 1.7e9 + 3],
        logits=f32(*[float(i % 5) - 2 for i in range(n * k)]), y=[0, 1, 2, 1]))
    s["batch_probs_arrays_then_labels"] = (
        msg("batch", pred(n=3, k=2, id=[1, 2, 3], ts=1.7e9,
                          probs=[[0.1, 0.9], [0.5, 0.5], [1, 0]]))
        + msg("batch", label(n=3, id=[3, 2, 1], y=[0, 1, 1])))
    s["batch_binary_bin64"] = msg("bin", pred(n=3, id=["x", "y", "z"], p=f64(0.1, 0.5, 0.9),
                                             y=[0, 1, 1]))
    s["batch_gaussian"] = (
        msg("reg", pred(n=2, id=[10, 11], mean=[0.0, 1.0], var=f32(1.0, 2.0)))
        + msg("reg", label(n=2, id=[11, 10], y=[0.5, -0.5])))
    s["record_rejects"] = msg("m", pred(
        n=4, k=2, id=["ok", "", 5, "n"], probs=[[0.5, 0.5], [0.2, 0.8], [1.5, -0.5], [0.3, 0.3]],
        y=[0, 1, 2, 0]))
    s["shape_change_and_duplicates"] = (
        msg("s", pred(id="d", logits=[1, 2])) + msg("s", pred(id="d", logits=[1, 2]))
        + msg("s", pred(id="e", logits=[1, 2, 3])) + msg("s", label(id="d", y=0))
        + msg("s", label(id="d", y=1)) + msg("s", pred(id="f", p=0.5)))
    s["segments"] = (
        msg("s", pred(id="s1", p=0.7, seg={"country": "DE", "device": "S\u00e3o ios"}))
        + msg("s", label(id="s1", y=1))
        + msg("s", pred(n=3, id=[1, 2, 3], p=[0.1, 0.5, 0.9], y=[0, 1, 1],
                        seg={"country": ["DE", "FR", "DE"], "tier": "gold"}))
        + msg("s", pred(id="bad", p=0.5, seg={"a b": "x"}))
        + msg("s", pred(id="bad2", p=0.5, seg={"a": "\x85"})))
    s["many_models"] = b"".join(msg("m%d" % i, pred(id=i, p=0.5, y=i % 2)) for i in range(10))
    s["framing"] = (bytes([0xff]) + struct.pack("<H", 0) + bytes([0xfe]) + struct.pack("<H", 0)
                    + msg("bad topic!", pred(id=1, p=0.5)))
    s["whole_rejects"] = (
        msg("m", pk({"v": 1, "type": "pred", "id": 1, "p": 0.5}) + b"\x00")
        + msg("m", b"\x91" * 40 + b"\xc0") + msg("m", {"v": 2, "type": "pred"})
        + msg("m", {"v": 1, "type": "what"}) + msg("m", {1: 2})
        + msg("m", pred(id=1, p=0.5, logits=[1, 2]))
        + msg("m", pred(n=0, id=[], p=[])) + msg("m", b"\xdf\xff\xff\xff\xff"))
    for name, data in s.items():
        write("protocol", name, data)


# ------------------------------------------------------------------ pubmsg
# fuzz_pubmsg.c: 1 byte topic length, topic, payload.

def pub(topic, payload):
    t = topic.encode()
    return bytes([len(t)]) + t + (payload if isinstance(payload, bytes) else pk(payload))


def params(model, version, method, p, **kw):
    m = {"v": 1, "type": "params", "model": model, "ts": 1.7e9, "version": version,
         "method": method, "params": p, "published": 1.7e9 - 60, "n": 5000,
         "shadow_n": 1200, "before": {"brier": 0.41, "log": 0.9},
         "after": {"brier": 0.38, "log": 0.8}, "improvement": 0.03, "ci": [0.01, 0.05]}
    m.update(kw)
    return m


def pubmsg():
    s = {
        "params_temperature": pub("m", params("m", 3, "temperature", {"T": 1.8})),
        "params_platt": pub("bin", params("bin", 1, "platt", {"a": 1.1, "b": -0.2})),
        "params_variance": pub("reg", params("reg", 2, "variance", {"w": 1.5, "b": 0.01},
                                             before={"dss": 1.2}, after={"dss": 0.9})),
        "params_identity": pub("m", {"v": 1, "type": "params", "model": "m", "version": 0,
                                     "method": "identity", "params": {}}),
        "params_plugin": pub("m", params("m", 9, "ets", {"t": 1.3, "w0": 0.6, "w1": 0.3,
                                                         "w2": 0.1})),
        "params_improvement_map": pub("m", {"v": 1, "type": "params", "model": "m",
                                            "version": 4, "method": "temperature",
                                            "params": {"T": 0.7},
                                            "improvement": {"mean": None, "ci": [None, 0.1]}}),
        "alert": pub("m", {"v": 1, "type": "alert", "model": "m", "ts": 1.7e9,
                           "severity": "warning", "kind": "drift",
                           "message": "the calibrated Brier score drifted",
                           "values": {"brier": 0.4, "reference": 0.3, "e": None}}),
        "heartbeat": pub("m", {"v": 1, "type": "heartbeat", "ts": 1.7e9}),
        "model_mismatch": pub("m", params("other", 1, "temperature", {"T": 2.0})),
        "params_segments": pub("m", params("m", 5, "temperature", {"T": 1.2},
                                           segments={"country=DE": {"T": 2.0},
                                                     "device=S\u00e3o=x": {"T": 0.8}})),
    }
    for name, data in s.items():
        write("pubmsg", name, data)


# ------------------------------------------------------------------ control

def control():
    s = {
        "ping": pk({"v": 1, "cmd": "ping"}),
        "status": pk({"v": 1, "cmd": "status"}),
        "status_model": pk({"v": 1, "cmd": "status", "model": "logits"}),
        "status_gauss": pk({"cmd": "status", "v": 1, "model": "gauss"}),
        "status_unknown_model": pk({"v": 1, "cmd": "status", "model": "nope"}),
        "refit": pk({"v": 1, "cmd": "refit", "model": "binary"}),
        "refit_unshaped": pk({"v": 1, "cmd": "refit", "model": "waiting"}),
        "refit_no_model": pk({"v": 1, "cmd": "refit"}),
        "unknown_cmd": pk({"v": 1, "cmd": "shutdown"}),
        "bad_version": pk({"v": 2, "cmd": "ping"}),
        "not_a_map": pk(["v", 1]),
        "trailing": pk({"v": 1, "cmd": "ping"}) + b"\xc0",
    }
    for name, data in s.items():
        write("control", name, data)


# ------------------------------------------------------------------ cfg

MODEL_KEYS = """form = logits
k = 10
label_ttl = 600
max_pending = 5000
joined_memory = 5000
window = 1800
window_panes = 6
bins = 20
ring = 2000
reservoir = 1000
seed = 7
method = temperature
drift = yes
drift_alpha = 0.05
drift_min_effect = 0.02
drift_quantile = 0.95
drift_reference = 500
refit_interval = 3600
refit_min_samples = 200
refit_samples = 2000
auto_publish = no
gate_alpha = 0.05
min_improvement = 0.002
gate_dss_clip = 20
gate_max_samples = 5000
alert_brier = 0.3
alert_rbs = 0.5
alert_ece = 0.05
alert_dss = 3
alert_min_samples = 100
alert_hysteresis = 0.2
alert_cooldown = 60
label_starvation = 900
join_memory = 1048576
sample_memory = 4194304
segment_keys = 2
segment_values = 32
segment_alpha = 0.1
segment_min_effect = 0.01
segment_metrics = 5
segment_refit = yes
segment_refit_samples = 300
"""


def cfg():
    with open(os.path.join(TOP, "examples", "calibd.conf"), "rb") as f:
        write("cfg", "example", f.read())
    s = {
        "minimal": "[daemon]\nauto_models = no\n\n[model m1]\nform = logits\nk = 3\n",
        "defaults_every_key": "[defaults]\n" + MODEL_KEYS,
        "model_every_key": "[model classifier.v2]\n" + MODEL_KEYS.replace("k = 10", "k = 4"),
        "forms": ("[model b]\nform = binary\n[model g]\nform = gaussian\nmethod = variance\n"
                  "[model p]\nform = probs\nk = 5\n[model a]\nform = auto\n[model empty]\n"),
        "daemon": ("[daemon]\ningest = @tcp://127.0.0.1:7450, >tcp://10.0.0.5:7450\n"
                   "ingest_pull = @ipc:///tmp/calibd-pull\nsubscribe = fraud-, churn-\n"
                   "max_models = 16\nmemory_limit = 100000000\nmax_msg_size = 65536\n"
                   "rcvhwm = 1000\nsndhwm = 1000\ningest_memory = 1000000\ndrain_time = 0.01\n"
                   "tick = 0.5\nparams_interval = 5\nsnapshot_interval = 0\nhistory = 0\n"
                   "history_step = 30\nhttp = off\nhttp_timeout = 5\n"
                   "http_max_connections = 8\nhttp_max_per_address = 2\nhealth_timeout = 3\n"
                   "log_level = debug\nalert_exec = /bin/true\nalert_exec_timeout = 1\n"),
        "rejects": ("; a comment\n# another\n[daemon]\nnot_a_key = 1\n[nosuch]\nx = y\n"
                    "[model ok]\nk = 1\n"),
        "bad_name": "[model bad name!]\nform = logits\n",
        "refit_rule": "[defaults]\nrefit_min_samples = 500\nrefit_samples = 100\n",
    }
    for name, text in s.items():
        write("cfg", name, text.encode())


# ------------------------------------------------------------------ csv

def csv():
    cases = os.path.join(TOP, "tests", "ref", "cases")
    for name in sorted(os.listdir(cases)):
        if name.endswith(".csv"):
            with open(os.path.join(cases, name), "rb") as f:
                write("csv", name[:-4], f.read())
    s = {
        "probs3": "y,p0,p1,p2\n0,0.7,0.2,0.1\n2,0.1,0.1,0.8\n1,0.3,0.4,0.3\n",
        "logits_columns_shuffled": "z1,y,z0,extra\n2.5,1,-1,9\n0.1,0,0.3,9\n-3,0,2,9\n",
        "binary_crlf_blank": "y,p\r\n1,0.9\r\n\r\n0,0.2\r\n1,0.6\r\n",
        "gaussian_quoted": '"y","mean","var"\n1.5,"1.0",0.5\n-2,-1.5,2\n0,0,1e-3\n',
        "bad_row": "y,z0,z1\n0,1,2\n1,nan,2\n",
        "no_y": "z0,z1\n1,2\n",
        "two_forms": "y,p,mean,var\n0,0.5,1,1\n",
        # score --label-free with the file as its own reference: EM on an
        # output at the simplex's edge (SQUAREM once halved its step for ever)
        "edge_of_simplex": "z1,z0,y,z2\n00,10,2,-10\n",
    }
    for name, text in s.items():
        write("csv", name, text.encode())


# ------------------------------------------------------------------ snapshot

SNAP_CONF = """[daemon]
max_models = 16
snapshot_interval = 3600
[defaults]
ring = 16
reservoir = 8
bins = 4
window = 600
window_panes = 2
drift_reference = 100
max_pending = 16
joined_memory = 16
"""


def snapshot(calibd):
    import zmq
    tmp = tempfile.mkdtemp(prefix="calib-seeds.")
    try:
        conf = os.path.join(tmp, "calibd.conf")
        with open(conf, "w") as f:
            f.write(SNAP_CONF)
        state = os.path.join(tmp, "state")
        proc = subprocess.Popen([calibd, "-c", conf, "--ingest", "tcp://127.0.0.1:*",
                                 "--publish", "tcp://127.0.0.1:*", "--control",
                                 "tcp://127.0.0.1:*", "--http", "off", "--state-dir", state,
                                 "--log-level", "warn"])
        ep = os.path.join(state, "endpoints")
        for _ in range(200):
            if os.path.exists(ep) and os.path.getsize(ep) > 0:
                break
            time.sleep(0.05)
        ingest = [l.split()[1] for l in open(ep) if l.startswith("ingest ")][0]
        ctx = zmq.Context()
        sock = ctx.socket(zmq.PUB)
        sock.connect(ingest)
        time.sleep(1.0)  # the subscription reaches PUB

        def send(topic, obj):
            sock.send_multipart([topic.encode(), pk(obj)])

        for i in range(120):
            z = [((i * 7 + j * 3) % 11) / 3.0 - 1.5 for j in range(3)]
            send("logits3", pred(id=i, logits=z, ts=1.7e9 + i))
            send("binary", pred(id="b%d" % i, p=((i * 13) % 97 + 1) / 99.0, ts=1.7e9 + i))
            send("gauss", pred(id=i, mean=(i % 9) / 4.0, var=0.5 + (i % 5) / 10.0))
            send("probs4", pred(n=1, k=4, id=[i], probs=[[0.4, 0.3, 0.2, 0.1]]))
            if i < 112:  # the last ones wait for their labels
                send("logits3", label(id=i, y=(i * 5) % 3))
                send("binary", label(id="b%d" % i, y=i % 2))
                send("gauss", label(id=i, y=(i % 7) / 4.0))
                send("probs4", label(id=i, y=i % 4))
        send("labels-only", label(id="early", y=1))
        time.sleep(1.5)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        sock.close(0)
        ctx.term()
        with open(os.path.join(state, "snapshot"), "rb") as f:
            whole = f.read()
    finally:
        shutil.rmtree(tmp)
    # the header is one msgpack map; the body, the models' sections,
    # follows (tests/fixtures/snapfile.py, the tests' codec of the file)
    sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
    import snapfile
    head, models = snapfile.split(whole)
    body = whole[models[0][1]:] if models else b""
    write("snapshot", "whole", b"\x00" + whole)
    # a Kafka partition's snapshot (kafka.h): its header names the partition
    part = dict(head)
    part.pop("pad", None)
    part["kafka"] = {"topic": "preds", "partition": 3, "offset": 12345}
    write("snapshot", "kafka_partition", b"\x00" + pk(part) + body)
    # each model's map alone, framed in its section by the target
    for m, at, end in models:
        write("snapshot", "model_" + m.get("name", "x"),
              b"\x01" + whole[at + snapfile.HEAD:end])
    sys.stderr.write("snapshot: %d models, %d bytes (%s)\n" % (head["models"], len(whole),
                                                              calibd))


def history():
    # fuzz_snapshot.c, first byte 2: the page's history file (hist.c)
    nan = float("nan")
    pts = [[1.7e9 + 60 * i, 0.3 + i / 100, 0.25, 0.35, 0.28, nan if i == 2 else 0.2, 0.33,
            100 * i] for i in range(5)]
    h = {"format": "calibd-history", "v": 1, "step": 60,
         "series": {"m": pts, "reg.2": pts[:2], "empty": []}}
    write("snapshot", "history", b"\x02" + pk(h))


# ------------------------------------------------------------------ json

def json_seeds():
    """HTTP ingest bodies in JSON: a byte for the route (0 predictions, 1
    labels), then the body."""
    import json
    seeds = {
        "logits_batch": (0, {"v": 1, "type": "pred", "n": 2, "k": 3, "id": ["a", 7],
                             "logits": [[0.1, -2, 3.25], [1e-9, 0, 2]], "y": [2, 0]}),
        "probs_row": (0, {"v": 1, "type": "pred", "id": "p1", "probs": [0.2, 0.8], "ts": 1.7e9}),
        "binary_batch": (0, {"v": 1, "type": "pred", "n": 3, "id": [1, 2, 3], "p": [0.1, 0.5, 1]}),
        "gauss_row": (0, {"v": 1, "type": "pred", "id": 9, "mean": -1.5, "var": 0.25, "y": 0.3}),
        "labels_batch": (1, {"v": 1, "type": "label", "n": 2, "id": ["a", 7], "y": [1, 0]}),
        "label_row": (1, {"v": 1, "type": "label", "id": "p1", "y": 1}),
        "wrong_route": (0, {"v": 1, "type": "label", "id": "x", "y": 1}),
    }
    for name, (route, body) in seeds.items():
        write("json", name, bytes([route]) + json.dumps(body).encode())
    kserve = {
        "kserve_v1_probs": (2, {"predictions": [[0.2, 0.8], [0.5, 0.5]]}),
        "kserve_v1_classes": (2, {"predictions": [1, 0]}),
        "kserve_v2_probs": (2, {"model_name": "m", "id": "1", "outputs": [
            {"name": "label", "shape": [2], "datatype": "INT64", "data": [1, 0]},
            {"name": "probabilities", "shape": [2, 3], "datatype": "FP32",
             "data": [0.1, 0.2, 0.7, 0.3, 0.3, 0.4]}]}),
        "kserve_v2_logits": (3, {"outputs": [{"name": "z", "shape": [1, 3], "datatype": "FP64",
                                              "data": [1.5, -2, 0.25]}]}),
        "kserve_v2_p_named": (3 | 12, {"outputs": [{"name": "y", "shape": [3], "datatype": "FP32",
                                                    "data": [0.1, 0.9, 0.5]}]}),
    }
    for name, (route, body) in kserve.items():
        write("json", name, bytes([route]) + json.dumps(body).encode())
    write("json", "not_json", b"\x00{\"v\": 1, \"type\": ")
    write("json", "duplicate_key", b"\x01{\"v\": 1, \"v\": 1}")


# ------------------------------------------------------------------ corpus.am

def corpus_am():
    root = os.path.join(HERE, "corpus")
    files = []
    for target in sorted(os.listdir(root)):
        for name in sorted(os.listdir(os.path.join(root, target))):
            files.append("tests/fuzz/corpus/%s/%s" % (target, name))
    with open(os.path.join(HERE, "corpus.am"), "w") as f:
        f.write("# corpus.am — the seed corpora of tests/fuzz, for `make dist`.\n"
                "# Written by tests/fuzz/make_seeds.py: do not edit.\n"
                "EXTRA_DIST += \\\n")
        f.write(" \\\n".join("\t" + p for p in files) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calibd", help="a built calibd, to make the snapshot seeds afresh")
    a = ap.parse_args()
    protocol()
    pubmsg()
    control()
    cfg()
    csv()
    history()
    json_seeds()
    if a.calibd:
        snapshot(os.path.abspath(a.calibd))
    corpus_am()


if __name__ == "__main__":
    main()
