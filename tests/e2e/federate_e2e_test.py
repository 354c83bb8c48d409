#!/usr/bin/env python3
"""Federation of native histograms to a real Prometheus.

Usage: federate_e2e_test.py /path/to/trainwatch [/path/to/prometheus] [unittest args]

Starts `trainwatch serve` on a free loopback port and stores a native
histogram series (exponential buckets), a custom-bucket one and a float
series through remote_write 1.0. Debian's Prometheus 2.42 (skipped when
missing), with native histograms on, then federates them from /federate:
it asks for the protobuf exposition format, in which trainwatch writes the
histograms as Prometheus's own /federate does. The test checks that
Prometheus stored exactly what trainwatch holds: the same histogram, bucket
for bucket, in its query API, and the same answers to histogram_count,
histogram_sum and histogram_quantile. Both processes are stopped by PID.
"""
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
from protowire import ld, snappy_literal, uvarint
from twtest import Process, free_port, request

PROMETHEUS = "/usr/bin/prometheus"


def zigzag(n):
    return (n << 1) ^ (n >> 63)


def fixed64(field, v):
    return uvarint((field << 3) | 1) + struct.pack("<d", v)


def varint(field, n):
    return uvarint(field << 3) + uvarint(n)


def labels_fields(name, labels):
    out = ld(1, ld(1, b"__name__") + ld(2, name.encode()))
    for k, v in sorted(labels.items()):
        out += ld(1, ld(1, k.encode()) + ld(2, v.encode()))
    return out


def histogram_series(name, labels, ts_ms, schema, count, total, spans, counts, zero_threshold=0.0,
                     zero_count=0.0, custom_values=()):
    """A prompb TimeSeries with one float histogram (prompb/types.proto)."""
    h = fixed64(2, count) + fixed64(3, total) + varint(4, zigzag(schema)) + fixed64(5, zero_threshold)
    h += fixed64(7, zero_count)
    for offset, length in spans:
        h += ld(11, varint(1, zigzag(offset)) + varint(2, length))
    h += ld(13, b"".join(struct.pack("<d", c) for c in counts))
    h += varint(15, ts_ms)
    if custom_values:
        h += ld(16, b"".join(struct.pack("<d", c) for c in custom_values))
    return ld(1, labels_fields(name, labels) + ld(4, h))


def float_series(name, labels, value, ts_ms):
    sample = b"\x09" + struct.pack("<d", value) + b"\x10" + uvarint(ts_ms)
    return ld(1, labels_fields(name, labels) + ld(2, sample))


