#!/usr/bin/env python3
"""The study's pairs with the bus scaled (`plb simgrid --machines
NAME:bus=F`) against the same pairs on the sampled bus: how much of each
makespan is the transfers, and how far each schedule is from offline HEFT
on the recorded graph with no transfers at all.

usage: scripts/study-bus-scale.py [--policy plb-heft] [--ours DIR]
           [--csv OUT] SCALED_DIR [SCALED_DIR ...]

Each SCALED_DIR holds a simgrid.csv whose machines carry `:bus=F`, with
StarPU's policies and --policy (after learning and cold). The sampled
bus's figures: StarPU's best over every simgrid.csv under
results/simgrid-study/ (as scripts/study-compare.py), --policy's rows
from --ours (default: results/simgrid-study/round26, every simgrid.csv
under it), offline HEFT's makespan from
results/simgrid-study/graph-bound/bounds-comparison.csv. Prints one row
per pair and the geometric means.
"""

import argparse
import csv
import glob
import importlib.util
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("study_compare", os.path.join(HERE, "study-compare.py"))
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


def unscaled(machine):
    """`sirocco:bus=1000` -> (`sirocco`, `1000`); no scale -> (machine, None)."""
    parts = machine.split(":")
    scale = [p[len("bus="):] for p in parts if p.startswith("bus=")]
    rest = ":".join(p for p in parts if not p.startswith("bus="))
    return rest, (scale[0] if scale else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default="plb-heft")
    ap.add_argument("--ours", default=os.path.join(compare.STUDY, "round26"))
    ap.add_argument("--csv")
    ap.add_argument("scaled", nargs="+")
    a = ap.parse_args()

    best, _ = compare.starpu_best()
    ours = {}
    for f in glob.glob(os.path.join(a.ours, "**", "simgrid.csv"), recursive=True):
        for r in csv.DictReader(open(f)):
            if r["policy"] == a.policy and r["sim_ms"]:
                ours[compare.key(r)] = float(r["sim_ms"])
    offline = {}
    for r in csv.DictReader(open(os.path.join(compare.STUDY, "graph-bound", "bounds-comparison.csv"))):
        offline[compare.key(r)] = float(r["graph_offline_heft_ms"])

    scaled = {}
    for d in a.scaled:
        for r in csv.DictReader(open(os.path.join(d, "simgrid.csv"))):
            if not r["sim_ms"] or "reference" in r["policy"]:
                continue
            machine, scale = unscaled(r["machine"])
            if scale is None:
                continue
            k = (machine, r["case"], r["n"], r["tile"])
            scaled.setdefault((k, scale), {})[r["policy"]] = (float(r["sim_ms"]), r["ours"] == "true")

    rows = []
    for (k, scale), runs in sorted(scaled.items()):
        theirs = {p: ms for p, (ms, is_ours) in runs.items() if not is_ours}
        if a.policy not in runs or not theirs or k not in best:
            continue
        name = min(theirs, key=theirs.get)
        row = {
            "machine": k[0], "case": k[1], "n": k[2], "tile": k[3], "bus": scale,
            "starpu_best": name, "starpu_best_ms": theirs[name],
            "ours_ms": runs[a.policy][0],
            "ours_cold_ms": runs.get(a.policy + " (cold)", (float("nan"),))[0],
            "sampled_starpu_best_ms": best[k][1],
            "sampled_ours_ms": ours.get(k, float("nan")),
            "offline_heft_ms": offline.get(k, float("nan")),
        }
        rows.append(row)
    if not rows:
        raise SystemExit("no pair with a scaled bus, StarPU's policies and " + a.policy)

    def ratio(r, x, y):
        return r[x] / r[y]

    cols = [
        ("ours / StarPU's best, scaled bus", "ours_ms", "starpu_best_ms"),
        ("cold", "ours_cold_ms", "starpu_best_ms"),
        ("ours / StarPU's best, sampled bus", "sampled_ours_ms", "sampled_starpu_best_ms"),
        ("StarPU's best, scaled over sampled bus", "starpu_best_ms", "sampled_starpu_best_ms"),
        ("StarPU's best, scaled bus / offline HEFT", "starpu_best_ms", "offline_heft_ms"),
        ("ours, scaled bus / offline HEFT", "ours_ms", "offline_heft_ms"),
    ]
    print("| machine | case | bus | StarPU's best, scaled bus | " + " | ".join(c[0] for c in cols) + " |")
    print("| --- | --- | ---: | --- | " + " | ".join("---:" for _ in cols) + " |")
    for r in rows:
        cells = [f"{ratio(r, x, y):.3f}" for _, x, y in cols]
        print(f"| {r['machine']} | {r['case']} {r['n']}/{r['tile']} | {r['bus']} | "
              f"{r['starpu_best']} {r['starpu_best_ms']:.0f} ms | " + " | ".join(cells) + " |")
    means = []
    for _, x, y in cols:
        v = [q for q in (ratio(r, x, y) for r in rows) if not math.isnan(q)]
        means.append(f"{compare.geo(v):.3f}")
    print(f"| geometric mean, {len(rows)} pairs | | | | " + " | ".join(means) + " |")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
