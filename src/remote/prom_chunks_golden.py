#!/usr/bin/env python3
"""Golden bytes for prom_chunks_test.cc: Prometheus 3's histogram chunk
writers transcribed line by line from Go (tsdb/chunkenc/bstream.go,
varbit.go, xor.go xorWrite, histogram_meta.go writeHistogramChunkLayout,
float_histogram.go appendFloatHistogram, histogram.go appendHistogram), kept
apart from the C++ encoder. Recode and cuts are not transcribed: each case
lists the samples as Prometheus's appender ends up writing them (a recoded
chunk is its samples written again with the wider spans, zeros inserted).

  python3 src/remote/prom_chunks_golden.py   # prints one hex string per case
"""

import math
import struct


class BStream:
    def __init__(self):
        self.bits = []

    def write_bits(self, v, n):
        for i in range(n - 1, -1, -1):
            self.bits.append((v >> i) & 1)

    def write_bit(self, b):
        self.bits.append(b)

    def bytes(self):
        bits = self.bits + [0] * (-len(self.bits) % 8)
        return bytes(int("".join(map(str, bits[i:i + 8])), 2) for i in range(0, len(bits), 8))


def f64(x):
    return struct.unpack(">Q", struct.pack(">d", x))[0]


def bit_range(x, n):
    return -((1 << (n - 1)) - 1) <= x <= 1 << (n - 1)


def put_varbit_int(b, v):
    if v == 0:
        b.write_bit(0)
        return
    for n, prefix, plen in ((3, 0b10, 2), (6, 0b110, 3), (9, 0b1110, 4), (12, 0b11110, 5),
                            (18, 0b111110, 6), (25, 0b1111110, 7), (56, 0b11111110, 8)):
        if bit_range(v, n):
            b.write_bits(prefix, plen)
            b.write_bits(v & ((1 << n) - 1), n)
            return
    b.write_bits(0xff, 8)
    b.write_bits(v & (2**64 - 1), 64)


def put_varbit_uint(b, v):
    if v == 0:
        b.write_bit(0)
        return
    for n, prefix, plen in ((3, 0b10, 2), (6, 0b110, 3), (9, 0b1110, 4), (12, 0b11110, 5),
                            (18, 0b111110, 6), (25, 0b1111110, 7), (56, 0b11111110, 8)):
        if v < (1 << n):
            b.write_bits(prefix, plen)
            b.write_bits(v, n)
            return
    b.write_bits(0xff, 8)
    b.write_bits(v, 64)


def leading_zeros(x):
    return 64 - x.bit_length()


def trailing_zeros(x):
    return (x & -x).bit_length() - 1


class Xor:
    def __init__(self, value=0.0):
        self.value, self.leading, self.trailing = value, 0xff, 0


def xor_write(b, new, cur):
    delta = f64(new) ^ f64(cur.value)
    cur.value = new
    if delta == 0:
        b.write_bit(0)
        return
    b.write_bit(1)
    lead, trail = min(leading_zeros(delta), 31), trailing_zeros(delta)
    if cur.leading != 0xff and lead >= cur.leading and trail >= cur.trailing:
        b.write_bit(0)
        b.write_bits(delta >> cur.trailing, 64 - cur.leading - cur.trailing)
        return
    cur.leading, cur.trailing = lead, trail
    b.write_bit(1)
    b.write_bits(lead, 5)
    sig = 64 - lead - trail
    b.write_bits(sig & 63, 6)
    b.write_bits(delta >> trail, sig)


def put_layout(b, h):
    zt = h["zt"]
    if zt == 0:
        b.write_bits(0, 8)
    else:
        frac, exp = math.frexp(zt)
        if frac != 0.5 or exp < -242 or exp > 11:
            b.write_bits(255, 8)
            b.write_bits(f64(zt), 64)
        else:
            b.write_bits(exp + 243, 8)
    put_varbit_int(b, h["schema"])
    for side in ("pspans", "nspans"):
        put_varbit_uint(b, len(h[side]))
        for off, length in h[side]:
            put_varbit_uint(b, length)
            put_varbit_int(b, off)
    if h["schema"] == -53:
        put_varbit_uint(b, len(h["custom"]))
        for f in h["custom"]:
            tf = f * 1000
            if tf < 0 or tf > 33554430 or int(round(tf)) / 1000 != f:
                b.write_bit(0)
                b.write_bits(f64(f), 64)
            else:
                put_varbit_uint(b, int(round(tf)) + 1)


