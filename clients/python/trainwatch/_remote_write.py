"""Prometheus native histograms through remote write 1.0 (standard library only).

What trainwatch.torch.watch() sends its step durations with: a cumulative
(counter) native histogram of exponential schema, encoded by hand as a
prometheus.WriteRequest (prompb/remote.proto, types.proto) with one
TimeSeries holding one float Histogram, in a literal-only snappy block, and
POSTed to <server>/api/v1/write from a background thread, so the training
thread only counts and copies.

Bucket i of schema s holds the values v with 2^((i-1)/2^s) < v <= 2^(i/2^s)
(upper bounds inclusive, as Prometheus); values <= the zero threshold (0)
go to the zero bucket.
"""
import bisect
import math
import struct
import sys
import threading
import time

from ._http import Http, Unreachable, error_text, redact

WRITE_PATH = "/api/v1/write"
WRITE_HEADERS = {"Content-Encoding": "snappy", "X-Prometheus-Remote-Write-Version": "0.1.0"}
CONTENT_TYPE = "application/x-protobuf"


# ---- bucket index -------------------------------------------------------------
# schema -> [2^(j/2^s) / 2 for j in 0..2^s-1], the bucket bounds within one power of two.
# Schemas 0-3 as client_golang's nativeHistogramBounds, to the last bit (some differ by an
# ulp from the correctly rounded powers), so that a value on a bound lands where Go puts it.
_BOUNDS = {
    0: [0.5],
    1: [0.5, 0.7071067811865475],
    2: [0.5, 0.5946035575013605, 0.7071067811865475, 0.8408964152537144],
    3: [0.5, 0.5452538663326288, 0.5946035575013605, 0.6484197773255048,
        0.7071067811865475, 0.7711054127039704, 0.8408964152537144, 0.9170040432046711],
}


def _bounds(schema):
    b = _BOUNDS.get(schema)
    if b is None:
        n = 1 << schema
        b = _BOUNDS[schema] = [2.0 ** (j / n - 1) for j in range(n)]
    return b


def bucket_index(v, schema):
    """The index i of the bucket of schema `schema` (0..8) that holds v > 0:
    2^((i-1)/2^s) < v <= 2^(i/2^s). As Prometheus (histogram.go): from the
    float's exponent and a search of its fraction among the bounds, so that
    exact powers of two (and the bounds themselves) are upper bounds, with
    no rounding of log2 in between."""
    if not 0 <= schema <= 8:
        raise ValueError("schema %r: expected 0..8" % (schema,))
    frac, exp = math.frexp(v)  # v = frac * 2^exp, 0.5 <= frac < 1
    n = 1 << schema
    # frac == 0.5 (v = 2^(exp-1)) is bucket (exp-1)*n exactly; else the first bound >= frac.
    return bisect.bisect_left(_bounds(schema), frac) + (exp - 1) * n


def bucket_bounds(i, schema):
    """(lower, upper] of bucket i."""
    n = 1 << schema
    return 2.0 ** ((i - 1) / n), 2.0 ** (i / n)


def spans_and_counts(buckets):
    """{index: count} -> ([(offset, length)], [count]) of its non-empty
    buckets in index order: consecutive indexes form one span, a gap starts
    the next (its offset the gap from the end of the previous span; the
    first one's its index)."""
    spans, counts = [], []
    prev = None
    for i in sorted(k for k, c in buckets.items() if c):
        if prev is not None and i == prev + 1:
            spans[-1][1] += 1
        else:
            spans.append([i if prev is None else i - prev - 1, 1])
        counts.append(float(buckets[i]))
        prev = i
    return [tuple(s) for s in spans], counts


# ---- protobuf -------------------------------------------------------------------
def _uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _zigzag(n):
    return (n << 1) ^ (n >> 63) if n < 0 else n << 1


def _ld(field, payload):
    return _uvarint((field << 3) | 2) + _uvarint(len(payload)) + payload


def _varint(field, n):
    return _uvarint(field << 3) + _uvarint(n & 0xFFFFFFFFFFFFFFFF)


def _double(field, x):
    return _uvarint((field << 3) | 1) + struct.pack("<d", x)


def encode_histogram(count, total, schema, zero_count, buckets, ts_ms, zero_threshold=0.0):
    """A prompb Histogram with float counts: count_float 2, sum 3, schema 4
    (sint32), zero_threshold 5, zero_count_float 7, positive_spans 11
    ({offset sint32 1, length uint32 2}), positive_counts 13 (packed
    doubles, absolute), timestamp 15; reset_hint left unknown."""
    spans, counts = spans_and_counts(buckets)
    h = _double(2, float(count)) + _double(3, float(total)) + _varint(4, _zigzag(schema))
    h += _double(5, float(zero_threshold)) + _double(7, float(zero_count))
    for offset, length in spans:
        h += _ld(11, _varint(1, _zigzag(offset)) + _varint(2, length))
    if counts:
        h += _ld(13, struct.pack("<%dd" % len(counts), *counts))
    return h + _varint(15, ts_ms)


def encode_write_request(name, labels, histogram):
    """A WriteRequest with one TimeSeries{labels 1, histograms 4}: `name` as
    __name__ and `labels`, sorted by name, and the encoded `histogram`."""
    pairs = sorted([("__name__", name)] + [(str(k), str(v)) for k, v in labels.items()])
    series = b"".join(_ld(1, _ld(1, k.encode()) + _ld(2, v.encode())) for k, v in pairs)
    return _ld(1, series + _ld(4, histogram))


