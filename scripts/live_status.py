#!/usr/bin/env python3
"""Prints a few lines from `calibctl status MODEL` JSON on standard input:
the calibration upper bound U with its interval, beside the binned lower
bounds, for the raw outputs and after the published parameters, and the
closed loop's state; with a second argument, the last line of the serving
node's log. Used by run.sh."""
import json
import math
import sys


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
    print("  upper bound U = mean Brier  %s   RBS %.4f" % (est(raw["brier"]), raw["rbs"]))
    print("  mean log score              %s" % est(raw["log"]))
    print("  window (%gs): U %s   ECE %.4f" % (m["window"]["seconds"], est(win["brier"]), win["ece"]))
    print("  binned lower bounds: ECE %.4f  TCE2 %.4f  CWCE2 %.4f"
          % (raw["ece"], raw["tce2"], raw.get("cwce2", math.nan)))
    p, loop, since = m["params"], m["loop"], m["calibrated_since_params"]
    values = " ".join("%s=%.4f" % kv for kv in p["values"].items())
    print("  parameters v%d %s %s; calibrated since: U %s"
          % (p["version"], p["method"], values, est(since["brier"])))
    d = loop["drift"] or {}
    shadow = loop["shadow"]
    print("  loop: drift %s (log e %.2f, alarms %d)  candidates %d: published %d, rejected %d%s"
          % (d.get("state", "off"), d.get("log_e") or 0, d.get("alarms", 0), loop["candidates"],
             loop["published"], loop["rejected"],
             "  [one in shadow: improvement %s]" % est(shadow["improvement"]) if shadow else ""))
    if len(sys.argv) > 2:
        try:
            lines = open(sys.argv[2]).read().split("\n")
            last = [l for l in lines if l.strip()]
            print("  serving node holds: %s" % (last[-1] if last else "nothing yet"))
        except OSError:
            pass


if __name__ == "__main__":
    main()
