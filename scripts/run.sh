#!/usr/bin/env bash
# run.sh — the main job: builds calibctl and audits the bundled example, a
# simulated overconfident 10-class model, printing its calibration report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
dir=$(scripts/build.sh plain)
file=examples/data/overconfident.csv
echo "calibctl score $file"
"$dir/calibctl" score "$file" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(f"  {r[\"n\"]} predictions, {r[\"k\"]} classes, accuracy {r[\"accuracy\"]:.3f}")
print(f"  upper bound U = mean Brier {r[\"brier\"]:.4f}  95% CI [{r[\"brier_ci\"][0]:.4f}, {r[\"brier_ci\"][1]:.4f}]  RBS {r[\"rbs\"]:.4f}")
print(f"  mean log score {r[\"log\"]:.4f}  95% CI [{r[\"log_ci\"][0]:.4f}, {r[\"log_ci\"][1]:.4f}]")
print(f"  binned lower bounds: ECE {r[\"ece\"]:.4f}  TCE2(15) {r[\"tce2_15\"]:.4f}  TCE2(100) {r[\"tce2_100\"]:.4f}  debiased TCE2(15 em) {r[\"tce2_15em_debiased\"]:.4f}")
print(f"                       CWCE2(15) {r[\"cwce2_15\"]:.4f}  CWCE2(100) {r[\"cwce2_100\"]:.4f}  KS {r[\"ks\"]:.4f}")
print(f"  Brier decomposition (15 bins): reliability {r[\"brier_reliability\"]:.4f}  resolution {r[\"brier_resolution\"]:.4f}  uncertainty {r[\"brier_uncertainty\"]:.4f}")
print("  full JSON:", json.dumps(r))
'
