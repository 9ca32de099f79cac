"""helper.py — one python per test script, answering lib.sh's json_get
and wait_for and kafka.sh's kwait.

    helper.py PORTFILE PID

Listens on 127.0.0.1, on a port the kernel picks, which it writes to
PORTFILE (whole, by a rename); ends when PID (the script) has ended, or
when killed. A python started for each call cost about 50 ms of CPU (150
ms with pyzmq imported, for a wait), and the scripts made about 400 such
calls a variant.

Each request has a connection of its own (bash: exec {fd}<> /dev/tcp/...)
and a thread here, so that a long wait holds up nothing else: ARGC, NUL,
then ARGC arguments each ended by a NUL, the first of them the command:

    get FILE EXPR
        what `python3 -c "import json,sys; r = json.load(open(FILE));
        print(EXPR)"` would print; status 1 on an exception, with its
        traceback
    one FILE EXPR SECONDS PID ENDPOINT TIMEOUT
    all EXPR SECONDS TIMEOUT NAME=ENDPOINT...
        a wait on calibd's status (tests/integ/status.py): 0 once EXPR
        holds, 1 at SECONDS, 2 (one) as soon as PID is not running

The answer is one line "RC NOUT NERR", then NOUT bytes of standard output
and NERR bytes of standard error; then the connection is closed.
"""
import contextlib
import io
import json
import os
import socketserver
import sys
import threading
import time
import traceback

import status

# get prints through sys.stdout, which is the process's: one at a time
PRINT = threading.Lock()


def get(path, expr):
    out = io.StringIO()
    with PRINT, contextlib.redirect_stdout(out):
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
        exec(compile("print(%s)" % expr, "<json_get>", "exec"), {"json": json, "sys": sys, "r": r})
    return 0, out.getvalue()


def run(args):
    """The command args: (status, what it printed)."""
    cmd, rest = args[0], args[1:]
    if cmd == "get" and len(rest) == 2:
        return get(*rest)
    if cmd == "one" and len(rest) == 6:
        return status.one(*rest), ""
    if cmd == "all" and len(rest) >= 3:
        return status.every(rest[0], rest[1], rest[2], rest[3:]), ""
    raise ValueError("helper.py: no such request: %r" % (args,))


def answer(args):
    err = ""
    try:
        rc, out = run(args)
    except SystemExit as e:
        rc, out = (e.code if isinstance(e.code, int) else 1), ""
    except BaseException:
        rc, out, err = 1, "", traceback.format_exc()
    o, e = out.encode(), err.encode()
    return b"%d %d %d\n" % (rc, len(o), len(e)) + o + e


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        data = b""
        while True:
            fields = data.split(b"\0")
            if len(fields) > 1 and fields[0].isdigit() and len(fields) - 2 >= int(fields[0]):
                args = [f.decode() for f in fields[1:1 + int(fields[0])]]
                break
            chunk = self.request.recv(65536)
            if not chunk:
                return  # the caller gave up
            data += chunk
        self.request.sendall(answer(args))


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    # connections not yet accepted (5 by default): a script's background
    # jobs may all ask at once on a loaded machine
    request_queue_size = 64


def main(portfile, pid):
    server = Server(("127.0.0.1", 0), Handler)
    with open(portfile + ".new", "w", encoding="ascii") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(portfile + ".new", portfile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    while True:
        try:
            os.kill(int(pid), 0)
        except OSError:
            os._exit(0)
        time.sleep(1)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
