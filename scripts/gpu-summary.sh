#!/usr/bin/env bash
# Summarises a graphs.csv of scripts/gpu-run.sh: per case and policy, the
# measured runs' median, min and max (ms), the ratio of the median to the
# best median among StarPU's policies, and our policies' cold run (no model
# yet) with its ratio. Writes CSV to stdout (or to the file given second).
# Usage: bash scripts/gpu-summary.sh results/gpu/h200/graphs.csv [OUT.csv]
set -euo pipefail
csv=${1:?usage: bash scripts/gpu-summary.sh GRAPHS.csv [OUT.csv]}
[ -f "$csv" ] || { echo "gpu-summary: no file $csv" >&2; exit 2; }
summary() {
    python3 - "$csv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ours = {"plb-heft", "dada", "dada-cp"}
out = csv.writer(sys.stdout)
out.writerow(["label", "device", "case", "policy", "side", "runs", "median_ms", "min_ms", "max_ms",
              "vs_starpu_best", "cold_ms", "cold_vs_starpu_best"])
for case in dict.fromkeys(r["case"] for r in rows):
    sel = [r for r in rows if r["case"] == case and r["status"] == "0" and r["ms"]]
    measured = {}
    for r in sel:
        if r["run"] == "measured":
            measured.setdefault(r["policy"], []).append(float(r["ms"]))
    cold = {r["policy"]: float(r["ms"]) for r in sel if r["run"] == "cold"}
    med = {p: statistics.median(v) for p, v in measured.items()}
    starpu = [m for p, m in med.items() if p not in ours]
    if not starpu:
        continue
    best = min(starpu)
    label, device = sel[0]["label"], sel[0]["device"]
    for p, v in measured.items():
        c = cold.get(p)
        out.writerow([label, device, case, p, "ours" if p in ours else "StarPU", len(v),
                      f"{med[p]:.0f}", f"{min(v):.0f}", f"{max(v):.0f}", f"{med[p] / best:.3f}",
                      f"{c:.0f}" if c is not None else "", f"{c / best:.3f}" if c is not None else ""])
EOF
}
if [ $# -ge 2 ]; then summary >"$2"; else summary; fi
