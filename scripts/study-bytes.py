#!/usr/bin/env python3
"""The third paper's claim on the study's rows: one policy moving at most
a fraction of another's bytes at a makespan at most a factor of its.

usage: scripts/study-bytes.py [--bytes 0.5] [--makespan 1.13] [--csv OUT]
           POLICY REF DIR [DIR ...]

Rows (after learning: the policy's name without " (cold)") come from
every simgrid.csv under each DIR (or the file DIR), the later DIRs' rows
replacing the earlier ones' for a pair; a pair counts when both POLICY
and REF ran it.
Prints the pairs where POLICY's bytes are at most --bytes times REF's and
its makespan at most --makespan times REF's, how many of how many, and
the pair with the fewest bytes relative to REF's.
"""

import argparse
import csv
import glob
import os


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=float, default=0.5)
    ap.add_argument("--makespan", type=float, default=1.13)
    ap.add_argument("--csv")
    ap.add_argument("policy")
    ap.add_argument("ref")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    runs = {}
    for d in a.dirs:
        files = [d] if os.path.isfile(d) else sorted(glob.glob(os.path.join(d, "**", "simgrid.csv"), recursive=True))
        for f in files:
            for r in csv.DictReader(open(f)):
                if r["policy"] in (a.policy, a.ref) and r["sim_ms"] and r["gib_moved"]:
                    k = (r["machine"], r["case"], r["n"], r["tile"])
                    runs.setdefault(k, {})[r["policy"]] = (float(r["sim_ms"]), float(r["gib_moved"]))
    rows = []
    for k, v in sorted(runs.items()):
        if a.policy in v and a.ref in v:
            (ms, gib), (ref_ms, ref_gib) = v[a.policy], v[a.ref]
            rows.append((k, gib / ref_gib, ms / ref_ms))
    if not rows:
        raise SystemExit(f"no pair with both {a.policy} and {a.ref}")
    met = [r for r in rows if r[1] <= a.bytes and r[2] <= a.makespan]
    print(f"{a.policy} against {a.ref}: bytes at most {a.bytes}x at a makespan at most "
          f"{a.makespan}x on {len(met)} of {len(rows)} pairs")
    for k, b, m in sorted(met, key=lambda r: r[1]):
        print(f"  {' '.join(k)}: bytes {b:.3f}x, makespan {m:.3f}x")
    k, b, m = min(rows, key=lambda r: r[1])
    print(f"fewest bytes: {' '.join(k)}, {b:.3f}x at {m:.3f}x the makespan")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["machine", "case", "n", "tile", "bytes_ratio", "makespan_ratio"])
            for k, b, m in rows:
                w.writerow([*k, f"{b:.4f}", f"{m:.4f}"])


if __name__ == "__main__":
    main()
