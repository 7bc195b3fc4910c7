#!/usr/bin/env python3
"""Compares one of our policies between two sets of `plb simgrid` rows of
the study, pair by pair, against StarPU's best.

usage: scripts/study-compare.py [--policy plb-heft] [--before-policy NAME]
           [--csv OUT] [--plot PNG] [--by-shape] BEFORE_DIR AFTER_DIR [SET ...]

BEFORE_DIR and AFTER_DIR hold one folder per SET (default: tuned untuned
matrix-rest tiles-320), each with a simgrid.csv; AFTER_DIR's pairs are
compared (a subset of BEFORE_DIR's may do), its rows named --policy,
BEFORE_DIR's --before-policy (default: the same, e.g. a variant
`plb-heft+PLB_HEFT_WINDOW=90:4` against `plb-heft`). StarPU's best for a pair
is the fastest of StarPU's policies (rows with ours=false, warm) over every
simgrid.csv under results/simgrid-study/; `dmdas`'s bytes come from the
same rows. Prints geometric mean, largest and pairs above 1.03 of the
ratio to StarPU's best, and the bytes over `dmdas`'s (Cholesky and LU),
per set and over all, after learning and cold; --csv writes every pair;
--plot PNG draws every pair's ratio after learning, before and after
(gnuplot); --by-shape adds rows per GPU count (`ncuda=N` in the machine's
name; without it, all the machine's GPUs: 3 to 8 on the four sampled
machines).
"""

import argparse
import csv
import glob
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
STUDY = os.path.join(ROOT, "results", "simgrid-study")


def key(r):
    return (r["machine"], r["case"], r["n"], r["tile"])


def starpu_best():
    best, dmdas = {}, {}
    for f in glob.glob(os.path.join(STUDY, "**", "simgrid.csv"), recursive=True):
        for r in csv.DictReader(open(f)):
            if r["ours"] != "false" or not r["sim_ms"] or r["policy"].endswith("(cold)"):
                continue
            if "reference" in r["policy"]:
                continue
            k, ms = key(r), float(r["sim_ms"])
            if k not in best or ms < best[k][1]:
                best[k] = (r["policy"], ms)
            if r["policy"] == "dmdas" and r["gib_moved"]:
                dmdas[k] = float(r["gib_moved"])
    return best, dmdas


def ours(folder, policy):
    rows = {}
    for r in csv.DictReader(open(os.path.join(folder, "simgrid.csv"))):
        if not r["sim_ms"]:
            continue
        for run, name in (("after learning", policy), ("cold", policy + " (cold)")):
            if r["policy"] == name:
                rows[(key(r), run)] = (float(r["sim_ms"]), float(r["gib_moved"] or "nan"))
    return rows


def gpus(machine):
    """The pair's GPU-count class: `ncuda=N` in the machine's name, else all
    of the machine's GPUs (3 to 8 on the sampled machines)."""
    for part in machine.split(":")[1:]:
        if part.startswith("ncuda="):
            n = int(part[len("ncuda="):])
            return "1 GPU" if n == 1 else "2 GPUs" if n == 2 else "3 or more GPUs"
    return "3 or more GPUs"


