#!/usr/bin/env python3
"""End-to-end test of start timestamps (ST: when the counter, histogram or
summary behind a sample last started) from every ingest path that carries
one, read back with PromQL's start_timestamp() over /api/v1/query.

Usage: start_timestamps_e2e_test.py /path/to/trainwatch [unittest args]

One trainwatch serve scrapes a loopback target (a thread of this process)
serving OpenMetrics text with `_created` lines and the protobuf exposition
format with created_timestamp; the tests also send an OTLP request
(start_time_unix_nano) and a remote write 2.0 request (start_timestamp,
Histogram.start_timestamp=17, the drafts' TimeSeries.created_timestamp=6).
Requests are built by hand from the published schemas (protowire.py). Series
that carry no ST (scraped gauges, target_info, the `_created` series themselves,
the text format 0.0.4's `_created`) must answer 0.
"""
import http.client
import http.server
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twtest  # noqa: E402
from protowire import ld, snappy_literal, uvarint, vint  # noqa: E402

OM_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
PROTO_TYPE = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
RW2_TYPE = "application/x-protobuf;proto=io.prometheus.write.v2.Request"

# The target's start times, in the last hour (a start after its sample is
# dropped): seconds, as `_created` and Timestamp carry them.
_NOW = int(time.time())
OM_COUNTER_ST = _NOW - 3600 + 0.25
OM_HIST_ST = _NOW - 3500
PROTO_COUNTER_ST = (_NOW - 3400, 500_000_000)  # seconds, nanos
PROTO_HIST_ST = (_NOW - 3300, 0)
PROTO_SUMMARY_ST = (_NOW - 3200, 0)


def fixed64(field, n):
    return uvarint((field << 3) | 1) + struct.pack("<Q", n)


def double(field, v):
    return uvarint((field << 3) | 1) + struct.pack("<d", v)


def zigzag(n):
    return (n << 1) ^ (n >> 63)


def om_body():
    return (
        "# HELP st_om_requests Requests.\n"
        "# TYPE st_om_requests counter\n"
        'st_om_requests_total{path="/a"} 10.0\n'
        'st_om_requests_created{path="/a"} %r\n'
        'st_om_requests_total{path="/b"} 3.0\n'
        "# TYPE st_om_latency_seconds histogram\n"
        'st_om_latency_seconds_bucket{le="0.5"} 1.0\n'
        'st_om_latency_seconds_bucket{le="+Inf"} 2.0\n'
        "st_om_latency_seconds_count 2.0\n"
        "st_om_latency_seconds_sum 0.75\n"
        "st_om_latency_seconds_created %r\n"
        "# TYPE st_om_temperature gauge\n"
        "st_om_temperature 21.5\n"
        "# EOF\n" % (OM_COUNTER_ST, float(OM_HIST_ST))).encode()


def text_body():
    # The text format 0.0.4: `_created` is a gauge like any other series.
    return b"# TYPE st_text_requests counter\nst_text_requests_total 4\nst_text_requests_created 1796000500\n"


def proto_body():
    def ts(st):
        return vint(1, st[0]) + (vint(2, st[1]) if st[1] else b"")

    def family(name, typ, metrics):
        m = ld(1, name.encode()) + ld(2, b"help") + vint(3, typ) + b"".join(ld(4, x) for x in metrics)
        return uvarint(len(m)) + m

    def label(n, v):
        return ld(1, ld(1, n.encode()) + ld(2, v.encode()))

    counter = label("path", "/a") + ld(3, double(1, 7) + ld(3, ts(PROTO_COUNTER_ST)))
    # A native histogram (schema 0, one bucket at index 1 of 3, zero bucket 1) with a classic bucket.
    native = (vint(1, 4) + double(2, 6) + vint(5, zigzag(0)) + double(6, 1e-3) + vint(7, 1)
              + ld(12, vint(1, zigzag(1)) + vint(2, 1)) + ld(13, uvarint(zigzag(3)))
              + ld(3, vint(1, 1) + double(2, 1.0)) + ld(15, ts(PROTO_HIST_ST)))
    summary = vint(1, 5) + double(2, 2.5) + ld(3, double(1, 0.5) + double(2, 0.4)) + ld(4, ts(PROTO_SUMMARY_ST))
    return (family("st_proto_requests_total", 0, [counter])
            + family("st_proto_latency_seconds", 4, [ld(7, native)])
            + family("st_proto_rpc_seconds", 2, [ld(4, summary)])
            + family("st_proto_temperature", 1, [ld(2, double(1, 20))]))


