#!/usr/bin/env python3
"""End-to-end test of scraping the protobuf exposition format with native
histograms: trainwatch (scrape_native_histograms: true) and Debian's
Prometheus 2.42 (--enable-feature=native-histograms) scrape the same
Python-served target of delimited io.prometheus.client.MetricFamily
messages, and their answers to histogram_count, histogram_sum,
histogram_quantile and to classic series must be equal; a classic
histogram that trainwatch converts to a native one with custom buckets
(convert_classic_histograms_to_nhcb) must answer as Prometheus's classic
series do. The target also
records the Accept headers it gets (trainwatch must prefer protobuf).

Usage: scrape_proto_e2e_test.py /path/to/trainwatch [unittest args]
Skipped when /usr/bin/prometheus is missing. Processes are stopped by PID.
"""
import json
import math
import os
import shutil
import sys
import tempfile
import textwrap
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twtest  # noqa: E402
from twtest import Process, Server, free_port, request  # noqa: E402

PROMETHEUS = "/usr/bin/prometheus"
PYTHON = "/usr/bin/python3"

# The target: builds the body with the wire helpers of protowire.py.
TARGET = textwrap.dedent("""
    import http.server, socketserver, struct, sys
    sys.path.insert(0, sys.argv[3])
    from protowire import uvarint, ld, vint
    def zz(v): return (v << 1) ^ (v >> 63)
    def dbl(f, v): return uvarint((f << 3) | 1) + struct.pack("<d", v)
    def span(off, n): return vint(1, zz(off)) + vint(2, n)
    def label(n, v): return ld(1, ld(1, n.encode()) + ld(2, v.encode()))
    def family(name, typ, metrics, help=b"h"):
        m = ld(1, name.encode()) + ld(2, help) + vint(3, typ) + b"".join(ld(4, x) for x in metrics)
        return uvarint(len(m)) + m
    def bucket(cum, le): return ld(3, vint(1, cum) + dbl(2, le))
    native = (vint(1, 9) + dbl(2, 20.5) + vint(5, zz(0)) + dbl(6, 0.001) + vint(7, 1)
              + ld(9, span(1, 1)) + vint(10, zz(1))
              + ld(12, span(0, 3)) + ld(13, uvarint(zz(2)) + uvarint(zz(-1)) + uvarint(zz(3)))
              + bucket(3, 1.0) + bucket(6, 2.0))
    native_b = (vint(1, 5) + dbl(2, 7.0) + vint(5, zz(1)) + ld(12, span(-2, 2)) + vint(13, zz(2)) + vint(13, zz(1)))
    classic = vint(1, 7) + dbl(2, 3.5) + bucket(2, 0.5) + bucket(5, 1.0) + bucket(6, 2.5)
    body = (family("req_seconds", 4, [label("path", "/a") + ld(7, native), label("path", "/b") + ld(7, native_b)])
            + family("lat_classic_seconds", 4, [label("path", "/a") + ld(7, classic)])
            + family("temp_celsius", 1, [label("room", "x") + ld(2, dbl(1, 21.5))])
            + family("done_total", 0, [ld(3, dbl(1, 42))])
            + family("rpc_seconds", 2, [ld(4, vint(1, 4) + dbl(2, 2.0) + ld(3, dbl(1, 0.5) + dbl(2, 0.4)))]))
    ctype = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
    accepts = open(sys.argv[2], "a")
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            accepts.write(self.headers.get("User-Agent", "") + "\\t" + self.headers.get("Accept", "") + "\\n")
            accepts.flush()
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a): pass
    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
    S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")

QUERIES = [
    "histogram_count(req_seconds)",
    "histogram_sum(req_seconds)",
    'lat_classic_seconds_bucket{le="0.5"}',
    "lat_classic_seconds_count",
    "histogram_quantile(0.9, lat_classic_seconds_bucket)",
    "temp_celsius",
    "done_total",
    "rpc_seconds",
    "rpc_seconds_count",
]


def query(port, q, t):
    status, body = request(port, "GET", "/api/v1/query?" + urllib.parse.urlencode({"query": q, "time": "%.3f" % t}))
    if status != 200:
        raise AssertionError("%s on %d: %d %s" % (q, port, status, body[:300]))
    res = json.loads(body)["data"]["result"]
    return sorted((json.dumps(r["metric"], sort_keys=True), r["value"][1]) for r in res)


@unittest.skipUnless(os.access(PROMETHEUS, os.X_OK), "prometheus not installed")
class ScrapeProtoTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-proto-")
        self.procs = []
        self.target_port = free_port()
        self.accepts = os.path.join(self.tmp, "accepts.log")
        script = os.path.join(self.tmp, "target.py")
        with open(script, "w") as f:
            f.write(TARGET)
        t = Process([PYTHON, script, str(self.target_port), self.accepts, os.path.dirname(os.path.abspath(__file__))],
                    os.path.join(self.tmp, "target.log"))
        self.procs.append(t)
        t.wait_ready(self.target_port, "/metrics")

    def tearDown(self):
        for p in reversed(self.procs):
            if isinstance(p, Server):
                p.terminate()
                p.stop_quietly()
            else:
                p.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def config(self, name, extra):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
                    "scrape_configs:\n- job_name: proto\n  static_configs: [{targets: ['127.0.0.1:%d']}]\n%s"
                    % (self.target_port, extra))
        return path

    def test_same_answers_as_prometheus(self):
        # A second trainwatch job converts the classic histogram to a native
        # one with custom buckets (convert_classic_histograms_to_nhcb; 2.42
        # has no such option): it must answer as Prometheus's classic series.
        tw_cfg = self.config("tw.yml", "  scrape_native_histograms: true\n"
                             "- job_name: nhcb\n  static_configs: [{targets: ['127.0.0.1:%d']}]\n"
                             "  scrape_native_histograms: true\n  convert_classic_histograms_to_nhcb: true\n"
                             "  metric_relabel_configs: [{source_labels: [__name__], regex: lat_classic_seconds,"
                             " action: keep}]\n" % self.target_port)
        tw = Server(os.path.join(self.tmp, "tw"), extra_args=["--config.file", tw_cfg, "--scrape.self=false"]).start()
        self.procs.append(tw)
        prom_port = free_port()
        prom = Process([PROMETHEUS, "--config.file=" + self.config("prom.yml", ""),
                        "--storage.tsdb.path=" + os.path.join(self.tmp, "prom"),
                        "--web.listen-address=127.0.0.1:%d" % prom_port, "--log.level=warn",
                        "--enable-feature=native-histograms"], os.path.join(self.tmp, "prom.log"))
        self.procs.append(prom)
        prom.wait_ready(prom_port)
        deadline = time.time() + 60
        while True:
            t = time.time()
            a = query(tw.port, "histogram_count(req_seconds)", t)
            b = query(prom_port, "histogram_count(req_seconds)", t)
            c = query(prom_port, "lat_classic_seconds_count", t)
            d = query(tw.port, 'histogram_count(lat_classic_seconds{job="nhcb"})', t)
            if len(a) == 2 and len(b) == 2 and c and d:
                break
            if time.time() > deadline:
                self.fail("no native histograms after 60 s: trainwatch %s prometheus %s\n%s" % (a, b, tw.logs()))
            time.sleep(0.5)
        t = time.time()
        for q in QUERIES:
            got, want = query(tw.port, q, t), query(prom_port, q, t)
            self.assertTrue(want, q)
            self.assertEqual(got, want, q)
        # Native quantiles: Prometheus 3 (which trainwatch follows) interpolates
        # exponential buckets on a log scale, 2.42 linearly: the same bucket
        # (at schema 1 resolution) is required, not the same value.
        for q in ("histogram_quantile(0.9, req_seconds)", "histogram_quantile(0.5, sum(req_seconds))"):
            got, want = query(tw.port, q, t), query(prom_port, q, t)
            self.assertEqual([m for m, _ in got], [m for m, _ in want], q)
            for (_, g), (_, w) in zip(got, want):
                self.assertEqual(math.ceil(math.log2(float(g)) * 2), math.ceil(math.log2(float(w)) * 2), (q, g, w))
        # The classic histogram as NHCB (job nhcb) against Prometheus's classic series.
        nhcb = 'lat_classic_seconds{job="nhcb"}'
        self.assertEqual(query(tw.port, '{job="nhcb",__name__=~"lat_classic_seconds_.+"}', t), [])
        for ours, theirs in (("histogram_count(%s)" % nhcb, "lat_classic_seconds_count"),
                             ("histogram_sum(%s)" % nhcb, "lat_classic_seconds_sum"),
                             ("histogram_quantile(0.9, %s)" % nhcb, "histogram_quantile(0.9, lat_classic_seconds_bucket)"),
                             ("histogram_quantile(0.5, %s)" % nhcb, "histogram_quantile(0.5, lat_classic_seconds_bucket)")):
            got, want = query(tw.port, ours, t), query(prom_port, theirs, t)
            self.assertEqual(len(got), 1, ours)
            self.assertEqual(len(want), 1, theirs)
            self.assertAlmostEqual(float(got[0][1]), float(want[0][1]), msg=ours)
        # Classic series of the classic histogram: every bucket, same le labels.
        self.assertEqual(query(tw.port, "lat_classic_seconds_bucket", t), query(prom_port, "lat_classic_seconds_bucket", t))
        self.assertEqual(query(tw.port, "count(req_seconds_bucket)", t), [])  # classic part of a native one: dropped
        with open(self.accepts) as f:
            tw_accepts = [line.split("\t", 1)[1] for line in f if line.startswith("trainwatch")]
        self.assertTrue(tw_accepts)
        self.assertTrue(tw_accepts[0].startswith("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                                                 "encoding=delimited;q=0.6,"), tw_accepts[0])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: scrape_proto_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
