#!/usr/bin/env python3
"""Entropy floor of the peers workload's values, per metric name, for the
dense codec's bytes/sample (docs/performance.md, "What bounds dense bytes
per sample").

  python3 src/tsdb/chunkenc/dense_bound.py [--chunk 240] /tmp/chunkenc/workload.bin

Reads a testdata_gen.py dump (format TWCD). Each chunk's values are made
integers the way the codec does (decimal m = v * 10^e, else binary fixed
point m = v * 2^k), then for each difference order 0..6 the residuals'
entropy is estimated, after dividing by their gcd (quantised steps): the
plug-in entropy of their histogram when they take few values (variance <=
4), else a Gaussian's, log2(sigma * sqrt(2 pi e)) bits, since every wide
residual in workload.py is a Gaussian or uniform draw; for walks that stand
still part of the time, the mode's share plus the rest, if smaller. The floor is the smallest order's, per sample after the
first `order` (the first value and the timestamps carry no per-sample
entropy: timestamps are exactly periodic). It is a floor for coding each
series on its own with a fixed-order predictor; cross-series redundancy
(energy integrates power, histogram _count is the +Inf bucket) is not
counted, nor the per-chunk header (n, t0, interval, v0: about 13-20 bytes).
"""

import argparse
import collections
import math
import struct


def load(path):
    with open(path, "rb") as f:
        if f.read(4) != b"TWCD":
            raise SystemExit("not a TWCD dump")
        while True:
            h = f.read(6)
            if len(h) < 6:
                return
            nl, n = struct.unpack("<HI", h)
            name = f.read(nl).decode()
            f.read(8 * n)  # timestamps
            yield name, struct.unpack("<%dd" % n, f.read(8 * n))


def to_ints(vs):
    for e in range(0, 19):
        p = 10 ** e
        try:
            ms = [round(v * p) for v in vs]
        except (OverflowError, ValueError):
            return None
        if all((m / p if e else float(m)) == v and abs(m) < 2 ** 62 for m, v in zip(ms, vs)):
            return ms
    if not all(math.isfinite(v) for v in vs):
        return None
    den = max(v.as_integer_ratio()[1] for v in vs)
    return [v.as_integer_ratio()[0] * (den // v.as_integer_ratio()[1]) for v in vs]


def gauss_or_plugin(r):
    n = len(r)
    mu = sum(r) / n
    var = sum((x - mu) ** 2 for x in r) / n
    if var == 0:
        return 0.0
    if var > 4:
        return n * 0.5 * math.log2(2 * math.pi * math.e * var)
    return -sum(c * math.log2(c / n) for c in collections.Counter(r).values())


def entropy_bits(r):
    """Bits for residuals r: divided by their gcd (quantised steps), the
    smaller of a Gaussian/plug-in estimate and a two-part one for walks that
    stand still part of the time (the mode's frequency, then the rest)."""
    n = len(r)
    if n == 0:
        return 0.0
    g = 0
    for x in r:
        g = math.gcd(g, x)
    if g > 1:
        r = [x // g for x in r]
    best = gauss_or_plugin(r)
    mode, c = collections.Counter(r).most_common(1)[0]
    if 0 < c < n:
        p = c / n
        rest = [x for x in r if x != mode]
        best = min(best, -n * (p * math.log2(p) + (1 - p) * math.log2(1 - p)) + gauss_or_plugin(rest))
    return best


def floor_bits(ms, max_order=6):
    best, r = None, list(ms)
    for order in range(0, max_order + 1):
        if order:
            r = [b - a for a, b in zip(r, r[1:])]
        if not r:
            break
        h = entropy_bits(r)
        best = h if best is None else min(best, h)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk", type=int, default=240, help="samples per chunk (240 = the harness' hour)")
    ap.add_argument("dump")
    a = ap.parse_args()
    agg = collections.defaultdict(lambda: [0, 0, 0.0])  # series, samples, bits
    for name, vs in load(a.dump):
        acc = agg[name]
        acc[0] += 1
        for off in range(0, len(vs), a.chunk):
            v = vs[off:off + a.chunk]
            ms = to_ints(v)
            acc[1] += len(v)
            acc[2] += 64 * (len(v) - 1) if ms is None else floor_bits(ms)
    total = [0, 0, 0.0]
    print("%-42s %6s %8s %6s" % ("metric", "series", "floor B", "share"))
    rows = sorted(agg.items(), key=lambda kv: -kv[1][2])
    all_bits = sum(a[2] for _, a in rows)
    for name, acc in rows:
        print("%-42s %6d %8.3f %5.1f%%" % (name, acc[0], acc[2] / 8 / acc[1], 100 * acc[2] / all_bits))
        for i in range(3):
            total[i] += acc[i]
    print("%-42s %6d %8.3f" % ("TOTAL", total[0], total[2] / 8 / total[1]))


if __name__ == "__main__":
    main()
