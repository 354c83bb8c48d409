#!/usr/bin/env python3
"""End-to-end test of the remote write 2.0 receiver: POST /api/v1/write with
Content-Type application/x-protobuf;proto=io.prometheus.write.v2.Request.

Usage: remote_write2_e2e_test.py /path/to/trainwatch [unittest args]

No remote write 2.0 sender is packaged in Debian 12, so the requests are built
here from prometheus/prometheus prompb/io/prometheus/write/v2/types.proto
(Request{symbols=4, timeseries=5}; TimeSeries{labels_refs=1, samples=2,
histograms=3, exemplars=4, metadata=5}). Checks the 204 and its
X-Prometheus-Remote-Write-*-Written headers, the stored floats and native
histograms through PromQL, 400s naming the field, 415 for unknown protos,
that 1.0 still works beside it, and durability across a kill -9.
"""
import http.client
import json
import os
import shutil
import struct
import sys
import tempfile
import time
import unittest
import urllib.parse

import twtest
from protowire import ld, snappy_literal, uvarint, vint

V2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request"


def double(field, v):
    return bytes([(field << 3) | 1]) + struct.pack("<d", v)


def zigzag(n):
    return (n << 1) ^ (n >> 63)


def sample(v, t, st=None):
    return double(1, v) + vint(2, t) + (vint(3, st) if st else b"")


def series(refs, samples=(), histograms=(), exemplars=(), metadata=None):
    out = ld(1, b"".join(uvarint(r) for r in refs))
    out += b"".join(ld(2, s) for s in samples) + b"".join(ld(3, h) for h in histograms)
    out += b"".join(ld(4, e) for e in exemplars)
    if metadata is not None:
        out += ld(5, metadata)
    return out


def request(symbols, timeseries):
    return b"".join(ld(4, s.encode()) for s in symbols) + b"".join(ld(5, ts) for ts in timeseries)


def int_histogram(t, count, total, zero, offset, counts, schema=0):
    # Integer histogram: one positive span, bucket counts as deltas.
    deltas, prev = [], 0
    for c in counts:
        deltas.append(zigzag(c - prev))
        prev = c
    return (vint(1, count) + double(3, total) + vint(4, zigzag(schema)) + double(5, 1e-128) + vint(6, zero)
            + ld(11, vint(1, zigzag(offset)) + vint(2, len(counts))) + ld(12, b"".join(uvarint(d) for d in deltas))
            + vint(14, 0) + vint(15, t))


