"""The Follower's decoding and apply: the same results as libcalib's
calib_recal_apply_* (through ctypes), the same validation as
libcalib_client, and a real calibd's parameters followed."""
import ctypes
import math
import random
import subprocess

import msgpack
import numpy as np
import pytest

import calibd
from calibd import (BINARY, GAUSSIAN, LOGITS, PROBS, CalibdError, Follower, NotApplicable,
                    NotParams, Params, Producer, Reject, Rejected, apply_params, apply_rows,
                    decode_params)
from calibd.follower import _prior_weigh
from conftest import LINGER

FORMS = {LOGITS: 0, PROBS: 1, BINARY: 2, GAUSSIAN: 3}


def c_apply(lib, method, values, form, x):
    fn = getattr(lib, "calib_recal_apply_" + method)
    k = len(x) if form in (LOGITS, PROBS) else 2
    arr = (ctypes.c_double * len(x))(*x)
    out = (ctypes.c_double * len(x))()
    par = (ctypes.c_double * len(values))(*values)
    assert fn(par, FORMS[form], k, arr, out) == 0
    return list(out)


def vectors(seed=7, n=300):
    """Random inputs of every form and parameters of every method."""
    r = random.Random(seed)
    for _ in range(n):
        k = r.choice([2, 3, 10])
        z = [r.gauss(0, 3) for _ in range(k)]
        e = [math.exp(v - max(z)) for v in z]
        probs = [v / sum(e) for v in e]
        T = math.exp(r.uniform(-1.5, 1.5))
        a, b = r.uniform(0.2, 3), r.uniform(-2, 2)
        yield "temperature", [T], LOGITS, z
        yield "temperature", [T], PROBS, probs
        yield "temperature", [T], BINARY, [r.choice([0.0, 1.0, 1e-300, r.random()])]
        if k == 2:
            yield "platt", [a, b], LOGITS, z
            yield "platt", [a, b], PROBS, probs
        yield "platt", [a, b], BINARY, [r.choice([0.0, 1.0, r.random()])]
        yield "variance", [a, abs(b)], GAUSSIAN, [r.gauss(0, 5), r.uniform(1e-3, 9)]
        yield "location_scale", [b, a, r.uniform(0.1, 4)], GAUSSIAN, \
            [r.gauss(0, 5), r.uniform(1e-3, 9)]
    # logits whose difference overflows a double: kept finite by both
    yield "platt", [0.0, 0.5], LOGITS, [-1.5e308, 1.5e308]
    yield "platt", [2.0, 0.5], LOGITS, [1.5e308, -1.5e308]


def test_apply_matches_libcalib(libcalib):
    names = {"temperature": ("T",), "platt": ("a", "b"), "variance": ("w", "b"),
             "location_scale": ("a", "b", "c")}
    worst = 0.0
    for method, values, form, x in vectors():
        p = Params("m", 1, method, names[method], values)
        got = apply_params(p, form, x)
        want = c_apply(libcalib, method, values, form, x)
        if form == BINARY:
            want = want[:1]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            worst = max(worst, abs(g - w) / max(1.0, abs(w)))
    # libcalib sums the exponentials four lanes at a time with its own exp
    # kernel (within 1 ulp of glibc's): an ulp apart at most
    assert worst <= 1e-15, worst


def test_prior_weights_match_libcalib(libcalib):
    """A label-free version's prior weights after the map: bit for bit what
    libcalib_client computes (the map, then calib_prior_weigh)."""
    names = {"temperature": ("T",), "platt": ("a", "b")}
    r = random.Random(11)
    checked, worst = 0, 0.0
    for method, values, form, x in vectors(seed=3, n=200):
        if form == GAUSSIAN:
            continue
        k = 2 if form == BINARY else len(x)
        w = [math.exp(r.uniform(-3, 3)) for _ in range(k)]
        p = Params("m", 4, method, names[method], values, weights=w, label_free=True)
        got = apply_params(p, form, x)
        mapped = c_apply(libcalib, method, values, form, x)
        out = (ctypes.c_double * len(mapped))(*mapped)
        cw = (ctypes.c_double * k)(*w)
        of = FORMS[PROBS] if form == LOGITS else FORMS[form]
        assert libcalib.calib_prior_weigh(cw, k, of, k, out) == 0
        want = list(out)[:1] if form == BINARY else list(out)
        # the weighing alone is exact; the maps are an ulp apart at most
        # (test_apply_matches_libcalib), which the weighing keeps small
        mine = _prior_weigh(w, PROBS if form == LOGITS else form,
                           mapped[:1] if form == BINARY else mapped)
        assert mine == want, (method, form, x, w)
        for g, c in zip(got, want):
            worst = max(worst, abs(g - c) / max(1.0, abs(c)))
        checked += 1
    assert checked > 500 and worst <= 4e-15, worst
    # weights of another count, or for a Gaussian: refused, never misapplied
    p = Params("m", 4, "temperature", ("T",), (1.5,), weights=(2.0, 0.5, 1.0))
    with pytest.raises(NotApplicable):
        apply_params(p, LOGITS, [1.0, 2.0])
    with pytest.raises(NotApplicable):
        apply_params(p, BINARY, [0.3])
    v = Params("m", 4, "variance", ("w", "b"), (1.5, 0.0), weights=(2.0, 0.5))
    with pytest.raises(NotApplicable):
        apply_params(v, GAUSSIAN, [0.0, 1.0])
    # a segment's parameters keep the version's weights
    s = Params("m", 4, "temperature", ("T",), (1.5,), segments=(("c", "DE", (3.0,)),),
               weights=(2.0, 0.5)).for_segments({"c": "DE"})
    assert s.values == (3.0,) and s.weights == (2.0, 0.5)


