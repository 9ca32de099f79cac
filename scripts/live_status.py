#!/usr/bin/env python3
"""Prints a few lines from `calibctl status MODEL` JSON on standard input:
the calibration upper bound U with its interval, raw and calibrated,
cumulative and over the window, beside the binned lower bounds; raw
against calibrated on the same pairs since the current parameters (the
difference that measures the recalibration); the closed loop's tests (the
miscalibration trigger, the drift detector, the shadow gate) and the story
of what it did; the label-free estimate of U before the labels, graded
against them once they came; with a second argument, the last line of the serving
node's log. Used by run.sh."""
import json
import math
import sys
import time


def est(e):
    if e["mean"] is None:
        return "-"
    ci = e["ci"] or [math.nan, math.nan]
    return "%.4f [%.4f, %.4f]" % (e["mean"], ci[0], ci[1])


# the events that tell the closed loop's story, and how each is named
STORY = {"miscalibration": "miscalibrated", "drift": "drift", "refit": "refit",
         "shadow_start": "shadow test", "shadow_fail": "rejected", "withheld": "withheld",
         "cancelled": "cancelled", "publish": "published", "rollback": "rolled back",
         "label_shift": "label shift"}


def main():
    model = sys.argv[1]
    r = json.load(sys.stdin)
    m = r["models"].get(model)
    if not m or m.get("raw") is None or m["scored"] == 0:
        print("waiting for the first labelled predictions...")
        return
    j = m["join"]
    print()
    print("%d messages  predictions %d  labels %d  scored %d  waiting %d  rejected %d"
          % (r["messages"], m["predictions"], m["labels"], m["scored"],
             j["waiting_predictions"], sum(m["rejected"].values())))
    if j.get("sample", 1) < 1:
        print("  over capacity: the join keeps a uniform sample of %.1f%% of ids "
              "(%d predictions, %d labels dropped; raise max_pending)"
              % (100 * j["sample"], j["sampled_out_predictions"], j["sampled_out_labels"]))
    # every headline figure with its view (raw outputs or after the
    # published parameters) and its scope (since the start, or the window)
    w = m["window"] or {}
    print("  U = mean Brier [95%%]    %-26s %s" % ("cumulative", "window (%gs)" % w.get("seconds", 0)))
    for view, name in (("raw", "raw outputs"), ("calibrated", "calibrated")):
        print("    %-20s %-26s %s" % (name, est(m[view]["brier"]) if m.get(view) else "-",
                                      est(w[view]["brier"]) if w.get(view) else "-"))
    print("  (U holds the irreducible part too: a rising raw U is the stream, not calibd;")
    print("   raw against calibrated on the same pairs measures the calibration)")
    raw = m["raw"]
    print("  binned lower bounds (raw, cumulative): ECE %.4f  TCE2 %.4f  CWCE2 %.4f"
          % (raw["ece"], raw["tce2"], raw.get("cwce2", math.nan)))
    p, loop, pr = m["params"], m["loop"], m["paired"]
    values = " ".join("%s=%.4f" % kv for kv in p["values"].items())
    print("  parameters in force: version %d, %s %s" % (p["version"], p["method"], values))
    # raw and calibrated on the same pairs: their difference is what the
    # parameters change in the calibration error (U also holds the
    # irreducible part, the same in both)
    imp = pr["improvement"]["brier"]
    print("  on the same %d pairs since version %d: U raw %.4f -> calibrated %.4f, improvement %s"
          % (pr["scored"], pr["version"], pr["raw"]["brier"]["mean"] or math.nan,
             pr["calibrated"]["brier"]["mean"] or math.nan, est(imp)))
    print("  closed loop: %s; %d refits, %d published, %d rejected, %d cancelled"
          % (loop["phase"], loop["refits"], loop["published"], loop["rejected"],
             loop.get("cancelled", 0)))
    tr = loop.get("trigger")
    if tr and tr["challenger"]:
        ch = tr["challenger"]
        print("    miscalibration test: would a %s map fit on earlier pairs (%s) do better? "
              "by %s on %d pairs; log e %.2f (refits at 4.61)"
              % (ch["method"], " ".join("%s=%.3f" % kv for kv in ch["values"].items()),
                 est(tr["improvement"]), tr["improvement"]["n"] or 0, tr["log_e"] or 0))
    elif tr:
        print("    miscalibration test: waiting for its first 1000 pairs")
    d = loop["drift"]
    if d:
        print("    drift test: %s, log e %.2f (alarm at 4.61), %d alarms"
              % (d["state"], d["log_e"] or 0, d["alarms"]))
    shadow = loop["shadow"]
    if shadow:
        print("    shadow test of a candidate %s %s: improvement %s, log e %.2f (publishes at 4.61)"
              % (shadow["method"], " ".join("%s=%.4f" % kv for kv in shadow["values"].items()),
                 est(shadow["improvement"]), shadow["log_e"] or 0))
    lf = m.get("label_free")
    if lf and lf["predictions"]:
        # from the predictions alone, before their labels: what U the
        # newest will probably show, and how far such estimates were from
        # what the labels then showed
        b, g = lf["brier"], lf["graded"]["since_params"]
        print("  before the labels: the newest %d predictions' U will probably be "
              "%.4f [%.4f, %.4f]%s" % (lf["predictions"], b["mean"], b["lo"], b["hi"],
                                       " (label-shift corrected)" if lf.get("corrected") else ""))
        wc = (w.get("calibrated") or {}).get("brier") or {}
        if wc.get("mean") is not None:
            print("    what the labels showed so far (window, calibrated): %.4f; the estimate "
                  "is of predictions whose labels have not come" % wc["mean"])
        if g["naive"]["n"]:
            print("    graded on the %d pairs joined since the parameters: realized - estimated %s "
                  "(0 when the served outputs are calibrated)" % (g["naive"]["n"], est(g["naive"])))
        sh = lf.get("shift")
        if sh:
            print("    label-shift test: log e %.2f (alarm at %.2f), %d alarms%s"
                  % (sh["log_e"] or 0, sh["threshold"], sh["alarms"],
                     "; priors now " + " ".join("%.2f" % x for x in lf["priors"])
                     if sh["alarm"] and lf.get("priors") else ""))
    story = [e for e in m.get("events", []) if e["kind"] in STORY]
    if story:
        print("  what the loop did (newest last):")
        for e in story[-5:]:
            text = e["text"] if len(e["text"]) <= 110 else e["text"][:107] + "..."
            print("    %s %-13s %s" % (time.strftime("%H:%M:%S", time.localtime(e["t"])),
                                      STORY[e["kind"]], text))
    if len(sys.argv) > 2:
        try:
            lines = open(sys.argv[2]).read().split("\n")
            last = [l for l in lines if l.strip()]
            print("  serving node holds: %s" % (last[-1] if last else "nothing yet"))
        except OSError:
            pass


if __name__ == "__main__":
    main()
