#!/usr/bin/env python3
"""Dumps series of the peer-benchmark workload (shared/bench/peers/workload.py)
for chunkenc_bench's real-data benchmark.

  python3 src/tsdb/chunkenc/testdata_gen.py [--targets 20] [--duration 7200] OUT
  CHUNKENC_DATA=OUT build/.../chunkenc_bench

File format (little-endian): b"TWCD", then per series: u16 name length,
u32 n, name, n x i64 timestamps (ms), n x f64 values.

With --labels (for tsdb_bench's head-memory benchmark), b"TWCL" and per
series: u16 label count, u32 n, then per label u16 name length, name, u16
value length, value (sorted by name, __name__ included), then the samples.
"""

import argparse
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for cand in (os.path.join(HERE, "../../../../shared/bench/peers"), "/work/shared/bench/peers"):
    if os.path.exists(os.path.join(cand, "workload.py")):
        sys.path.insert(0, cand)
        break
import workload  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", type=int, default=20)
    ap.add_argument("--duration", type=int, default=7200)
    ap.add_argument("--interval", type=int, default=15)
    ap.add_argument("--seed", default="trainwatch")
    ap.add_argument("--t0", type=int, default=1764633600000)
    ap.add_argument("--labels", action="store_true", help="write every label (format TWCL)")
    ap.add_argument("out")
    a = ap.parse_args()
    steps = a.duration // a.interval
    with open(a.out, "wb") as f:
        f.write(b"TWCL" if a.labels else b"TWCD")
        for i in range(a.targets):
            t = workload.Target(i, a.seed, interval_s=a.interval)
            cols = [[] for _ in t.labels]
            ts = [a.t0 + k * a.interval * 1000 + t.offset_ms for k in range(steps)]
            for _ in range(steps):
                for c, v in zip(cols, t.step()):
                    c.append(v)
            for lab, col in zip(t.labels, cols):
                if a.labels:
                    f.write(struct.pack("<HI", len(lab), steps))
                    for k in sorted(lab):
                        kb, vb = k.encode(), str(lab[k]).encode()
                        f.write(struct.pack("<H", len(kb)) + kb + struct.pack("<H", len(vb)) + vb)
                else:
                    name = lab["__name__"].encode()
                    f.write(struct.pack("<HI", len(name), steps))
                    f.write(name)
                f.write(struct.pack("<%dq" % steps, *ts))
                f.write(struct.pack("<%dd" % steps, *col))


if __name__ == "__main__":
    main()
