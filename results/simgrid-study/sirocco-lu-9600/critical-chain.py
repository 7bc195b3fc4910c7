#!/usr/bin/env python3
"""The chain of tasks that ended a run, from a `PLB_GRAPH` record: from the
last task to end, each task's predecessor that ended last. Prints each
task's worker, start, duration, its shortest StarPU prediction over the
workers, and how long it waited after that predecessor ended.

usage: critical-chain.py GRAPH.csv
"""
import bisect
import collections
import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
# A successor named in row i is the next row after i with that address
# (plb_core::dag::record).
rows_of = collections.defaultdict(list)
for i, r in enumerate(rows):
    rows_of[r["task"]].append(i)
preds = [[] for _ in rows]
for i, r in enumerate(rows):
    for address in filter(None, r["successors"].split(";")):
        later = rows_of.get(address, [])
        j = bisect.bisect_right(later, i)
        if j < len(later):
            preds[later[j]].append(i)


def ms(i, column):
    return float(rows[i][column]) * 1e3


chain = [max(range(len(rows)), key=lambda i: ms(i, "end_s"))]
while preds[chain[-1]]:
    chain.append(max(preds[chain[-1]], key=lambda i: ms(i, "end_s")))
chain.reverse()
previous_end = 0.0
waited = 0.0
for i in chain:
    predicted = [float(kv.split("=")[1]) for kv in rows[i]["expected_ms"].split(";") if kv]
    wait = ms(i, "start_s") - previous_end
    waited += wait
    print(f"{rows[i]['worker']:>7} start {ms(i, 'start_s'):8.1f} ms, ran {ms(i, 'end_s') - ms(i, 'start_s'):6.1f}, "
          f"shortest prediction {min(predicted):6.1f}, waited {wait:5.1f}")
    previous_end = ms(i, "end_s")
print(f"{len(chain)} tasks, {waited:.1f} ms of waits")
