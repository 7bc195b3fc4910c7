#!/usr/bin/env python3
"""Where a task-graph run's time went, from a `PLB_TRACE` file.

    python3 scripts/trace-kernels.py --accelerators N TRACE.csv [TRACE.csv ...]

For each trace (one run of a task-graph policy: its `task` rows), prints
the tasks each worker kind ran, told apart by their size (the trace's
`units`: a task's data bytes when it has no flop count, so for StarPU's
LU one tile is GETRF, two TRSM, three GEMM), with their count, their
summed and mean execution time; the tasks each accelerator ran; then how
many workers of each kind were busy, on average, in each tenth of the
run.

`--accelerators N`: the first N worker ids are the accelerators (StarPU
numbers its CUDA workers before its CPU workers; check the counts printed
against `plb simgrid`'s `cpu_tasks` and `cuda_tasks` columns).
`--csv OUT` also writes the per-kind, per-size rows.
"""

import argparse
import collections
import csv
import sys

TENTHS = 10


def load(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("kind") == "task"]
    if not rows:
        sys.exit(f"{path}: no task rows (is it a PLB_TRACE file of a task-graph run?)")
    return [
        (int(r["worker"]), float(r["start_s"]), float(r["end_s"]), r["units"])
        for r in rows
    ]


def busy_per_tenth(tasks, t0, span):
    """Mean number of workers executing in each tenth of [t0, t0 + span]."""
    width = span / TENTHS
    busy = [0.0] * TENTHS
    for _, s, e, _ in tasks:
        for i in range(TENTHS):
            a = t0 + i * width
            b = a + width
            busy[i] += max(0.0, min(e, b) - max(s, a))
    return [x / width for x in busy] if width > 0 else busy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--accelerators", type=int, required=True, metavar="N")
    ap.add_argument("--csv", metavar="OUT")
    args = ap.parse_args()
    if args.accelerators < 0:
        sys.exit("--accelerators must be >= 0")
    out = []
    for path in args.traces:
        tasks = load(path)
        t0 = min(s for _, s, _, _ in tasks)
        span = max(e for _, _, e, _ in tasks) - t0
        kind = lambda w: "accelerator" if w < args.accelerators else "cpu"
        by = collections.defaultdict(lambda: [0, 0.0])
        for w, s, e, units in tasks:
            cell = by[(kind(w), units)]
            cell[0] += 1
            cell[1] += e - s
        print(f"{path}: {len(tasks)} tasks, first start to last end {span * 1000:.1f} ms")
        for (k, units), (n, secs) in sorted(by.items(), key=lambda x: (x[0][0], float(x[0][1]))):
            print(f"  {k:11} size {units:>12}: {n:5} tasks, {secs * 1000:9.1f} ms, {secs * 1000 / n:7.2f} ms each")
            out.append([path, k, units, n, f"{secs * 1000:.1f}", f"{secs * 1000 / n:.3f}"])
        per_worker = collections.Counter(w for w, _, _, _ in tasks)
        accels = [w for w in sorted(per_worker) if w < args.accelerators]
        if accels:
            print("  tasks per accelerator: " + ", ".join(f"{w}: {per_worker[w]}" for w in accels))
        for k in ("accelerator", "cpu"):
            mine = [t for t in tasks if kind(t[0]) == k]
            if mine:
                tenths = busy_per_tenth(mine, t0, span)
                print(f"  {k} workers busy per tenth: " + " ".join(f"{x:.2f}" for x in tenths))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["trace", "kind", "units", "tasks", "exec_ms", "mean_ms"])
            w.writerows(out)


if __name__ == "__main__":
    main()
