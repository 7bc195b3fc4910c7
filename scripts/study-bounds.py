#!/usr/bin/env python3
"""StarPU's best and one of our policies against the bounds of each pair of
the study: StarPU's LP area bound and our graph bound (`plb bound`).

usage: scripts/study-bounds.py [--policy plb-heft] [--csv OUT] [--plot PNG]
           DIR [SET ...]

DIR holds one folder per SET (default: tuned untuned matrix-rest
tiles-320), each written by `plb simgrid` with a simgrid.csv (the policy's
rows) and a bounds.csv. StarPU's best for a pair is the fastest of StarPU's
policies over every simgrid.csv under results/simgrid-study/ (as
scripts/study-compare.py). Prints, per set, per application,
per machine shape (1 GPU, 2, all) and over all, the geometric mean and the
range of each makespan over the graph bound (1 would be a schedule as
short as the bound), and how many pairs StarPU's best is within 1.05x of
it (there, no policy can be 5 % faster than StarPU's best), and offline
HEFT's makespan on the recorded graph (no transfers) over the bound: the
optimum of that graph with no transfers lies between the bound and the
shortest schedule known. The last column takes, pair by pair, the shorter
of offline HEFT's schedule and StarPU's best, over StarPU's best: what a
policy following offline HEFT's schedule wherever it is shorter would
reach, if the schedule lost nothing to transfers.

Then, for Cholesky and LU on the shapes with all their GPUs (where offline
HEFT is shortest), each pair's gap from POLICY's makespan to offline
HEFT's beside the time POLICY's GPUs waited for data (the run's
`cuda_data_wait_ms`, per GPU): what the transfers the offline schedule
leaves out cost the run.
"""

import argparse
import csv
import importlib.util
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("study_compare", os.path.join(HERE, "study-compare.py"))
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


# GPUs of each machine of StarPU's samples (`plb simgrid`'s machines).
GPUS = {"attila": 3, "idgraf": 8, "mirage": 3, "sirocco": 4}


def gpus_of(machine):
    """The GPUs of a `plb simgrid` machine name (`idgraf:ncuda=2`)."""
    name, *opts = machine.split(":")
    for o in opts:
        if o.startswith("ncuda="):
            return int(o.split("=", 1)[1])
    return GPUS.get(name)


def data_wait(folder, policy):
    """Each pair's GPUs' time waiting for data (ms, summed over the GPUs)
    in POLICY's after-learning row of FOLDER's simgrid.csv."""
    waits = {}
    for r in csv.DictReader(open(os.path.join(folder, "simgrid.csv"))):
        if r["policy"] == policy and r.get("cuda_data_wait_ms"):
            waits[compare.key(r)] = float(r["cuda_data_wait_ms"])
    return waits


