#!/usr/bin/env python3
"""callgraph.py — the daemon's files as a graph of calls, from their objects.

    callgraph.py [--dot] OBJECT_OR_ARCHIVE...
    callgraph.py --includes HEADER...

A file calls another when its object refers to a symbol the other defines
(nm: U against T, D, B, R); a file's name is its object's (an archive's
member's), libtool's library prefix taken off (libcalibd_la-model.o ->
model). Prints each
strongly connected set of more than one file, one a line, or nothing when
the graph has no cycle; exits 1 when it has one. --dot prints the graph
instead (Graphviz). With --includes, the graph is the headers' #include
"..." lines among the headers given (by base name), and the same is
printed. HACKING.md, "Layout"; tests/cli/callgraph.sh.
"""
import os
import re
import subprocess
import sys


def name_of(obj):
    base = os.path.basename(obj)
    base = re.sub(r"^lib\w+?_la-", "", base)
    return re.sub(r"\.(o|lo)$", "", base)


# nm -A: "FILE:[MEMBER:]" then "[ADDRESS] TYPE SYMBOL"
NM_LINE = re.compile(r"^(.*?)(?::\s*|:[0-9a-f]+ )([A-Za-z]) (\S+)$")


def graph(objects):
    defines, refers = {}, {}
    for obj in objects:
        out = subprocess.run(["nm", "-A", obj], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            m = NM_LINE.match(line)
            if not m:
                continue
            f = name_of(m.group(1).rsplit(":", 1)[-1])
            refers.setdefault(f, set())
            if m.group(2) in "TDBR":
                defines[m.group(3)] = f
            elif m.group(2) == "U":
                refers[f].add(m.group(3))
    return {f: sorted({defines[s] for s in syms if s in defines and defines[s] != f})
            for f, syms in refers.items()}


def sccs(g):
    """Tarjan's strongly connected components, iteratively"""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = n
                n += 1
                stack.append(v)
                on.add(v)
            recurse = False
            for j in range(i, len(g[v])):
                w = g[v][j]
                if w not in index:
                    work.append((v, j + 1))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return out


def includes(headers):
    names = {os.path.basename(h) for h in headers}
    g = {}
    for h in headers:
        with open(h) as f:
            inc = re.findall(r'^#include "([^"]+)"', f.read(), re.M)
        g[os.path.basename(h)] = sorted({os.path.basename(i) for i in inc} & names)
    return g


def main(argv):
    dot = argv[:1] == ["--dot"]
    heads = argv[:1] == ["--includes"]
    objects = argv[1:] if dot or heads else argv
    if not objects:
        sys.stderr.write(__doc__)
        return 2
    g = includes(objects) if heads else graph(objects)
    if dot:
        print("digraph calls {")
        for f in sorted(g):
            for t in g[f]:
                print('  "%s" -> "%s";' % (f, t))
        print("}")
        return 0
    cycles = [c for c in sccs(g) if len(c) > 1]
    for c in cycles:
        print(" ".join(c))
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
