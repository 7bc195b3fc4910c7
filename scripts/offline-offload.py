#!/usr/bin/env python3
"""Offline schedules of recorded task graphs, to ask whether HEFT's CPU
offload has room (docs/results.md, twentieth round).

Reads `PLB_GRAPH` files (`plb simgrid` writes them as
`DIR/runs/*-graph.csv` unless `--no-graph-bound`; format in
core/src/dag/record.rs) and schedules each graph offline, with the
instance of `plb bound`: each task's duration per worker kind (StarPU's
sampled model, the fastest worker of the kind), every worker of a kind as
fast, no data transfers. It prints, per graph, in milliseconds:

- `heft`: HEFT with the whole graph known (tasks by decreasing upward rank
  of mean durations, each on the worker finishing it first after its
  worker's last task): `plb bound`'s offline HEFT column;
- `heft_insertion`: the same, a task allowed into an earlier idle gap of
  a worker (Topcuoglu et al.'s insertion);
- `offload`: the same with insertion, and a task whose speedup (CPU over
  accelerator duration) is below SMAX placed on the CPU worker finishing
  it first when that finish is at most its latest finish for a target
  makespan F x `heft_insertion` (the target less the longest chain of
  cheapest durations after it); the shortest over the grid SMAX in
  {3, 5, 12} and F in {0.7, 0.8, 0.85, 0.9, 0.95, 1.0}, with the values
  chosen (an oracle's choice per graph, not a rule).

Usage: scripts/offline-offload.py [--csv OUT] GRAPH.csv...
"""
import argparse
import bisect
import csv
import heapq
import os
import sys


def load(path):
    """The graph: successors, predecessors and each task's duration per kind."""
    rows = list(csv.DictReader(open(path)))
    n = len(rows)
    succ = [[] for _ in range(n)]
    # A successor named in row i is the first row after i with that address.
    last = {}
    for i in range(n - 1, -1, -1):
        for a in filter(None, rows[i]["successors"].split(";")):
            if a in last:
                succ[i].append(last[a])
        last[rows[i]["task"]] = i
    ms, workers = [], {}
    for r in rows:
        d = {}
        for kv in filter(None, r["expected_ms"].split(";")):
            w, v = kv.split("=")
            kind = w.rstrip("0123456789")
            d[kind] = min(d.get(kind, float("inf")), float(v))
            workers.setdefault(kind, set()).add(w)
        ms.append(d)
    pred = [[] for _ in range(n)]
    for i in range(n):
        for s in succ[i]:
            pred[s].append(i)
    return {"n": n, "succ": succ, "pred": pred, "ms": ms,
            "workers": {k: len(v) for k, v in workers.items()}}


def upward_ranks(g, cost):
    indeg = [len(p) for p in g["pred"]]
    stack = [i for i in range(g["n"]) if indeg[i] == 0]
    order = []
    while stack:
        i = stack.pop()
        order.append(i)
        for s in g["succ"][i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                stack.append(s)
    if len(order) != g["n"]:
        sys.exit("the graph has a cycle")
    rank = [0.0] * g["n"]
    for j in reversed(order):
        rank[j] = cost(j) + max((rank[s] for s in g["succ"][j]), default=0.0)
    return rank


def mean_cost(g):
    w = g["workers"]
    return lambda j: (sum(w[k] * d for k, d in g["ms"][j].items())
                      / sum(w[k] for k in g["ms"][j]))


def earliest_slot(busy, ready, d):
    """The earliest start at or after `ready` of a gap of length `d`."""
    prev = 0.0
    for s, e in busy:
        start = max(prev, ready)
        if start + d <= s + 1e-12:
            return start
        prev = max(prev, e)
    return max(prev, ready)


def schedule(g, prio, insertion, latest=None, smax=0.0):
    """List schedule by priority among ready tasks; the makespan (ms)."""
    n, w = g["n"], g["workers"]
    busy = {k: [[] for _ in range(c)] for k, c in w.items()}
    free = {k: [0.0] * c for k, c in w.items()}
    indeg = [len(p) for p in g["pred"]]
    ready_at = [0.0] * n
    heap = [(-prio[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    makespan = 0.0
    while heap:
        _, j = heapq.heappop(heap)
        ms = g["ms"][j]
        acc = [v for k, v in ms.items() if k != "cpu"]
        speedup = ms["cpu"] / min(acc) if "cpu" in ms and acc else 0.0
        best = cpu = None
        for k, d in ms.items():
            for x in range(w[k]):
                st = (earliest_slot(busy[k][x], ready_at[j], d) if insertion
                      else max(free[k][x], ready_at[j]))
                e = st + d
                if best is None or e < best[0] - 1e-12:
                    best = (e, k, x, st)
                if (latest is not None and k == "cpu" and speedup < smax
                        and e <= latest[j] and (cpu is None or e < cpu[0])):
                    cpu = (e, k, x, st)
        e, k, x, st = cpu or best
        if insertion:
            bisect.insort(busy[k][x], (st, e))
        free[k][x] = max(free[k][x], e)
        makespan = max(makespan, e)
        for s in g["succ"][j]:
            ready_at[s] = max(ready_at[s], e)
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (-prio[s], s))
    return makespan


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv")
    ap.add_argument("graphs", nargs="+")
    a = ap.parse_args()
    out = []
    for path in a.graphs:
        g = load(path)
        rank = upward_ranks(g, mean_cost(g))
        cheapest = lambda j: min(g["ms"][j].values())
        rmin = upward_ranks(g, cheapest)
        heft = schedule(g, rank, False)
        heft_ins = schedule(g, rank, True)
        best = (heft_ins, None, None)
        for smax in (3.0, 5.0, 12.0):
            for f in (0.7, 0.8, 0.85, 0.9, 0.95, 1.0):
                target = f * heft_ins
                latest = [target - (rmin[j] - cheapest(j)) for j in range(g["n"])]
                m = schedule(g, rank, True, latest, smax)
                if m < best[0]:
                    best = (m, smax, f)
        name = os.path.basename(path).replace("-graph.csv", "")
        row = {"graph": name, "tasks": g["n"],
               "workers": " ".join(f"{k}={c}" for k, c in sorted(g["workers"].items())),
               "heft": round(heft, 1), "heft_insertion": round(heft_ins, 1),
               "offload": round(best[0], 1), "smax": best[1], "f": best[2],
               "offload_over_heft_insertion": round(best[0] / heft_ins, 3)}
        out.append(row)
        print(",".join(str(v) for v in row.values()), flush=True)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(out[0].keys()))
            wr.writeheader()
            wr.writerows(out)


if __name__ == "__main__":
    main()
