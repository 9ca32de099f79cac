"""Fixtures of the calibd package's tests: a real calibd (CALIBD, the
binary of a build, as `make check` sets it) with its own state directory
and endpoints, and libcalib (BUILDDIR/.libs/libcalib.so) through ctypes."""
import ctypes
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest


# how many times longer than on a quiet machine anything may take here
# (tests/integ/python.sh passes lib.sh's TIME_SCALE): it scales ceilings
# and the producers' linger, never a duration a test waits out
SCALE = float(os.environ.get("TIME_SCALE", "1"))
LINGER = 10.0 * SCALE


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Calibd:
    """A calibd on ports of its own; status() and ctl() through calibctl."""

    def __init__(self, conf: str = "", ingest_pull: str = "tcp://127.0.0.1:*",
                 http: str = "off") -> None:
        self.binary = os.environ["CALIBD"]
        self.calibctl = os.environ["CALIBCTL"]
        self.dir = tempfile.mkdtemp(prefix="calibd-py.")
        path = os.path.join(self.dir, "calibd.conf")
        with open(path, "w") as f:
            f.write("[daemon]\ntick = 0.1\nsnapshot_interval = 0\n" + conf)
        state = os.path.join(self.dir, "state")
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen(
            [self.binary, "-c", path, "--ingest", "tcp://127.0.0.1:*", "--ingest-pull",
             ingest_pull, "--publish", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*",
             "--http", http, "--state-dir", state, "--log-level", "info"],
            stdout=subprocess.DEVNULL, stderr=self.log)
        ep = os.path.join(state, "endpoints")
        deadline = time.monotonic() + 60
        while not (os.path.exists(ep) and os.path.getsize(ep) > 0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("calibd did not start: " + open(self.log.name).read())
            time.sleep(0.02)
        self.ep = dict(line.split()[:2] for line in open(ep))

    def ctl(self, *args: str) -> dict:
        out = subprocess.run([self.calibctl, args[0], "--control", self.ep["control"],
                              *args[1:]], check=True, capture_output=True, text=True,
                             timeout=60).stdout
        return json.loads(out)

    def status(self) -> dict:
        return self.ctl("status")

    def wait(self, cond, timeout: float = 60.0) -> dict:
        """The status once cond(status) holds (a failure after timeout)."""
        deadline = time.monotonic() + timeout * SCALE
        while True:
            s = self.status()
            if cond(s):
                return s
            if time.monotonic() > deadline:
                raise AssertionError("condition not met; status: " + json.dumps(s)[:2000])
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def calibd():
    if "CALIBD" not in os.environ:
        pytest.fail("CALIBD is not set: run through `make check` (tests/integ/python.sh)")
    d = Calibd()
    yield d
    d.stop()


@pytest.fixture
def make_calibd():
    made = []

    def make(**kw) -> Calibd:
        d = Calibd(**kw)
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop()


@pytest.fixture(scope="session")
def libcalib():
    if os.environ.get("CALIB_SANITIZERS") == "yes":
        # an ASan-built library cannot be loaded into a Python without its
        # runtime; the plain build runs this comparison
        pytest.skip("libcalib is built with the sanitizers")
    path = os.path.join(os.environ.get("BUILDDIR", ""), ".libs", "libcalib.so")
    if not os.path.exists(path):
        pytest.fail("no libcalib at %s: run through `make check`" % path)
    lib = ctypes.CDLL(path)
    for fn in ("calib_recal_apply_temperature", "calib_recal_apply_platt",
               "calib_recal_apply_variance", "calib_recal_apply_location_scale"):
        f = getattr(lib, fn)
        f.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_int, ctypes.c_size_t,
                      ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]
        f.restype = ctypes.c_int
    f = lib.calib_prior_weigh
    f.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_size_t, ctypes.c_int,
                  ctypes.c_size_t, ctypes.POINTER(ctypes.c_double)]
    f.restype = ctypes.c_int
    return lib