def float_chunk(samples, header=0):
    """appendFloatHistogram for each (t, h); h: dict as in put_layout plus
    count, zc, sum, pb, nb (absolute bucket counts)."""
    b = BStream()
    state = None
    for num, (t, h) in enumerate(samples):
        if num == 0:
            put_layout(b, h)
            put_varbit_int(b, t)
            for v in (h["count"], h["zc"], h["sum"]):
                b.write_bits(f64(v), 64)
            for v in h["pb"] + h["nb"]:
                b.write_bits(f64(v), 64)
            state = {"t": t, "td": 0, "cnt": Xor(h["count"]), "zc": Xor(h["zc"]), "sum": Xor(h["sum"]),
                     "pb": [Xor(v) for v in h["pb"]], "nb": [Xor(v) for v in h["nb"]]}
            continue
        td = t - state["t"]
        put_varbit_int(b, td - state["td"])
        state["t"], state["td"] = t, td
        xor_write(b, h["count"], state["cnt"])
        xor_write(b, h["zc"], state["zc"])
        xor_write(b, h["sum"], state["sum"])
        for v, x in zip(h["pb"], state["pb"]):
            xor_write(b, v, x)
        for v, x in zip(h["nb"], state["nb"]):
            xor_write(b, v, x)
    return struct.pack(">HB", len(samples), header) + b.bytes()


def int_chunk(samples, header=0):
    """appendHistogram; pb/nb here are Prometheus's delta-encoded int buckets."""
    b = BStream()
    st = None
    for num, (t, h) in enumerate(samples):
        if num == 0:
            put_layout(b, h)
            put_varbit_int(b, t)
            put_varbit_uint(b, h["count"])
            put_varbit_uint(b, h["zc"])
            b.write_bits(f64(h["sum"]), 64)
            for v in h["pb"] + h["nb"]:
                put_varbit_int(b, v)
            st = {"t": t, "td": 0, "cnt": h["count"], "cd": 0, "zc": h["zc"], "zd": 0, "sum": Xor(h["sum"]),
                  "b": list(h["pb"] + h["nb"]), "bd": [0] * len(h["pb"] + h["nb"])}
            continue
        td, cd, zd = t - st["t"], h["count"] - st["cnt"], h["zc"] - st["zc"]
        put_varbit_int(b, td - st["td"])
        put_varbit_int(b, cd - st["cd"])
        put_varbit_int(b, zd - st["zd"])
        st.update(t=t, td=td, cnt=h["count"], cd=cd, zc=h["zc"], zd=zd)
        xor_write(b, h["sum"], st["sum"])
        for i, v in enumerate(h["pb"] + h["nb"]):
            d = v - st["b"][i]
            put_varbit_int(b, d - st["bd"][i])
            st["bd"][i], st["b"][i] = d, v
    return struct.pack(">HB", len(samples), header) + b.bytes()


def put_go_varint(b, v):
    """binary.PutVarint (zigzag), bytes written bit-aligned as bstream.writeByte."""
    u = (v << 1) ^ (v >> 63) if v >= 0 else ((v << 1) ^ -1) & (2**64 - 1)
    put_go_uvarint(b, u)


def put_go_uvarint(b, u):
    while u >= 0x80:
        b.write_bits((u & 0x7f) | 0x80, 8)
        u >>= 7
    b.write_bits(u, 8)


