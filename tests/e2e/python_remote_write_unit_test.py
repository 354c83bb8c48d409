#!/usr/bin/env python3
"""Unit tests of the Python client's native-histogram remote write
(clients/python/trainwatch/_remote_write.py) and of what
trainwatch.torch.watch() sends with it, without a trainwatch server: the
bucket index of schema 3 (exact powers of two and the bucket bounds are
upper bounds, the next float is in the next bucket), spans and absolute
counts, the literal-only snappy block (decoded by tests/e2e/protowire.py),
the WriteRequest's fields decoded back, the writer against a small HTTP
server (headers, path, basic auth; one warning and no exception for a
server that is down; no more sends after a 4xx), and watch()'s
train_step_duration_seconds (one observation per step after the first,
sent every `every` steps and at remove(), none with step_histogram=False;
skips without torch).

Usage: python_remote_write_unit_test.py [unittest args]
"""
import base64
import http.server
import math
import os
import socket
import struct
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, HERE)

from protowire import fields, snappy_decode  # noqa: E402
from trainwatch import _remote_write as rw  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

needs_torch = unittest.skipIf(torch is None, "torch missing (Debian: python3-torch)")


def unzigzag(n):
    return (n >> 1) ^ -(n & 1)


def decode_request(body):
    """A snappy WriteRequest with one TimeSeries and one Histogram ->
    (labels dict, {field: [values]} of the histogram, decoded)."""
    req = fields(snappy_decode(body))
    assert [f for f, _ in req] == [1], req
    labels, hists = [], []
    for f, v in fields(req[0][1]):
        if f == 1:
            kv = dict(fields(v))
            labels.append((kv[1].decode(), kv[2].decode()))
        elif f == 4:
            hists.append(v)
        else:
            raise AssertionError("TimeSeries field %d" % f)
    assert labels == sorted(labels), labels
    assert len(hists) == 1, hists
    h = {}
    for f, v in fields(hists[0]):
        if f in (2, 3, 5, 7):
            v = struct.unpack("<d", v)[0]
        elif f == 4:
            v = unzigzag(v)
        elif f == 11:
            span = dict(fields(v))
            v = (unzigzag(span.get(1, 0)), span.get(2, 0))
        elif f == 13:
            v = list(struct.unpack("<%dd" % (len(v) // 8), v))
        h.setdefault(f, []).append(v)
    return dict(labels), h


def expand(spans, counts):
    """{bucket index: count} from spans and absolute counts."""
    out, i, k = {}, 0, 0
    for offset, length in spans:  # the first offset is the first index, later ones gaps
        i += offset
        for _ in range(length):
            out[i] = counts[k]
            i += 1
            k += 1
    assert k == len(counts)
    return out


class Recorder(http.server.BaseHTTPRequestHandler):
    """Records POSTs; answers with the server's `status`."""
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.got.append((self.path, dict(self.headers), body))
        status = self.server.status
        payload = b"" if status == 204 else b'{"status":"error","error":"refused"}'
        self.send_response(status)
        if payload:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


class FakeServer:
    def __init__(self, status=204):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        self.httpd.got = []
        self.httpd.status = status
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def got(self):
        return self.httpd.got

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BucketIndexTest(unittest.TestCase):
    def test_powers_of_two_are_upper_bounds(self):
        for k in range(-60, 61):
            v = math.ldexp(1.0, k)
            self.assertEqual(rw.bucket_index(v, 3), 8 * k, v)
            self.assertEqual(rw.bucket_index(math.nextafter(v, math.inf), 3), 8 * k + 1, v)
            self.assertEqual(rw.bucket_index(math.nextafter(v, 0), 3), 8 * k, v)
        self.assertEqual(rw.bucket_index(1.0, 0), 0)
        self.assertEqual(rw.bucket_index(3.0, 0), 2)   # (2, 4]
        self.assertEqual(rw.bucket_index(4.0, 0), 2)

    def test_bounds_are_upper_bounds(self):
        for e in range(-20, 21):
            for j, b in enumerate(rw._BOUNDS[3]):
                v = math.ldexp(b, e)
                i = 8 * (e - 1) + j
                self.assertEqual(rw.bucket_index(v, 3), i, (v, e, j))
                self.assertEqual(rw.bucket_index(math.nextafter(v, math.inf), 3), i + 1, (v, e, j))

    def test_ceil_log2_away_from_bounds(self):
        for v in (0.001, 0.015, 0.0173, 0.1, 0.3, 0.99, 1.01, 1.5, 3.7, 42.0, 1e5, 1e-9, 1e-300, 1e300):
            i = rw.bucket_index(v, 3)
            self.assertEqual(i, math.ceil(math.log2(v) * 8), v)
            lo, hi = rw.bucket_bounds(i, 3)
            self.assertTrue(lo < v <= hi, (v, i, lo, hi))
        for s in range(0, 9):
            for v in (0.0173, 1.5, 1234.5):
                i = rw.bucket_index(v, s)
                lo, hi = rw.bucket_bounds(i, s)
                self.assertTrue(lo < v <= hi, (s, v, i, lo, hi))
        with self.assertRaises(ValueError):
            rw.bucket_index(1.0, 9)

    def test_spans_and_counts(self):
        self.assertEqual(rw.spans_and_counts({}), ([], []))
        self.assertEqual(rw.spans_and_counts({5: 4, -3: 1, 0: 1, -2: 2, 7: 0}),
                         ([(-3, 2), (1, 1), (4, 1)], [1.0, 2.0, 1.0, 4.0]))
        self.assertEqual(rw.spans_and_counts({-48: 3, -47: 1, -46: 2}), ([(-48, 3)], [3.0, 1.0, 2.0]))


class EncodingTest(unittest.TestCase):
    def test_snappy_literals(self):
        for n in (0, 1, 59, 60, 61, 255, 256, 257, 300, 65535, 65536, 65537, 200000):
            data = bytes((i * 7 + n) & 0xFF for i in range(n))
            block = rw.snappy_block(data)
            self.assertEqual(snappy_decode(block), data, n)
            self.assertLess(len(block), n + 16 + 8 * (n // 65536 + 1))

    def test_write_request(self):
        h = rw.NativeHistogram(3)
        values = [0.015, 0.016, 0.0173, 0.5, 0.0, 1.0, 1.0, 3.9, float("nan"), -1.0, float("inf")]
        for v in values:
            h.observe(v)
        count, total, zero, buckets = h.snapshot()
        self.assertEqual(count, 8)
        self.assertEqual(zero, 1)
        self.assertAlmostEqual(total, 0.015 + 0.016 + 0.0173 + 0.5 + 2.0 + 3.9)
        body = rw.snappy_block(rw.encode_write_request(
            "train_step_duration_seconds", {"run": "r1", "rank": "0", "job": "trainwatch"}, h.encode(1700000000123)))
        labels, f = decode_request(body)
        self.assertEqual(labels, {"__name__": "train_step_duration_seconds", "job": "trainwatch",
                                  "rank": "0", "run": "r1"})
        self.assertEqual(f[2], [8.0])
        self.assertAlmostEqual(f[3][0], total)
        self.assertEqual(f[4], [3])
        self.assertEqual(f[5], [0.0])
        self.assertEqual(f[7], [1.0])
        self.assertEqual(f[15], [1700000000123])
        self.assertNotIn(1, f)   # count_int: float counts only
        self.assertNotIn(12, f)  # positive_deltas
        got = expand(f[11], f[13][0])
        want = {}
        for v in values:
            if v > 0 and not math.isinf(v):
                i = math.ceil(math.log2(v) * 8)
                want[i] = want.get(i, 0) + 1
        self.assertEqual(got, want)
        self.assertEqual(sum(got.values()) + f[7][0], f[2][0])


class WriterTest(unittest.TestCase):
    def test_sends_with_remote_write_headers(self):
        srv = FakeServer()
        self.addCleanup(srv.close)
        url = srv.url.replace("http://", "http://u:p%40ss@") + "/prefix"
        w = rw.HistogramWriter(url, "m", {"run": "x"}, timeout=5)
        h = rw.NativeHistogram()
        for v in (0.1, 0.2, 0.2):
            h.observe(v)
        w.submit(h.snapshot(), ts_ms=1000)
        self.assertTrue(w.flush(10))
        h.observe(0.4)
        w.submit(h.snapshot(), ts_ms=2000)
        self.assertTrue(w.close(10))
        self.assertEqual(len(srv.got), 2, srv.got)
        self.assertEqual((w.sent, w.failed, w.warned), (2, 0, False))
        for (path, headers, body), (count, ts) in zip(srv.got, ((3.0, 1000), (4.0, 2000))):
            self.assertEqual(path, "/prefix/api/v1/write")
            self.assertEqual(headers["Content-Encoding"], "snappy")
            self.assertEqual(headers["Content-Type"], "application/x-protobuf")
            self.assertEqual(headers["X-Prometheus-Remote-Write-Version"], "0.1.0")
            self.assertEqual(headers["Authorization"], "Basic " + base64.b64encode(b"u:p@ss").decode())
            labels, f = decode_request(body)
            self.assertEqual(labels, {"__name__": "m", "run": "x"})
            self.assertEqual((f[2][0], f[15][0]), (count, ts))

    def test_unreachable_warns_once_and_goes_on(self):
        warnings = []
        w = rw.HistogramWriter("http://127.0.0.1:%d" % closed_port(), "m", {}, timeout=2, warn=warnings.append)
        h = rw.NativeHistogram()
        h.observe(0.1)
        for _ in range(3):
            w.submit(h.snapshot())
            w.flush(10)
        self.assertEqual((w.sent, w.failed, w.disabled), (0, 3, False))
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("remote write of m", warnings[0])
        self.assertIn("unreachable", warnings[0])

    def test_refusal_stops_sending(self):
        srv = FakeServer(status=400)
        self.addCleanup(srv.close)
        warnings = []
        w = rw.HistogramWriter(srv.url, "m", {}, timeout=5, warn=warnings.append)
        h = rw.NativeHistogram()
        h.observe(0.1)
        w.submit(h.snapshot())
        w.flush(10)
        w.submit(h.snapshot())
        w.flush(10)
        self.assertTrue(w.disabled)
        self.assertEqual(len(srv.got), 1)
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("400 refused", warnings[0])


class FakeRun:
    """What watch() uses of a Run."""

    def __init__(self, url):
        self.url, self.id, self.rank, self._timeout, self._token = url, "run1", 3, 5.0, None
        self._finish_hooks = []
        self._finished = False
        self.logged = []

    def log(self, values, step=None):
        self.logged.append((step, values))

    def finish(self):
        self._finished = True
        for hook in list(self._finish_hooks):
            hook(5.0)


@needs_torch
class WatchTest(unittest.TestCase):
    def train(self, steps, **kw):
        import trainwatch.torch as twt
        srv = FakeServer()
        self.addCleanup(srv.close)
        run = FakeRun(srv.url)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        w = twt.watch(model, opt, every=5, run=run, **kw)
        for _ in range(steps):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
        return srv, run, w

    def test_sends_step_durations(self):
        srv, run, w = self.train(12)
        self.assertEqual(w.step_durations.count, 11)  # the time between steps: one fewer than steps
        self.assertEqual(run._finish_hooks, [w._at_finish])
        w._writer.flush(10)
        # At steps 5 and 10 (the one at 5 may have been replaced by 10's before it went).
        self.assertIn([decode_request(b)[1][2][0] for _, _, b in srv.got], ([5.0, 10.0], [10.0]))
        w.remove()  # sends the last state
        self.assertEqual(run._finish_hooks, [])
        counts = []
        for path, headers, body in srv.got:
            labels, f = decode_request(body)
            self.assertEqual(labels, {"__name__": "train_step_duration_seconds", "job": "trainwatch",
                                      "run": "run1", "rank": "3"})
            self.assertEqual(f[4], [3])
            counts.append(f[2][0])
        self.assertEqual(counts[-2:], [10.0, 11.0])
        _, f = decode_request(srv.got[-1][2])
        self.assertEqual(expand(f[11], f[13][0]), {i: float(c) for i, c in w.step_durations.buckets.items()})
        self.assertAlmostEqual(f[3][0], w.step_durations.sum)

    def test_finish_sends_the_last_state(self):
        srv, run, w = self.train(7)
        run.finish()
        self.assertEqual(run._finish_hooks, [])
        counts = [decode_request(b)[1][2][0] for _, _, b in srv.got]
        self.assertIn(counts, ([5.0, 6.0], [6.0]))
        w.remove()
        self.assertEqual(len(srv.got), len(counts))  # nothing after finish

    def test_opt_out(self):
        srv, run, w = self.train(12, step_histogram=False)
        w.remove()
        self.assertIsNone(w.step_durations)
        self.assertEqual(srv.got, [])
        self.assertEqual(run._finish_hooks, [])
        self.assertIn("step_time_seconds", run.logged[-1][1])


if __name__ == "__main__":
    unittest.main()
