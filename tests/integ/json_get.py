"""json_get.py — lib.sh's json_get for a whole script, in one process.

    json_get.py REQUESTS REPLIES

REQUESTS and REPLIES are FIFOs. Each request is FILE, NUL, EXPR, NUL; its
reply is one line "RC NOUT NERR" and then NOUT bytes of standard output
and NERR bytes of standard error: what

    python3 -c "import json,sys; r=json.load(open(FILE)); print(EXPR)"

would have printed, and its exit status (1 on an exception, with the
traceback). A python started for each call cost 50 ms of CPU, and the
scripts made about 250 such calls (tests/integ/lib.sh). It ends when
REQUESTS has no writer left.
"""
import contextlib
import io
import json
import os
import sys
import traceback


def answer(path, expr):
    out, err = io.StringIO(), io.StringIO()
    rc = 0
    with contextlib.redirect_stdout(out):
        try:
            with open(path, encoding="utf-8") as f:
                r = json.load(f)
            code = compile("print(%s)" % expr, "<json_get>", "exec")
            exec(code, {"json": json, "sys": sys, "r": r})
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc(file=err)
            rc = 1
    o, e = out.getvalue().encode(), err.getvalue().encode()
    return b"%d %d %d\n" % (rc, len(o), len(e)) + o + e


def main(requests, replies):
    rfd = os.open(requests, os.O_RDONLY)
    wfd = os.open(replies, os.O_WRONLY)
    pending = b""
    while True:
        chunk = os.read(rfd, 65536)
        if not chunk:
            return 0
        pending += chunk
        while pending.count(b"\0") >= 2:
            path, expr, pending = pending.split(b"\0", 2)
            reply = answer(path.decode(), expr.decode())
            while reply:
                reply = reply[os.write(wfd, reply):]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