def xor_chunk(samples):
    """xorAppender.Append (xor.go): the dod buckets 14/17/20 bits take
    bitRange's -(2^(n-1)-1)..2^(n-1), so +8192 is a 14-bit value."""
    b = BStream()
    for num, (t, v) in enumerate(samples):
        if num == 0:
            put_go_varint(b, t)
            b.write_bits(f64(v), 64)
            val = Xor(v)
        elif num == 1:
            td = t - pt
            put_go_uvarint(b, td)
            xor_write(b, v, val)
        else:
            td = t - pt
            dod = td - ptd
            if dod == 0:
                b.write_bit(0)
            elif bit_range(dod, 14):
                b.write_bits(0b10, 2)
                b.write_bits(dod & (2**14 - 1), 14)
            elif bit_range(dod, 17):
                b.write_bits(0b110, 3)
                b.write_bits(dod & (2**17 - 1), 17)
            elif bit_range(dod, 20):
                b.write_bits(0b1110, 4)
                b.write_bits(dod & (2**20 - 1), 20)
            else:
                b.write_bits(0b1111, 4)
                b.write_bits(dod & (2**64 - 1), 64)
            xor_write(b, v, val)
        if num >= 1:
            ptd = t - pt
        pt = t
        if num == 0:
            ptd = 0
    return struct.pack(">H", len(samples)) + b.bytes()


def H(count, zc, s, pspans, pb, nspans=(), nb=(), schema=0, zt=2**-128, custom=()):
    return {"count": count, "zc": zc, "sum": s, "pspans": list(pspans), "pb": list(pb), "nspans": list(nspans),
            "nb": list(nb), "schema": schema, "zt": zt, "custom": list(custom)}


CASES = {
    # dods of +8192, -8191, +65536, +524288, 0: the upper edges of the 14-,
    # 17- and 20-bit buckets, which two's complement would read as negative.
    "xor_edges": xor_chunk([(0, 1.0), (1000, 1.0), (10192, 2.0), (11193, 2.5), (77730, -1.0), (668555, 0.0),
                            (1259380, 0.0)]),
    # Three samples, one layout: first sample raw, then dod timestamps and XOR'd fields.
    "float_plain": float_chunk([
        (1000, H(3, 1, 2.5, [(0, 2)], [1, 1], [(-1, 1)], [0])),
        (2000, H(5, 1, 4.5, [(0, 2)], [2, 1], [(-1, 1)], [1])),
        (3000, H(6, 1, 5.0, [(0, 2)], [2, 2], [(-1, 1)], [1])),
    ]),
    # The second sample has a new bucket (index 2): the chunk is recoded with
    # spans [(0, 3)], the first sample getting a 0 there.
    "float_recoded": float_chunk([
        (1000, H(2, 0, 1.0, [(0, 3)], [1, 1, 0])),
        (1500, H(4, 0, 3.0, [(0, 3)], [1, 2, 1])),
    ]),
    # A counter reset (count 4 -> 1) starts a second chunk, header CounterReset.
    "float_reset_second": float_chunk([
        (2000, H(1, 0, 0.5, [(0, 1)], [1])),
    ], header=0x80),
    # Custom buckets: zero threshold 0 (one zero byte), bounds 0.5 and 2.5 as
    # varbits 501 and 2501, 1e9 and -1 as a 0 bit plus the double.
    "float_custom": float_chunk([
        (-5, H(7, 0, 12.25, [(0, 5)], [1, 2, 0, 3, 1], schema=-53, zt=0, custom=[-1, 0.5, 2.5, 1e9])),
        (10, H(9, 0, 15.0, [(0, 5)], [1, 2, 1, 4, 1], schema=-53, zt=0, custom=[-1, 0.5, 2.5, 1e9])),
    ]),
    # A gauge histogram chunk (header GaugeType), zero threshold 0.001 (9 bytes).
    "float_gauge": float_chunk([
        (100, H(4, 2, -1.5, [(1, 1)], [2], schema=3, zt=0.001)),
        (200, H(2, 1, 3.0, [(1, 1)], [1], schema=3, zt=0.001)),
    ], header=0xc0),
    # An integer chunk: buckets 3 and 5 are the deltas [3, 2].
    "int_plain": int_chunk([
        (1000, H(9, 1, 20.0, [(0, 2)], [3, 2])),
        (2000, H(12, 2, 27.5, [(0, 2)], [4, 2])),
        (3000, H(15, 3, 35.0, [(0, 2)], [5, 2])),
    ], header=0x40),
}

if __name__ == "__main__":
    for name, data in CASES.items():
        print(name, data.hex())
