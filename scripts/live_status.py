#!/usr/bin/env python3
"""Prints a few lines from `calibctl status MODEL` JSON on standard input:
the calibration upper bound U with its interval, beside the binned lower
bounds; raw against calibrated on the same pairs since the current
parameters (the difference that measures the recalibration); the closed
loop's state, the candidate in shadow and the last shadow test's result;
with a second argument, the last line of the serving node's log. Used by
run.sh."""
import json
import math
import sys
import time


def est(e):
    if e["mean"] is None:
        return "-"
    ci = e["ci"] or [math.nan, math.nan]
    return "%.4f [%.4f, %.4f]" % (e["mean"], ci[0], ci[1])


def main():
    model = sys.argv[1]
    r = json.load(sys.stdin)
    m = r["models"].get(model)
    if not m or m.get("raw") is None or m["scored"] == 0:
        print("waiting for the first labelled predictions...")
        return
    raw, win, j = m["raw"], m["window"]["raw"], m["join"]
    print()
    print("%d messages  predictions %d  labels %d  scored %d  waiting %d  rejected %d"
          % (r["messages"], m["predictions"], m["labels"], m["scored"],
             j["waiting_predictions"], sum(m["rejected"].values())))
    if j.get("sample", 1) < 1:
        print("  over capacity: the join keeps a uniform sample of %.1f%% of ids "
              "(%d predictions, %d labels dropped; raise max_pending)"
              % (100 * j["sample"], j["sampled_out_predictions"], j["sampled_out_labels"]))
    print("  upper bound U = mean Brier  %s   RBS %.4f  (U includes the irreducible part;"
          % (est(raw["brier"]), raw["rbs"]))
    print("  %s differences of U on the same pairs measure calibration)" % (" " * 27))
    print("  mean log score              %s" % est(raw["log"]))
    print("  window (%gs): U %s   ECE %.4f" % (m["window"]["seconds"], est(win["brier"]), win["ece"]))
    print("  binned lower bounds: ECE %.4f  TCE2 %.4f  CWCE2 %.4f"
          % (raw["ece"], raw["tce2"], raw.get("cwce2", math.nan)))
    p, loop, pr = m["params"], m["loop"], m["paired"]
    values = " ".join("%s=%.4f" % kv for kv in p["values"].items())
    print("  parameters v%d %s %s" % (p["version"], p["method"], values))
    # raw and calibrated on the same pairs: their difference is what the
    # parameters change in the calibration error (U also holds the
    # irreducible part, the same in both)
    imp = pr["improvement"]["brier"]
    print("  same %d pairs since v%d: U raw %.4f -> calibrated %.4f, improvement %s"
          % (pr["scored"], pr["version"], pr["raw"]["brier"]["mean"] or math.nan,
             pr["calibrated"]["brier"]["mean"] or math.nan, est(imp)))
    d = loop["drift"] or {}
    shadow = loop["shadow"]
    print("  loop: %s; drift %s (log e %.2f, alarms %d); candidates %d: published %d, rejected %d"
          % (loop["phase"], d.get("state", "off"), d.get("log_e") or 0, d.get("alarms", 0),
             loop["candidates"], loop["published"], loop["rejected"]))
    if shadow:
        print("  in shadow: %s %s, improvement %s, log e %.2f"
              % (shadow["method"], " ".join("%s=%.4f" % kv for kv in shadow["values"].items()),
                 est(shadow["improvement"]), shadow["log_e"] or 0))
    results = [e for e in m.get("events", []) if e["kind"] in ("publish", "shadow_fail", "withheld")]
    if results:
        e = results[-1]
        print("  last shadow test (%s): %s" % (time.strftime("%H:%M:%S", time.localtime(e["t"])),
                                               e["text"]))
    if len(sys.argv) > 2:
        try:
            lines = open(sys.argv[2]).read().split("\n")
            last = [l for l in lines if l.strip()]
            print("  serving node holds: %s" % (last[-1] if last else "nothing yet"))
        except OSError:
            pass


if __name__ == "__main__":
    main()