class Target(http.server.BaseHTTPRequestHandler):
    BODIES = {"/om": (OM_TYPE, om_body), "/text": ("text/plain; version=0.0.4", text_body),
              "/proto": (PROTO_TYPE, proto_body)}

    def do_GET(self):
        ctype, body = self.BODIES.get(self.path, ("text/plain", lambda: b""))
        data = body()
        self.send_response(200 if data else 404)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class StartTimestampsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tw-st-e2e-")
        cls.target = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Target)
        threading.Thread(target=cls.target.serve_forever, daemon=True).start()
        port = cls.target.server_address[1]
        cfg = os.path.join(cls.tmp, "tw.yml")
        with open(cfg, "w") as f:
            f.write("global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n")
            for job, path, extra in (("om", "/om", ""), ("text", "/text", ""),
                                     ("proto", "/proto", "  scrape_native_histograms: true\n"
                                                         "  always_scrape_classic_histograms: true\n")):
                f.write("- job_name: %s\n  metrics_path: %s\n  static_configs: [{targets: ['127.0.0.1:%d']}]\n%s"
                        % (job, path, port, extra))
        cls.server = twtest.Server(os.path.join(cls.tmp, "data"),
                                   extra_args=["--config.file", cfg, "--scrape.self=false"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop_quietly()
        cls.target.shutdown()
        cls.target.server_close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def query(self, expr, at_ms=None):
        q = "/api/v1/query?query=" + urllib.parse.quote(expr)
        if at_ms is not None:
            q += "&time=%.3f" % (at_ms / 1000)
        status, body = self.server.request("GET", q)
        self.assertEqual(status, 200, body)
        return {json.dumps(r["metric"], sort_keys=True): float(r["value"][1]) for r in json.loads(body)["data"]["result"]}

    def st(self, selector, at_ms=None):
        """start_timestamp() of the one series `selector` matches, in seconds (0: unknown)."""
        got = self.query("start_timestamp(%s)" % selector, at_ms)
        self.assertEqual(len(got), 1, (selector, got))
        return list(got.values())[0]

    def wait_scraped(self, selector, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.query(selector):
                return
            time.sleep(0.2)
        self.fail("%s not scraped within %ds: %s" % (selector, timeout, self.server.logs()))

    def test_otlp(self):
        now = int(time.time() * 1000) // 1000 * 1000
        t1, t2 = now - 20_000, now - 10_000
        start = now - 3_600_000 + 123

        def ns(ms):
            return ms * 1_000_000

        def metric(name, unit, field, data):
            return ld(1, name.encode()) + ld(3, unit.encode()) + ld(field, data)

        def attr(k, v):
            return ld(1, k.encode()) + ld(2, ld(1, v.encode()))

        tokens = b"".join(ld(1, fixed64(2, ns(start)) + fixed64(3, ns(t)) + fixed64(6, n))
                          for t, n in ((t1, 1000), (t2, 4000))) + vint(2, 2) + vint(3, 1)
        hist = ld(1, fixed64(2, ns(start)) + fixed64(3, ns(t2)) + fixed64(4, 3) + double(5, 0.6)
                  + ld(6, struct.pack("<2Q", 1, 2)) + ld(7, struct.pack("<d", 0.1))) + vint(2, 2)
        exp = ld(1, fixed64(2, ns(start)) + fixed64(3, ns(t2)) + fixed64(4, 2) + double(5, 3) + vint(6, 0)
                 + ld(8, vint(1, 0) + ld(2, bytes([2])))) + vint(2, 2)
        summary = ld(1, fixed64(2, ns(start)) + fixed64(3, ns(t2)) + fixed64(4, 4) + double(5, 1)
                     + ld(6, double(1, 0.5) + double(2, 0.2)))
        gauge = ld(1, fixed64(2, ns(start)) + fixed64(3, ns(t2)) + double(4, 0.5))
        # Deltas made cumulative: the start of the first delta.
        deltas = b"".join(ld(1, fixed64(2, ns(t - 10_000)) + fixed64(3, ns(t)) + fixed64(6, 5))
                          for t in (t1, t2)) + vint(2, 1) + vint(3, 1)
        res = ld(1, attr("service.name", "trainer")) + ld(1, attr("host.name", "node-1"))
        scope = b"".join(ld(2, m) for m in (
            metric("st.tokens", "", 7, tokens), metric("st.step", "s", 9, hist),
            metric("st.batch", "", 10, exp), metric("st.lat", "s", 11, summary),
            metric("st.util", "1", 5, gauge), metric("st.delta", "", 7, deltas)))
        body = ld(1, ld(1, res) + ld(2, scope))
        status, resp = self.server.request("POST", "/api/v1/otlp/v1/metrics", body,
                                           {"Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 200, resp)
        self.assertEqual(resp, b"")

        want = start / 1000  # ms precision: .123
        for sel in ("st_tokens_total", 'st_step_seconds_bucket{le="0.1"}', 'st_step_seconds_bucket{le="+Inf"}',
                    "st_step_seconds_count", "st_step_seconds_sum", "st_batch", 'st_lat_seconds{quantile="0.5"}',
                    "st_lat_seconds_count", "st_lat_seconds_sum"):
            self.assertAlmostEqual(self.st(sel, t2), want, delta=1e-4, msg=sel)
        self.assertEqual(self.st("st_delta_total", t2), (t1 - 10_000) / 1000)
        self.assertAlmostEqual(self.st("st_util_ratio", t2), want, delta=1e-4)  # gauges too, as Prometheus 3
        self.assertEqual(self.st('target_info{job="trainer"}', t2), 0)
        # What was answered stays, start timestamps included.
        self.server.kill9()
        self.server.start()
        self.assertAlmostEqual(self.st("st_tokens_total", t2), want, delta=1e-4)
        self.assertAlmostEqual(self.st("st_batch", t2), want, delta=1e-4)

    def test_remote_write2(self):
        now = int(time.time() * 1000) // 1000 * 1000
        t = now - 5_000
        symbols = ["", "__name__", "st_rw2_requests_total", "job", "api", "st_rw2_latency_seconds",
                   "st_rw2_drafts_total", "st_rw2_plain_total"]

        def series(refs, samples=(), histograms=(), created=None):
            out = ld(1, b"".join(uvarint(r) for r in refs))
            out += b"".join(ld(2, s) for s in samples) + b"".join(ld(3, h) for h in histograms)
            return out + (vint(6, created) if created is not None else b"")

        def sample(v, ts, st=0):
            return double(1, v) + vint(2, ts) + (vint(3, st) if st else b"")

        hist = (vint(1, 3) + double(3, 4) + vint(4, zigzag(0)) + double(5, 1e-128) + vint(6, 1)
                + ld(11, vint(1, zigzag(1)) + vint(2, 2)) + ld(12, uvarint(zigzag(1)) + uvarint(zigzag(0)))
                + vint(15, t) + vint(17, now - 70_000))
        proto = b"".join(ld(4, s.encode()) for s in symbols) + b"".join(ld(5, ts) for ts in (
            series([1, 2, 3, 4], [sample(10, t, now - 60_000)]),
            series([1, 5, 3, 4], histograms=[hist]),
            series([1, 6], [sample(1, t)], created=now - 80_000),
            series([1, 7], [sample(2, t)])))
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        conn.request("POST", "/api/v1/write", snappy_literal(proto),
                     {"Content-Type": RW2_TYPE, "Content-Encoding": "snappy",
                      "X-Prometheus-Remote-Write-Version": "2.0.0"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 204, resp.read())
        conn.close()
        self.assertEqual(self.st("st_rw2_requests_total", t), (now - 60_000) / 1000)
        self.assertEqual(self.st("st_rw2_latency_seconds", t), (now - 70_000) / 1000)
        self.assertEqual(self.st("st_rw2_drafts_total", t), (now - 80_000) / 1000)
        self.assertEqual(self.st("st_rw2_plain_total", t), 0)

    def test_scrape_openmetrics(self):
        self.wait_scraped("st_om_temperature")
        self.assertEqual(self.st('st_om_requests_total{path="/a"}'), OM_COUNTER_ST)
        self.assertEqual(self.st('st_om_requests_total{path="/b"}'), 0)
        for sel in ('st_om_latency_seconds_bucket{le="0.5"}', 'st_om_latency_seconds_bucket{le="+Inf"}',
                    "st_om_latency_seconds_count", "st_om_latency_seconds_sum"):
            self.assertEqual(self.st(sel), OM_HIST_ST, sel)
        self.assertEqual(self.st("st_om_temperature"), 0)
        # The _created series are still stored as samples, without a start timestamp.
        got = self.query('st_om_requests_created{path="/a"}')
        self.assertEqual(list(got.values()), [OM_COUNTER_ST])
        self.assertEqual(self.st('st_om_requests_created{path="/a"}'), 0)

    def test_scrape_text_format_has_none(self):
        self.wait_scraped("st_text_requests_created")
        self.assertEqual(self.st("st_text_requests_total"), 0)

    def test_scrape_protobuf(self):
        self.wait_scraped("st_proto_temperature")

        def sec(st):
            return st[0] + st[1] / 1e9

        self.assertEqual(self.st('st_proto_requests_total{path="/a"}'), sec(PROTO_COUNTER_ST))
        for sel in ("st_proto_latency_seconds", "st_proto_latency_seconds_count", "st_proto_latency_seconds_sum",
                    'st_proto_latency_seconds_bucket{le="1.0"}', 'st_proto_latency_seconds_bucket{le="+Inf"}'):
            self.assertEqual(self.st(sel), sec(PROTO_HIST_ST), sel)
        for sel in ('st_proto_rpc_seconds{quantile="0.5"}', "st_proto_rpc_seconds_count", "st_proto_rpc_seconds_sum"):
            self.assertEqual(self.st(sel), sec(PROTO_SUMMARY_ST), sel)
        self.assertEqual(self.st("st_proto_temperature"), 0)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: start_timestamps_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
