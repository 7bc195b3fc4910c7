#!/usr/bin/env python3
"""The critical path of a run, from the task graph it recorded.

usage: scripts/critical-path.py GRAPH.csv [--workers]

GRAPH.csv is what `PLB_GRAPH=<file>` writes (one row per task: its
worker, start, end, successors and when it was pushed; plb-heft, dada and
dada-cp record it, e.g. `plb simgrid --policies "plb-heft+PLB_GRAPH=/tmp/g.csv"`).
From the task that ended last, each step goes back to the predecessor
that ended last: the chain that held the end of the run. Prints one line
per task of the chain (its worker, when it was pushed, i.e. ready, when it
started and ended, how long it waited between the two and ran), then the
chain's length, its total wait, and its tasks per worker kind. With
--workers, also each worker's share of the chain's run time.

A wait is the time from push to start: queued behind other work, or
waiting for its data.
"""

import csv
import sys


def load(path):
    tasks = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            pushed = r.get("pushed_s") or ""
            tasks[r["task"]] = {
                "worker": r["worker"],
                "start": 1e3 * float(r["start_s"]),
                "end": 1e3 * float(r["end_s"]),
                "pushed": 1e3 * float(pushed) if pushed else None,
                "succ": [s for s in r["successors"].split(";") if s],
            }
    return tasks


def chain(tasks):
    preds = {k: [] for k in tasks}
    for k, t in tasks.items():
        for s in t["succ"]:
            if s in preds:
                preds[s].append(k)
    out = [max(tasks, key=lambda k: tasks[k]["end"])]
    while preds[out[-1]]:
        out.append(max(preds[out[-1]], key=lambda k: tasks[k]["end"]))
    out.reverse()
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    tasks = load(args[0])
    if not tasks:
        sys.exit(f"{args[0]}: no task rows")
    path = chain(tasks)
    waited = 0.0
    kinds = {}
    ran = {}
    print(f"{'task':>14} {'worker':>8} {'pushed':>9} {'start':>9} {'wait':>7} {'end':>9} {'ran':>7}  (ms)")
    for k in path:
        t = tasks[k]
        wait = t["start"] - t["pushed"] if t["pushed"] is not None else 0.0
        waited += wait
        kind = t["worker"].rstrip("0123456789")
        kinds[kind] = kinds.get(kind, 0) + 1
        ran[t["worker"]] = ran.get(t["worker"], 0.0) + t["end"] - t["start"]
        pushed = f"{t['pushed']:9.1f}" if t["pushed"] is not None else f"{'-':>9}"
        print(
            f"{k:>14} {t['worker']:>8} {pushed} {t['start']:9.1f} {wait:7.1f} "
            f"{t['end']:9.1f} {t['end'] - t['start']:7.2f}"
        )
    end = tasks[path[-1]]["end"]
    per_kind = ", ".join(f"{n} on {k}" for k, n in sorted(kinds.items()))
    print(f"chain: {len(path)} tasks ({per_kind}), ends at {end:.1f} ms, waited {waited:.1f} ms in all")
    if "--workers" in sys.argv:
        for w, s in sorted(ran.items(), key=lambda x: -x[1]):
            print(f"  {w}: ran {s:.1f} ms of the chain")


if __name__ == "__main__":
    main()