class RemoteWrite2Test(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-rw2-e2e-")
        self.server = twtest.Server(os.path.join(self.tmp, "data")).start()
        self.now_ms = int(time.time() * 1000) // 1000 * 1000

    def tearDown(self):
        self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def post(self, proto, content_type=V2):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        conn.request("POST", "/api/v1/write", snappy_literal(proto),
                     {"Content-Type": content_type, "Content-Encoding": "snappy",
                      "X-Prometheus-Remote-Write-Version": "2.0.0"})
        resp = conn.getresponse()
        body = resp.read()
        headers = {k.lower(): v for k, v in resp.getheaders()}
        conn.close()
        return resp.status, body, headers

    def query(self, expr, at_ms=None):
        q = "/api/v1/query?query=" + urllib.parse.quote(expr) + "&time=%.3f" % ((at_ms or self.now_ms) / 1000)
        status, body = self.server.request("GET", q)
        self.assertEqual(status, 200, body)
        return json.loads(body)["data"]["result"]

    def one(self, expr, at_ms=None):
        got = self.query(expr, at_ms)
        self.assertEqual(len(got), 1, (expr, got))
        return float(got[0]["value"][1])

    def written(self, headers):
        return tuple(int(headers["x-prometheus-remote-write-%s-written" % k]) for k in ("samples", "histograms", "exemplars"))

    def test_floats_histograms_and_headers(self):
        t1, t2 = self.now_ms - 20_000, self.now_ms - 10_000
        symbols = ["", "__name__", "http_requests_total", "job", "api", "instance", "h1:9090",
                   "request_duration_seconds", "Requests served.", "seconds", "trace_id", "abc"]
        counter = series([1, 2, 3, 4, 5, 6], [sample(10, t1, t1 - 60_000), sample(25, t2)],
                         metadata=vint(1, 1) + vint(3, 8))
        hist = series([1, 7, 3, 4], histograms=[int_histogram(t1, 4, 5.0, 0, 1, [1, 3]),
                                               int_histogram(t2, 10, 14.0, 1, 1, [3, 6])],
                      exemplars=[ld(1, uvarint(10) + uvarint(11)) + double(2, 1.5) + vint(3, t2)],
                      metadata=vint(1, 3) + vint(4, 9))
        status, body, headers = self.post(request(symbols, [counter, hist]))
        self.assertEqual(status, 204, body)
        self.assertEqual(self.written(headers), (2, 2, 0))

        self.assertEqual(self.one('http_requests_total{job="api", instance="h1:9090"}', t2), 25)
        self.assertEqual(self.one('histogram_count(request_duration_seconds)', t2), 10)
        self.assertEqual(self.one('histogram_sum(request_duration_seconds)', t2), 14)
        self.assertEqual(self.one('histogram_count(request_duration_seconds)', t1), 4)
        # 1 in the zero bucket, 3 in (1,2], 6 in (2,4]: the median is 1/6 into (2,4], on a log scale.
        self.assertAlmostEqual(self.one('histogram_quantile(0.5, request_duration_seconds)', t2), 2 * 2 ** (1 / 6), places=9)
        self.assertEqual(self.one('histogram_fraction(0, 2, request_duration_seconds)', t2), 0.4)
        self.assertAlmostEqual(self.one('histogram_count(rate(request_duration_seconds[15s]))', t2), 0.6)

        # Remote write 1.0 beside it, with and without the proto parameter.
        v1 = ld(1, ld(1, ld(1, b"__name__") + ld(2, b"v1_metric")) + ld(2, double(1, 3) + vint(2, t2)))
        for ct in ("application/x-protobuf", "application/x-protobuf;proto=prometheus.WriteRequest"):
            status, body, _ = self.post(v1, ct)
            self.assertEqual(status, 204, body)
        self.assertEqual(self.one("v1_metric", t2), 3)

        self.server.kill9()
        self.server.start()
        self.assertEqual(self.one('http_requests_total', t2), 25)
        self.assertEqual(self.one('histogram_count(request_duration_seconds)', t2), 10)

    def test_bad_requests(self):
        t = self.now_ms
        ok = series([1, 2], [sample(1, t)])
        cases = [
            (request(["", "__name__", "up"], [series([1, 2, 1, 7], [sample(1, t)])]),
             b"timeseries[0].labels_refs[3]: symbol ref 7 out of range (3 symbols)"),
            (request(["", "__name__", "up"], [ok, series([1, 2, 1], [sample(1, t)])]),
             b"timeseries[1].labels_refs: odd number of refs (3)"),
            (request(["x", "__name__", "up"], [ok]), b"symbols[0] must be the empty string"),
            (request(["", "__name__", "up"], [series([1, 2])]), b"no samples or histograms"),
            (request(["", "job", "up"], [ok]), b"no metric name"),
        ]
        for proto, want in cases:
            status, body, headers = self.post(proto)
            self.assertEqual(status, 400, (want, body))
            self.assertIn(want, body)
            self.assertEqual(self.written(headers), (0, 0, 0))
        # Nothing of a rejected request was stored.
        self.assertEqual(self.query("up"), [])
        status, body, _ = self.post(request(["", "__name__", "up"], [ok]), "application/x-protobuf;proto=io.prometheus.write.v3.Request")
        self.assertEqual(status, 415, body)
        self.assertIn(b"io.prometheus.write.v3.Request", body)
        status, body, _ = self.post(request(["", "__name__", "up"], [ok]), "application/json")
        self.assertEqual(status, 415, body)
        status, body, headers = self.post(request(["", "__name__", "up"], [ok]))
        self.assertEqual(status, 204, body)
        self.assertEqual(self.written(headers), (1, 0, 0))
        self.assertEqual(self.one("up"), 1)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: remote_write2_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
