#!/usr/bin/env python3
"""Where the workers' time goes, ours against StarPU's best, pair by pair
of the SIMULATED study.

usage: scripts/study-trace.py [--policy plb-heft] [--jobs 2] [--only SUBSTR]
           COMPARISON_CSV OUT_DIR

COMPARISON_CSV is a `scripts/study-compare.py --csv` table: its pairs
(machine, case, n, tile) and each pair's StarPU best. For each pair, one
`plb simgrid --no-cold` run of POLICY (after one learning run) and of
StarPU's best goes to OUT_DIR/<machine>-<case>-<n>-<tile>/ (kept: a pair
already there is not run again). Then OUT_DIR/trace.csv gets one row per
pair and policy with StarPU's time split per worker kind (the time
columns of `simgrid.csv`), and the pairs are printed by how far POLICY is
from StarPU's best, with the differences of the GPUs' time split.
"""

import argparse
import csv
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PLB = os.path.join(ROOT, "target", "release", "plb")
SPLIT = ["cpu_exec_ms", "cpu_data_wait_ms", "cpu_sleep_ms",
         "cuda_exec_ms", "cuda_data_wait_ms", "cuda_sleep_ms"]


def pairs(comparison):
    seen = {}
    for r in csv.DictReader(open(comparison)):
        k = (r["machine"], r["case"], r["n"], r["tile"])
        seen.setdefault(k, r["starpu_best"])
    return seen


def folder(out, k):
    return os.path.join(out, "-".join(k).replace(":", "_").replace("=", ""))


def run(out, k, policies):
    d = folder(out, k)
    if os.path.exists(os.path.join(d, "simgrid.csv")):
        return k, 0
    machine, case, n, tile = k
    cmd = [PLB, "simgrid", "--machines", machine, "--cases", f"{case}:{n}/{tile}",
           "--policies", ",".join(policies), "--no-cold", "--out", d]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr[-2000:]}", file=sys.stderr)
    return k, p.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("comparison")
    ap.add_argument("out")
    ap.add_argument("--policy", default="plb-heft")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", help="only the pairs whose folder name contains this")
    a = ap.parse_args()
    if not os.access(PLB, os.X_OK):
        sys.exit(f"{PLB} not built (cargo build --release)")
    todo = pairs(a.comparison)
    if a.only:
        todo = {k: b for k, b in todo.items() if a.only in os.path.basename(folder(a.out, k))}
    if not todo:
        sys.exit("no pair to trace")
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    with ThreadPoolExecutor(a.jobs) as pool:
        jobs = [pool.submit(run, a.out, k, [a.policy, best]) for k, best in todo.items()]
        for i, j in enumerate(jobs, 1):
            k, rc = j.result()
            failed += rc != 0
            print(f"[{i}/{len(jobs)}] {' '.join(k)}{'' if rc == 0 else ' FAILED'}", file=sys.stderr)
    rows = []
    for k, best in sorted(todo.items()):
        f = os.path.join(folder(a.out, k), "simgrid.csv")
        if not os.path.exists(f):
            continue
        got = {r["policy"]: r for r in csv.DictReader(open(f)) if r["check"] == "ok"}
        for who, policy in (("ours", a.policy), ("starpu_best", best)):
            r = got.get(policy)
            if r is None:
                continue
            rows.append(dict(machine=k[0], case=k[1], n=k[2], tile=k[3], who=who,
                             policy=policy, sim_ms=r["sim_ms"], gib_moved=r["gib_moved"],
                             cpu_tasks=r["cpu_tasks"], cuda_tasks=r["cuda_tasks"],
                             **{c: r.get(c, "") for c in SPLIT}))
    path = os.path.join(a.out, "trace.csv")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["machine", "case", "n", "tile", "who", "policy",
                                           "sim_ms", "gib_moved", "cpu_tasks", "cuda_tasks"] + SPLIT)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}")
    by = {}
    for r in rows:
        by.setdefault((r["machine"], r["case"], r["n"], r["tile"]), {})[r["who"]] = r
    table = []
    for k, v in by.items():
        if "ours" not in v or "starpu_best" not in v:
            continue
        o, b = v["ours"], v["starpu_best"]
        ratio = float(o["sim_ms"]) / float(b["sim_ms"])
        diff = [float(o[c] or 0) - float(b[c] or 0) for c in SPLIT]
        table.append((ratio, k, b["policy"], diff))
    table.sort(reverse=True)
    print("ratio  pair                              best                GPU exec  GPU data wait  GPU sleep  CPU exec   (ours - best, ms summed over the kind's workers)")
    for ratio, k, best, d in table:
        print(f"{ratio:.3f}  {' '.join(k):32s}  {best:18s}  {d[3]:+8.0f}  {d[4]:+13.0f}  {d[5]:+9.0f}  {d[0]:+8.0f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
