#!/usr/bin/env python3
"""How busy each run kept the link every main-memory transfer crosses, in
a `plb simgrid` output folder (SIMULATED).

usage: scripts/host-link.py [--csv OUT] DIR

DIR is a `plb simgrid --out` folder: its simgrid.csv (the `host_gib` and
`peer_gib` columns) and the platform files of its samples
(DIR/sampling/bus/<machine>.platform.xml). On StarPU's sampled machines
every transfer to or from main memory crosses the platform's `Host` link,
one resource shared by all of them. Prints, per run, the makespan, the
GiB moved through main memory and between devices, and the Host link's
share: the bytes through main memory over what the link carries in the
makespan at its bandwidth (1 would be a link busy from first to last
moment; the GEMM's makespan is its iterations' alone, so its share counts
the set-up's transfers too).
"""

import argparse
import csv
import os
import re
import sys


def host_bandwidth(platform):
    """The `Host` link's bandwidth, bytes per second."""
    with open(platform) as f:
        for line in f:
            m = re.search(r'<link id="Host" bandwidth="([0-9.eE+]+)', line)
            if m:
                return float(m.group(1))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", help="also write the rows here")
    ap.add_argument("dir")
    a = ap.parse_args()
    rows = []
    bandwidths = {}
    for r in csv.DictReader(open(os.path.join(a.dir, "simgrid.csv"))):
        if not r.get("host_gib") or not r["sim_ms"]:
            continue
        machine = r["machine"].split(":")[0]
        if machine not in bandwidths:
            path = os.path.join(a.dir, "sampling", "bus", f"{machine}.platform.xml")
            if not os.path.exists(path):
                sys.exit(f"host-link: no platform file {path}")
            bandwidths[machine] = host_bandwidth(path)
        bw = bandwidths[machine]
        if not bw:
            sys.exit(f"host-link: no Host link in {machine}'s platform file")
        host, peer, ms = float(r["host_gib"]), float(r["peer_gib"] or 0), float(r["sim_ms"])
        share = host * 2**30 / (bw * ms / 1000)
        rows.append([r["machine"], r["case"], r["n"], r["tile"], r["policy"], f"{ms:.0f}",
                     f"{host:.3f}", f"{peer:.3f}", f"{bw / 1e9:.2f}", f"{share:.3f}"])
    header = ["machine", "case", "n", "tile", "policy", "sim_ms", "host_gib", "peer_gib",
              "host_link_gb_per_s", "host_link_share"]
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)


if __name__ == "__main__":
    main()