def geo(v):
    return math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="plb-heft")
    ap.add_argument("--before-policy", help="BEFORE_DIR's policy name (default: --policy)")
    ap.add_argument("--csv")
    ap.add_argument("--plot", help="PNG of every pair's ratio after learning")
    ap.add_argument("--by-shape", action="store_true", help="rows per GPU count too")
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("sets", nargs="*", default=["tuned", "untuned", "matrix-rest", "tiles-320"])
    a = ap.parse_args()
    best, dmdas = starpu_best()
    pairs = []
    for s in a.sets:
        b = ours(os.path.join(a.before, s), a.before_policy or a.policy)
        n = ours(os.path.join(a.after, s), a.policy)
        for (k, run), (ms, gib) in sorted(n.items()):
            if (k, run) not in b or k not in best:
                sys.exit(f"no before row or StarPU row for {k} ({run}) in set {s}")
            pairs.append((s, k, run, best[k], dmdas.get(k), b[(k, run)], (ms, gib)))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["set", "machine", "case", "n", "tile", "run", "starpu_best",
                        "starpu_best_ms", "dmdas_gib", "before_ms", "before_ratio",
                        "before_gib", "after_ms", "after_ratio", "after_gib"])
            for s, k, run, (bp, bms), dg, (b_ms, b_g), (n_ms, n_g) in pairs:
                w.writerow([s, *k, run, bp, f"{bms:g}", "" if dg is None else f"{dg:g}",
                            f"{b_ms:g}", f"{b_ms / bms:.3f}", f"{b_g:g}",
                            f"{n_ms:g}", f"{n_ms / bms:.3f}", f"{n_g:g}"])
    if a.plot:
        plot(pairs, a.plot)
    print("| pairs | run | count | before: geometric mean, largest, above 1.03 "
          "| after | bytes over dmdas's, before | after |")
    print("| --- | --- | ---: | --- | --- | ---: | ---: |")
    shapes = ["1 GPU", "2 GPUs", "3 or more GPUs"] if a.by_shape else []
    for label in [*a.sets, *shapes, "all"]:
        for run in ("after learning", "cold"):
            sel = [p for p in pairs if p[2] == run and label in (p[0], gpus(p[1][0]), "all")]
            if not sel:
                continue
            cells = []
            for i in (5, 6):
                r = [p[i][0] / p[3][1] for p in sel]
                cells.append(f"{geo(r):.3f}, {max(r):.3f}, {sum(x > 1.03 for x in r)}")
            bytes_ = [p for p in sel if p[1][1] != "gemm" and p[4]]
            gb = [geo([p[i][1] / p[4] for p in bytes_]) for i in (5, 6)]
            print(f"| {label} | {run} | {len(sel)} | {cells[0]} | {cells[1]} "
                  f"| {gb[0]:.3f} | {gb[1]:.3f} |")


def plot(pairs, png):
    """Each pair's ratio to StarPU's best after learning, before and after,
    grouped by case and sorted by the ratio after."""
    warm = [p for p in pairs if p[2] == "after learning"]
    warm.sort(key=lambda p: (p[1][1], p[6][0] / p[3][1]))
    rows = [(f"{p[1][0]} {p[1][1]} {p[1][2]}/{p[1][3]}", p[5][0] / p[3][1], p[6][0] / p[3][1])
            for p in warm]
    values = [v for r in rows for v in r[1:]]
    # At least 0.85 to 1.15; wider when a pair lies outside.
    low = min([0.85] + [v - 0.02 for v in values])
    high = max([1.15] + [v + 0.05 for v in values])
    points(
        rows,
        png,
        "Each pair of the study after learning: before (circles) and after (dots) the change",
        "makespan / StarPU best (SIMULATED)",
        ("before", "after"),
        1.03,
        f"[{low:.2f}:{high:.2f}]",
    )


def points(rows, png, title, ylabel, names, line, yrange):
    """A gnuplot PNG of two values per labelled pair (circles, then dots),
    with a dashed line at `line` and a solid one at 1."""
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as f:
        for i, (label, first, second) in enumerate(rows):
            f.write(f"{i} {first:.4f} {second:.4f} {label.replace(' ', '_')}\n")
        data = f.name
    script = f"""set terminal pngcairo size 1400,600 font ',9'
set output '{png}'
set termoption noenhanced
set title "{title}"
set ylabel '{ylabel}'
set xtics rotate by 90 right font ',7'
set grid ytics
set key top left
set yrange {yrange}
plot '{data}' using 1:2:xtic(4) with points pt 6 ps 1.2 title "{names[0]}", \\
     '' using 1:3 with points pt 7 ps 1.0 title "{names[1]}", \\
     {line} with lines dt 2 lc rgb 'red' title '{line}', 1 with lines lc rgb 'black' notitle
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.unlink(data)


if __name__ == "__main__":
    main()