# ---- snappy -------------------------------------------------------------------
SNAPPY_LITERAL = 1 << 16  # bytes per literal element


def snappy_block(data):
    """`data` as a snappy block (the format remote write uses, not the
    framed stream) of literals only: valid for any decoder, no smaller."""
    data = bytes(data)
    out = bytearray(_uvarint(len(data)))
    for off in range(0, len(data), SNAPPY_LITERAL):
        chunk = data[off:off + SNAPPY_LITERAL]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        else:
            size = (n.bit_length() + 7) // 8  # 1..4 bytes of length - 1, tags 60..63
            out.append((59 + size) << 2)
            out += n.to_bytes(size, "little")
        out += chunk
    return bytes(out)


# ---- the histogram and its sender ----------------------------------------------
class NativeHistogram:
    """A cumulative native histogram of observations (exponential `schema`,
    zero threshold 0). observe() and snapshot() may run on different threads."""

    def __init__(self, schema=3):
        if not 0 <= schema <= 8:
            raise ValueError("schema %r: expected 0..8" % (schema,))
        self.schema = schema
        self.count = 0
        self.sum = 0.0
        self.zero_count = 0
        self.buckets = {}  # index -> count
        self._lock = threading.Lock()

    def observe(self, v):
        if not v >= 0 or v == math.inf:  # NaN, negative or infinite: not an observation
            return
        with self._lock:
            self.count += 1
            self.sum += v
            if v <= 0.0:
                self.zero_count += 1
            else:
                i = bucket_index(v, self.schema)
                self.buckets[i] = self.buckets.get(i, 0) + 1

    def snapshot(self):
        """(count, sum, zero_count, {index: count}): a copy."""
        with self._lock:
            return self.count, self.sum, self.zero_count, dict(self.buckets)

    def encode(self, ts_ms, snapshot=None):
        """The histogram (or its `snapshot`) at ts_ms as an encoded prompb Histogram."""
        count, total, zero, buckets = snapshot or self.snapshot()
        return encode_histogram(count, total, self.schema, zero, buckets, ts_ms)


class HistogramWriter:
    """Sends the latest state of one cumulative histogram series to
    <url>/api/v1/write on a thread of its own. submit() only hands over a
    snapshot: one waiting snapshot replaces an older one (the counts are
    cumulative, so the newest says everything the older did). A failed
    send is reported once (a warning on stderr) and the next snapshot is
    tried; a 4xx other than 408/429 (a server without remote write, no
    permission, a refused series) stops the sending. Nothing here raises
    into the caller."""

    def __init__(self, url, name, labels, schema=3, timeout=10.0, token=None, warn=None):
        self.url = url
        self.name = name
        self.labels = dict(labels)
        self.schema = schema
        self.http = Http(url, timeout=timeout, token=token)
        self._warn = warn or (lambda msg: sys.__stderr__.write("trainwatch: " + msg + "\n"))
        self._cond = threading.Condition()
        self._pending = None     # (ts_ms, snapshot) not yet sent
        self._busy = False       # a send is under way
        self._closed = False
        self._thread = None
        self.warned = False
        self.disabled = False
        self.sent = 0            # requests the server accepted
        self.failed = 0          # requests that failed
        self.last_sent_count = None  # the count of the last snapshot the server accepted

    def submit(self, snapshot, ts_ms=None):
        if self.disabled or self._closed:
            return
        if ts_ms is None:
            ts_ms = time.time_ns() // 1000000
        with self._cond:
            self._pending = (ts_ms, snapshot)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="trainwatch-histograms", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout=None):
        """Waits until the submitted snapshots are sent (or failed): True if none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending is not None or self._busy:
                if self._thread is None or not self._thread.is_alive():
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout=None):
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._pending = None
            self._cond.notify_all()
        return done

    def _loop(self):
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    self._busy = False
                    self._cond.notify_all()
                    self.http.close()
                    return
                (ts_ms, snap), self._pending = self._pending, None
                self._busy = True
            try:
                self._send(ts_ms, snap)
            except Exception as e:  # never into training; reported like a failed send
                self._fail("%s: %s" % (type(e).__name__, e))
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _send(self, ts_ms, snap):
        count, total, zero, buckets = snap
        body = snappy_block(encode_write_request(
            self.name, self.labels, encode_histogram(count, total, self.schema, zero, buckets, ts_ms)))
        try:
            status, doc = self.http.request("POST", WRITE_PATH, body, content_type=CONTENT_TYPE,
                                            headers=WRITE_HEADERS)
        except Unreachable as e:
            self._fail("server unreachable: %s" % e)
            return
        if 200 <= status < 300:
            self.sent += 1
            self.last_sent_count = count
            return
        stop = 400 <= status < 500 and status not in (408, 429)
        self._fail(error_text(status, doc), stop=stop)

    def _fail(self, why, stop=False):
        self.failed += 1
        if stop:
            self.disabled = True
            self._warn("remote write of %s to %s: %s; not sent again in this run (training goes on)"
                       % (self.name, redact(self.url), why))
            self.warned = True
            return
        if not self.warned:
            self.warned = True
            self._warn("remote write of %s to %s: %s; retried with the next snapshot, warned once "
                       "(training goes on)" % (self.name, redact(self.url), why))