class FederateE2ETest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw_fed_e2e_")
        self.procs = []
        self.tw_port = free_port()
        tw = Process([twtest.BINARY, "serve", "--data-dir", os.path.join(self.tmp, "tw"), "--listen",
                      "127.0.0.1:%d" % self.tw_port, "--collect.host=false", "--collect.gpu=false"],
                     os.path.join(self.tmp, "tw.log"))
        self.procs.append(tw)
        self.tw = tw
        tw.wait_ready(self.tw_port)

    def tearDown(self):
        for p in reversed(self.procs):
            p.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def query(self, port, q, t):
        status, body = request(port, "GET", "/api/v1/query?query=%s&time=%.3f" % (urllib.parse.quote(q), t))
        self.assertEqual(status, 200, body)
        return json.loads(body)["data"]["result"]

    @unittest.skipUnless(os.access(PROMETHEUS, os.X_OK), "prometheus not installed")
    def test_prometheus_federates_native_histograms(self):
        now = int(time.time() * 1000) - 2000
        body = histogram_series("fed_latency_seconds", {"job": "train"}, now, 0, 10.0, 12.5, [(0, 3)],
                                [2.0, 4.0, 3.0], zero_threshold=0.001, zero_count=1.0)
        body += histogram_series("fed_batch_size", {"job": "train"}, now, -53, 6.0, 160.0, [(0, 3)], [1.0, 3.0, 2.0],
                                 custom_values=[16.0, 32.0])
        body += float_series("fed_up", {"job": "train"}, 1.0, now)
        status, resp = request(self.tw_port, "POST", "/api/v1/write", snappy_literal(body),
                               {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 204, resp)

        prom_port = free_port()
        cfg = os.path.join(self.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("""global:
  scrape_interval: 1s
scrape_configs:
  - job_name: federate
    honor_labels: true
    metrics_path: /federate
    params:
      'match[]': ['{__name__=~"fed_.*"}']
    static_configs:
      - targets: ['127.0.0.1:%d']
""" % self.tw_port)
        prom = Process([PROMETHEUS, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(self.tmp, "prom"),
                        "--web.listen-address=127.0.0.1:%d" % prom_port, "--enable-feature=native-histograms"],
                       os.path.join(self.tmp, "prom.log"))
        self.procs.append(prom)
        t = now / 1000.0 + 1
        want = {"fed_latency_seconds", "fed_up", "fed_batch_size_bucket", "fed_batch_size_count", "fed_batch_size_sum"}
        deadline = time.time() + 40
        got = []
        while time.time() < deadline:
            self.assertIsNone(prom.proc.poll(), "prometheus exited: " + prom.logs())
            try:
                got = self.query(prom_port, "{__name__=~\"fed_.*\"}", t)
            except (ConnectionError, OSError):
                got = []
            if {r["metric"]["__name__"] for r in got} == want:
                break
            time.sleep(0.5)
        self.assertEqual({r["metric"]["__name__"] for r in got}, want,
                         "prometheus federated %s\nprometheus: %s\ntrainwatch: %s" % (got, prom.logs(), self.tw.logs()))
        theirs = {r["metric"]["__name__"]: r for r in got if r["metric"]["__name__"] != "fed_batch_size_bucket"}
        mine = {r["metric"]["__name__"]: r for r in self.query(self.tw_port, "{__name__=~\"fed_.*\"}", t)}
        # The exponential histogram arrives whole, bucket for bucket, with
        # the series' labels (instance="" is dropped as empty).
        self.assertEqual(theirs["fed_latency_seconds"]["metric"], mine["fed_latency_seconds"]["metric"])
        self.assertEqual(theirs["fed_latency_seconds"]["histogram"], mine["fed_latency_seconds"]["histogram"])
        self.assertEqual(theirs["fed_latency_seconds"]["histogram"][1]["count"], "10")
        self.assertEqual(theirs["fed_up"]["value"], mine["fed_up"]["value"])
        # The custom-bucket histogram is federated as a classic one.
        buckets = {r["metric"]["le"]: r["value"][1] for r in got if r["metric"]["__name__"] == "fed_batch_size_bucket"}
        self.assertEqual(buckets, {"16.0": "1", "32.0": "4", "+Inf": "6"})  # 2.42 writes protobuf bounds so
        self.assertEqual(theirs["fed_batch_size_count"]["value"][1], "6")
        self.assertEqual(theirs["fed_batch_size_sum"]["value"][1], "160")
        # The same questions get the same answers.
        pairs = [(q, q) for q in ("histogram_count(fed_latency_seconds)", "histogram_sum(fed_latency_seconds)",
                                  "histogram_count(fed_latency_seconds) / histogram_sum(fed_latency_seconds)")]
        pairs.append(("histogram_quantile(0.5, fed_batch_size_bucket)", "histogram_quantile(0.5, fed_batch_size)"))
        pairs.append(("histogram_quantile(0.9, fed_batch_size_bucket)", "histogram_quantile(0.9, fed_batch_size)"))
        for pq, tq in pairs:
            a, b = self.query(prom_port, pq, t), self.query(self.tw_port, tq, t)
            self.assertEqual(len(a), 1, pq)
            self.assertEqual(len(b), 1, tq)
            self.assertAlmostEqual(float(a[0]["value"][1]), float(b[0]["value"][1]), places=9, msg=tq)
        # Inside an exponential bucket, Prometheus 2.42 interpolates linearly
        # and 3.x (and trainwatch) exponentially: the median, in (1, 2] half
        # way through its observations, is 1.5 there and sqrt(2) here.
        q = "histogram_quantile(0.5, fed_latency_seconds)"
        self.assertEqual(float(self.query(prom_port, q, t)[0]["value"][1]), 1.5)
        self.assertAlmostEqual(float(self.query(self.tw_port, q, t)[0]["value"][1]), 2 ** 0.5, places=12)
        self.assertNotIn("level=error", prom.logs())


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: federate_e2e_test.py /path/to/trainwatch [/path/to/prometheus] [unittest args]")
    twtest.BINARY = sys.argv.pop(1)
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        PROMETHEUS = sys.argv.pop(1)
    unittest.main()
