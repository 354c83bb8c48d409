"""Protobuf wire format and snappy helpers for the e2e tests that speak
Prometheus's remote write and remote read by hand (standard library only)."""


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def ld(field, payload):
    return uvarint((field << 3) | 2) + uvarint(len(payload)) + payload


def vint(field, n):
    return uvarint(field << 3) + uvarint(n & 0xFFFFFFFFFFFFFFFF)


def snappy_literal(data):
    out = bytearray(uvarint(len(data)))
    for i in range(0, len(data), 60):
        chunk = data[i:i + 60]
        out.append((len(chunk) - 1) << 2)
        out += chunk
    return bytes(out)


def read_uvarint(b, i):
    shift = result = 0
    while True:
        x = b[i]
        i += 1
        result |= (x & 0x7F) << shift
        if x < 0x80:
            return result, i
        shift += 7


def snappy_decode(b):
    n, i = read_uvarint(b, 0)
    out = bytearray()
    while i < len(b):
        tag = b[i]
        i += 1
        kind = tag & 3
        if kind == 0:
            ln = tag >> 2
            if ln >= 60:
                k = ln - 59
                ln = int.from_bytes(b[i:i + k], "little")
                i += k
            ln += 1
            out += b[i:i + ln]
            i += ln
            continue
        if kind == 1:
            ln, off = ((tag >> 2) & 7) + 4, ((tag >> 5) << 8) | b[i]
            i += 1
        elif kind == 2:
            ln, off = (tag >> 2) + 1, int.from_bytes(b[i:i + 2], "little")
            i += 2
        else:
            ln, off = (tag >> 2) + 1, int.from_bytes(b[i:i + 4], "little")
            i += 4
        for _ in range(ln):
            out.append(out[-off])
    assert len(out) == n, (len(out), n)
    return bytes(out)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def fields(msg):
    """(field, value) pairs of a protobuf message: ints, bytes or 8-byte raw."""
    i, out = 0, []
    while i < len(msg):
        tag, i = read_uvarint(msg, i)
        f, w = tag >> 3, tag & 7
        if w == 0:
            v, i = read_uvarint(msg, i)
        elif w == 1:
            v, i = msg[i:i + 8], i + 8
        elif w == 2:
            n, i = read_uvarint(msg, i)
            v, i = msg[i:i + n], i + n
        else:
            raise AssertionError("wire type %d" % w)
        out.append((f, v))
    return out
