#!/usr/bin/env python3
"""Prints a few lines from `calibctl status MODEL` JSON on standard input:
the calibration upper bound U with its interval, beside the binned lower
bounds. Used by run.sh."""
import json
import math
import sys


def est(e):
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
    print("  binned lower bounds: ECE %.4f  TCE2 %.4f  CWCE2 %.4f   parameters: %s v%d"
          % (raw["ece"], raw["tce2"], raw.get("cwce2", math.nan), m["params"]["method"],
             m["params"]["version"]))


if __name__ == "__main__":
    main()