def test_decode_prior_weights():
    """"prior_weights" only in a "v": 2 message, 2 to 64 numbers in
    [1e-6, 1e6], as libcalib's decoder checks them."""
    p = decode_params(b"m", params_msg("m", v=2, prior_weights=[0.5, 2.0], label_free=True))
    assert p.weights == (0.5, 2.0) and p.label_free
    p = decode_params(b"m", params_msg("m", v=2))
    assert p.weights == () and not p.label_free
    cases = {
        "bad_version": params_msg("m", prior_weights=[0.5, 2.0]),
        "bad_params": params_msg("m", v=2, prior_weights=[0.5]),
        "bad_value": params_msg("m", v=2, prior_weights=[0.5, 0.0]),
        "key_type": params_msg("m", v=2, prior_weights=[0.5, "x"]),
    }
    for reason, payload in cases.items():
        with pytest.raises(Reject) as e:
            decode_params(b"m", payload)
        assert e.value.args[0] == reason, reason
    for bad in ([0.5, 2e6], [0.5, float("nan")]):
        with pytest.raises(Reject) as e:
            decode_params(b"m", params_msg("m", v=2, prior_weights=bad))
        assert e.value.args[0] == "bad_value"
    with pytest.raises(Reject) as e:
        decode_params(b"m", params_msg("m", v=2, prior_weights=[0.5, 2.0], label_free=1))
    assert e.value.args[0] == "key_type"


def test_apply_rows_and_numpy():
    p = Params("m", 3, "temperature", ("T",), (2.0,))
    z = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]])
    out = apply_rows(p, LOGITS, z)
    assert isinstance(out, np.ndarray) and out.shape == (2, 3)
    for row, o in zip(z, out):
        e = np.exp(row / 2 - max(row / 2))
        assert np.allclose(o, e / e.sum(), rtol=1e-15, atol=0)
    # a vector of binary p's is a batch
    ps = apply_rows(p, BINARY, np.array([0.1, 0.5, 0.9]))
    assert ps.shape == (3, 1) and abs(ps[1, 0] - 0.5) < 1e-15
    # lists in, lists out; the identity returns softmax of logits
    ident = Params("m")
    assert apply_rows(ident, PROBS, [0.25, 0.75]) == [0.25, 0.75]
    with pytest.raises(NotApplicable):
        apply_rows(Params("m", 1, "variance", ("w", "b"), (2.0, 0.0)), LOGITS, [1.0, 2.0])
    with pytest.raises(ValueError):
        apply_rows(p, PROBS, [0.5, 0.6])  # does not sum to 1


def params_msg(model, **kw):
    m = {"v": 1, "type": "params", "model": model, "version": 2, "method": "temperature",
         "params": {"T": 1.5}}
    m.update(kw)
    return msgpack.packb(m, use_bin_type=True)


def test_decode_validates_like_libcalib_client():
    p = decode_params(b"m", params_msg("m"))
    assert (p.version, p.method, p.values) == (2, "temperature", (1.5,))
    cases = {
        "model_mismatch": params_msg("other"),
        "bad_value": params_msg("m", params={"T": 0.0}),
        "bad_params": params_msg("m", params={"a": 1.0}),
        "bad_version": msgpack.packb({"v": 3, "type": "params"}),
        "trailing_bytes": params_msg("m") + b"\x00",
        "bad_msgpack": b"\xc1",
    }
    for reason, payload in cases.items():
        with pytest.raises(Reject) as e:
            decode_params(b"m", payload)
        assert e.value.args[0] == reason


