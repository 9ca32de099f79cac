#!/usr/bin/env python3
"""budget.py — a callgrind profile's instructions per pair, by capability,
against tests/budget.tsv (tests/integ/budget.sh).

    budget.py measure PROFILE PAIRS          capability counts, one a line
    budget.py check CASE MEASURED BUDGET     compares; exit 1 past budget + 10%
                                             (+ 0.2% of the case's total budget,
                                             for a capability but the total)

A capability's count is the inclusive count of the functions that do it
(callgrind_annotate --inclusive=yes), over the pairs: ingest_on_message
is the whole ingest path (calibd is run with --toggle-collect on it).

The growth of a ring or a reservoir while it fills (calib_budget_grow:
realloc, which extends in place, copies or moves pages as the heap's
layout allows, so that its count differs from run to run) is taken out of
the capability whose function called it and of the total, and printed on
a line of its own, "growth", which has no budget: it ends when the
structures are full, and copies each byte they hold about once at most.
"""
import re
import subprocess
import sys

# capability -> the functions whose inclusive counts are its cost; a
# function appears under one capability only, and none of a capability's
# calls another of its list (lfree.c's entry points share static helpers)
CAPABILITIES = {
    "total": ["ingest_on_message"],
    "decode": ["calib_msg_decode_k", "calib_msg_record"],
    "views": ["model_score", "apply_params"],
    "bins": ["calib_argmax", "calib_bins_add", "calib_cwbins_add"],
    "intervals": ["calib_cs_add"],
    "window": ["calib_window_at"],
    "join": ["calib_join_pred", "calib_join_label"],
    "label_free": ["calib_lfree_add", "calib_lfree_add_top", "calib_lfree_add_logits",
                   "calib_lfree_newest_expected"],
    "samples": ["calib_reservoir_offer", "model_ring_push"],
}
MARGIN = 1.10
GROWTH = "calib_budget_grow"
# a caller of calib_budget_grow, by its file -> the capability it is part of
GROWTH_CALLERS = {"lfree.c": "label_free", "sample.c": "samples", "model.c": "samples"}
CALLER = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+<\s+\S*?([A-Za-z0-9_]+\.c):([A-Za-z_]\w*)")

LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+(?:=>\s+)?\S*?:([A-Za-z_][A-Za-z0-9_]*)(?:\.\w+)?(?:[\s\[]|$)")


def inclusive(profile):
    """function name -> its largest inclusive count in the profile"""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", profile],
                         capture_output=True, text=True, check=True).stdout
    counts = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m and "=>" not in line:
            n = int(m.group(1).replace(",", ""))
            counts[m.group(2)] = max(n, counts.get(m.group(2), 0))
    return counts


def growth(profile):
    """capability -> the instructions of calib_budget_grow its functions called"""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=caller",
                          "--threshold=100", profile],
                         capture_output=True, text=True, check=True).stdout
    grown, callers = {}, []
    for line in out.splitlines():
        m = CALLER.match(line)
        if m:
            callers.append((m.group(2), int(m.group(1).replace(",", ""))))
            continue
        if re.match(r"^\s*[\d,]+\s+\([^)]*\)\s+\*\s+\S*:%s(\s|$)" % GROWTH, line):
            for f, n in callers:
                if f not in GROWTH_CALLERS:
                    sys.stderr.write("budget.py: %s called from %s, not a capability's\n"
                                     % (GROWTH, f))
                    sys.exit(1)
                grown[GROWTH_CALLERS[f]] = grown.get(GROWTH_CALLERS[f], 0) + n
        if not line.strip() or "*" in line:
            callers = []
    return grown


def measure(profile, pairs):
    counts = inclusive(profile)
    if not counts.get("ingest_on_message"):
        sys.stderr.write("budget.py: no ingest_on_message in %s\n" % profile)
        sys.exit(1)
    grown = growth(profile)
    for cap, funcs in CAPABILITIES.items():
        n = sum(counts.get(f, 0) for f in funcs)
        n -= sum(grown.values()) if cap == "total" else grown.get(cap, 0)
        print("%s %d" % (cap, round(n / pairs)))
    print("growth %d" % round(sum(grown.values()) / pairs))


def read_pairs(path):
    return dict(line.split()[:2] for line in open(path) if line.strip())


def check(case, measured_path, budget_path):
    measured = {k: int(v) for k, v in read_pairs(measured_path).items()}
    budget = {}
    for line in open(budget_path):
        f = line.split()
        if len(f) == 3 and not line.startswith("#") and f[0] == case:
            budget[f[1]] = int(f[2])
    if not measured.get("total"):  # nothing counted: a measurement that failed
        print("# %s: no instructions counted (%s)" % (case, measured_path))
        return 1
    bad = 0
    # a capability but the total may move by 0.2% of the case's total (the
    # allocator's share of a ring's growth: realloc copies or extends)
    slack = 0.002 * budget.get("total", 0)
    for cap in CAPABILITIES:
        if cap not in budget:
            continue
        m, b = measured.get(cap, 0), budget[cap]
        over = m > b * MARGIN + (slack if cap != "total" else 0)
        over = over or (b > 0 and m == 0)  # a capability not counted at all
        bad += over
        print("# %-8s %-11s %9d instructions a pair, budget %9d (%+.1f%%)%s" %
              (case, cap, m, b, 100.0 * (m - b) / b if b else 0.0,
               "  OVER BUDGET + 10%" if over and m else "  NOT COUNTED" if over else ""))
    print("# %-8s %-11s %9d instructions a pair while the rings fill (no budget)" %
          (case, "growth", measured.get("growth", 0)))
    missing = [c for c in CAPABILITIES if c not in budget]
    if missing:
        print("# %s: no budget for %s in %s" % (case, ", ".join(missing), budget_path))
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "measure":
        measure(sys.argv[2], int(sys.argv[3]))
        sys.exit(0)
    if len(sys.argv) == 5 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4]))
    sys.stderr.write(__doc__)
    sys.exit(2)
