#!/usr/bin/env python3
"""Tasks per GPU and span of each iteration of StarPU's GEMM example (16
tasks per iteration) from a `PLB_TRACE` file.

usage: iterations.py TRACE.csv [TASKS_PER_ITERATION]
"""
import collections
import csv
import sys

rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["kind"] == "task"]
rows.sort(key=lambda r: float(r["start_s"]))
per = int(sys.argv[2]) if len(sys.argv) > 2 else 16
for it in range(len(rows) // per):
    group = rows[it * per:(it + 1) * per]
    count = collections.Counter(r["worker"] for r in group)
    start = float(group[0]["start_s"]) * 1e3
    end = max(float(r["end_s"]) for r in group) * 1e3
    split = " ".join(f"{w}:{n}" for w, n in sorted(count.items()))
    print(f"iteration {it}: tasks per worker {split}, span {end - start:.1f} ms")