def test_exceptions_share_a_base():
    """CalibdError is the base of the package's exceptions, each raised as
    the package raises it; Rejected stays a ValueError."""
    assert "CalibdError" in calibd.__all__ and calibd.CalibdError is CalibdError

    def rejected():  # what Producer raises for an HTTP 400 (test_producer.py)
        raise Rejected("prob_sum", "probs", "they sum to 1.1", 1, 1, 400)

    raised = []
    for call in (lambda: decode_params(b"m", b"\xc1"),
                 lambda: decode_params(b"m", msgpack.packb({"v": 1, "type": "heartbeat"})),
                 lambda: apply_params(Params("m", 1, "isotonic", ("x",), (1.0,)), PROBS,
                                      [0.5, 0.5]),
                 rejected):
        with pytest.raises(CalibdError) as e:
            call()
        raised.append(e.value)
    assert [type(e) for e in raised] == [Reject, NotParams, NotApplicable, Rejected]
    assert raised[0].args == ("bad_msgpack",) and raised[1].args == ("heartbeat",)
    # their other bases stay: an `except ValueError` still takes Rejected
    assert isinstance(raised[3], ValueError) and not issubclass(CalibdError, ValueError)
    assert str(raised[3]) == \
        "prob_sum: 1 of 1 records rejected, key 'probs': they sum to 1.1 (HTTP 400)"


def test_segment_parameters():
    """"segments" decoded as libcalib reads them; the first listed segment a
    prediction has applies, else the model's parameters."""
    p = decode_params(b"m", params_msg("m", segments={"country=DE": {"T": 3.0},
                                                       "device=S\u00e3o=x": {"T": 0.5}}))
    assert p.segments == (("country", "DE", (3.0,)), ("device", "S\u00e3o=x", (0.5,)))
    assert p.for_segments({"device": "S\u00e3o=x", "country": "DE"}).values == (3.0,)
    assert p.for_segments({"device": "S\u00e3o=x"}).values == (0.5,)
    assert p.for_segments({"country": "FR"}) is p and p.for_segments(None) is p
    z = [2.0, 0.5, -1.0]
    want = apply_params(Params("m", 2, "temperature", ["T"], [3.0]), LOGITS, z)
    assert apply_params(p.for_segments({"country": "DE"}), LOGITS, z) == want
    cases = {
        "bad_params": [{"countryDE": {"T": 1.0}}, {"a b=x": {"T": 1.0}}, {"a=": {"T": 1.0}},
                       {"a=x": {"U": 1.0}}, {"a=x": {}}, 3,
                       {"k%d=x" % i: {"T": 1.0} for i in range(17)}],
        "bad_value": [{"a=x": {"T": -1.0}}],
        "key_type": [{"a=x": {"T": "x"}}],
    }
    for reason, segs in cases.items():
        for seg in segs:
            with pytest.raises(Reject) as e:
                decode_params(b"m", params_msg("m", segments=seg))
            assert e.value.args[0] == reason, seg


def test_follows_a_real_calibd(make_calibd):
    d = make_calibd()
    with Producer(d.ep["ingest_pull"], linger=LINGER) as prod, \
            Follower(d.ep["publish"], ["m"]) as f:
        f.start()
        # overconfident logits: the labels come from softmax(z / 2)
        rng = np.random.default_rng(5)

        def draw(n):
            z = rng.normal(0, 3, size=(n, 3))
            q = np.exp(z / 2 - (z / 2).max(axis=1, keepdims=True))
            q /= q.sum(axis=1, keepdims=True)
            return z, np.array([rng.choice(3, p=row) for row in q])

        z, y = draw(4000)
        prod.predict("m", np.arange(4000), logits=z, y=y)
        d.wait(lambda s: s["models"].get("m", {}).get("scored") == 4000)
        try:
            d.ctl("refit", "m")
        except subprocess.CalledProcessError as e:
            # the miscalibration trigger may have started a refit first
            assert "running" in e.stdout or "shadow" in e.stdout, e.stdout + e.stderr
        # the gate passes the candidate on fresh pairs: more of the stream
        # until it is published, a batch ahead of what calibd has scored at
        # most (a bound on calibd's pairs, not on how fast it takes them)
        i = 4000
        while not f.wait_version("m", 1, 0.2):
            m = d.status()["models"]["m"]
            assert m["scored"] < 400000, m["loop"]
            if i - m["scored"] <= 2000:
                zz, yy = draw(2000)
                prod.predict("m", np.arange(i, i + 2000), logits=zz, y=yy)
                i += 2000
        p = f.held("m")
        assert p.method == "temperature" and 1.5 < p.values[0] < 2.6
        version, out = f.apply("m", LOGITS, z[:5])
        assert version == p.version and out.shape == (5, 3)
        e = np.exp(z[:5] / p.values[0] - (z[:5] / p.values[0]).max(axis=1, keepdims=True))
        assert np.allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-13, atol=0)
        assert f.counters["accepted"] >= 1 and not f.rejects