def geo(v):
    return math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="plb-heft")
    ap.add_argument("--csv")
    ap.add_argument("--plot", help="PNG of every pair's makespans over the graph bound")
    ap.add_argument("dir")
    ap.add_argument("sets", nargs="*", default=["tuned", "untuned", "matrix-rest", "tiles-320"])
    a = ap.parse_args()
    best, _ = compare.starpu_best()
    pairs = []
    for s in a.sets:
        folder = os.path.join(a.dir, s)
        mine = compare.ours(folder, a.policy)
        waits = data_wait(folder, a.policy)
        for b in csv.DictReader(open(os.path.join(folder, "bounds.csv"))):
            k = compare.key(b)
            if not b["graph_bound_ms"]:
                sys.exit(f"no graph bound for {k} in set {s}")
            if k not in best or (k, "after learning") not in mine:
                sys.exit(f"no StarPU row or no {a.policy} row for {k} in set {s}")
            pairs.append({
                "set": s, "key": k, "best": best[k],
                "ours": mine[(k, "after learning")][0],
                "lp": float(b["lp_area_ms"]) if b["lp_area_ms"] else float("nan"),
                "bound": float(b["graph_bound_ms"]),
                "area": float(b["graph_area_ms"]), "path": float(b["graph_path_ms"]),
                "heft": float(b["graph_offline_heft_ms"]),
                "wait": waits.get(k, float("nan")),
            })
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["set", "machine", "case", "n", "tile", "starpu_best", "starpu_best_ms",
                        "ours_ms", "lp_area_ms", "graph_bound_ms", "graph_area_ms",
                        "graph_path_ms", "graph_offline_heft_ms", "best_over_bound",
                        "ours_over_bound"])
            for p in pairs:
                w.writerow([p["set"], *p["key"], p["best"][0], f"{p['best'][1]:g}",
                            f"{p['ours']:g}", f"{p['lp']:g}", f"{p['bound']:g}",
                            f"{p['area']:g}", f"{p['path']:g}", f"{p['heft']:g}",
                            f"{p['best'][1] / p['bound']:.3f}", f"{p['ours'] / p['bound']:.3f}"])
    print(f"| pairs | count | StarPU's best / graph bound: geometric mean [range] "
          f"| {a.policy} / graph bound | StarPU's best within 1.05x of the bound "
          f"| offline HEFT / graph bound | graph bound / LP area bound "
          f"| shorter of offline HEFT and StarPU's best / StarPU's best |")
    print("| --- | ---: | --- | --- | ---: | --- | ---: | --- |")
    groups = [(s, lambda p, s=s: p["set"] == s) for s in a.sets]
    groups += [(app, lambda p, app=app: p["key"][1] == app) for app in ("cholesky", "lu", "gemm")]
    gpus = lambda p: ("1 GPU" if ":ncuda=1" in p["key"][0] else
                      "2 GPUs" if ":ncuda=2" in p["key"][0] else "all GPUs")
    groups += [(g, lambda p, g=g: gpus(p) == g) for g in ("1 GPU", "2 GPUs", "all GPUs")]
    groups += [("all", lambda p: True)]
    for label, keep in groups:
        sel = [p for p in pairs if keep(p)]
        if not sel:
            continue
        rb = [p["best"][1] / p["bound"] for p in sel]
        ro = [p["ours"] / p["bound"] for p in sel]
        lp = [p["bound"] / p["lp"] for p in sel if p["lp"] == p["lp"]]
        rh = [p["heft"] / p["bound"] for p in sel]
        rm = [min(p["heft"], p["best"][1]) / p["best"][1] for p in sel]
        print(f"| {label} | {len(sel)} | {geo(rb):.3f} [{min(rb):.3f}–{max(rb):.3f}] "
              f"| {geo(ro):.3f} [{min(ro):.3f}–{max(ro):.3f}] "
              f"| {sum(r <= 1.05 for r in rb)} | {geo(rh):.3f} [{min(rh):.3f}–{max(rh):.3f}] "
              f"| {geo(lp):.3f} | {geo(rm):.3f} [{min(rm):.3f}–{max(rm):.3f}] |")
    print()
    print(f"| all-GPU pair | {a.policy} ms | offline HEFT ms | gap ms "
          f"| {a.policy}'s GPUs waiting for data, ms per GPU |")
    print("| --- | ---: | ---: | ---: | ---: |")
    gaps, waits = [], []
    for p in pairs:
        m, app = p["key"][0], p["key"][1]
        if ":ncuda=" in m or app == "gemm" or not gpus_of(m):
            continue
        gap, wait = p["ours"] - p["heft"], p["wait"] / gpus_of(m)
        gaps.append(gap)
        waits.append(wait)
        print(f"| {m} {app} {p['key'][2]}/{p['key'][3]} | {p['ours']:.0f} | {p['heft']:.0f} "
              f"| {gap:.0f} | {wait:.0f} |")
    if gaps:
        print(f"| sum of {len(gaps)} | | | {sum(gaps):.0f} | {sum(waits):.0f} |")
    if a.plot:
        plot(pairs, a.plot, a.policy)


def plot(pairs, png, policy):
    """Each pair's StarPU best and ours over the graph bound, sorted by
    application and StarPU's ratio."""
    pairs = sorted(pairs, key=lambda p: (p["key"][1], p["best"][1] / p["bound"]))
    compare.points(
        [(f"{p['key'][0]} {p['key'][1]} {p['key'][2]}/{p['key'][3]}",
          p["best"][1] / p["bound"], p["ours"] / p["bound"]) for p in pairs],
        png,
        "Each pair of the study (SIMULATED): makespan over our graph bound "
        "(dependencies kept, transfers not counted)",
        "makespan / graph bound",
        ("StarPU's best", policy),
        1.05,
        "[0.95:*]",
    )


if __name__ == "__main__":
    main()
