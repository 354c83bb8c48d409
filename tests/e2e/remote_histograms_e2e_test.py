#!/usr/bin/env python3
"""End-to-end test of native histograms over Prometheus's remote protocols,
with Debian's Prometheus 2.42 (--enable-feature=native-histograms):

  target (Python, protobuf exposition) <- scraped by P1
  P1 --remote_write (send_native_histograms)--> trainwatch
  trainwatch --remote_write (renamed fwd_*)--> P2 (--web.enable-remote-write-receiver)
  P2 --remote_read (SAMPLES)--> trainwatch (floats only in 2.42)
  trainwatch B --remote_read (STREAMED_XOR_CHUNKS)--> trainwatch

Checks: histogram_count / histogram_sum / histogram_quantile answered by
trainwatch equal P1's (the quantiles fall on bucket bounds, where 2.42's
linear and 3.x's log interpolation agree); P2's answers over what
trainwatch forwarded equal P1's; trainwatch's remote read SAMPLES
response carries the histograms (Prometheus 2.42's remote read client
ignores TimeSeries.histograms, so P2 cannot be the reader); its streamed
response carries them as FLOAT_HISTOGRAM chunks, one series a frame, and
trainwatch B reading them through `remote_read:` answers as trainwatch
does, bucket for bucket.

Usage: remote_histograms_e2e_test.py /path/to/trainwatch [unittest args]
Skipped when /usr/bin/prometheus is missing. Processes are stopped by PID.
"""
import json
import os
import struct
import shutil
import sys
import tempfile
import textwrap
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twtest  # noqa: E402
from protowire import crc32c, fields, ld, read_uvarint, snappy_decode, snappy_literal, vint  # noqa: E402
from twtest import Process, free_port, request  # noqa: E402

PROMETHEUS = "/usr/bin/prometheus"
PYTHON = "/usr/bin/python3"

# Two native histograms (constant, so answers do not depend on which scrape
# each side has): /a has count 8 = zero 1 + negative 1 + positive 2,1,3;
# /b count 5 = positive 2,3 at schema 1.
TARGET = textwrap.dedent("""
    import http.server, socketserver, struct, sys
    sys.path.insert(0, sys.argv[2])
    from protowire import uvarint, ld, vint
    def zz(v): return (v << 1) ^ (v >> 63)
    def dbl(f, v): return uvarint((f << 3) | 1) + struct.pack("<d", v)
    def span(off, n): return vint(1, zz(off)) + vint(2, n)
    def label(n, v): return ld(1, ld(1, n.encode()) + ld(2, v.encode()))
    def family(name, typ, metrics):
        m = ld(1, name.encode()) + ld(2, b"h") + vint(3, typ) + b"".join(ld(4, x) for x in metrics)
        return uvarint(len(m)) + m
    # Histogram: sample_count=1, sample_sum=2, schema=5, zero_threshold=6, zero_count=7,
    # negative_span=9, negative_delta=10, positive_span=12, positive_delta=13.
    a = (vint(1, 8) + dbl(2, 20.5) + vint(5, zz(0)) + dbl(6, 0.001) + vint(7, 1)
         + ld(9, span(1, 1)) + vint(10, zz(1))
         + ld(12, span(0, 3)) + ld(13, uvarint(zz(2)) + uvarint(zz(-1)) + uvarint(zz(2))))
    b = vint(1, 5) + dbl(2, 7.0) + vint(5, zz(1)) + ld(12, span(-2, 2)) + vint(13, zz(2)) + vint(13, zz(1))
    body = family("req_seconds", 4, [label("path", "/a") + ld(7, a), label("path", "/b") + ld(7, b)])
    ctype = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
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

# /a: cumulative 1 (negative), 2 (zero), 4, 5, 8; /b: 2, 5. Quantiles whose
# rank ends a bucket: 0.5 of /a (4), 0.625 (5), 0.4 of /b (2).
QUERIES = [
    "histogram_count(req_seconds)",
    "histogram_sum(req_seconds)",
    'histogram_quantile(0.5, req_seconds{path="/a"})',
    'histogram_quantile(0.625, req_seconds{path="/a"})',
    'histogram_quantile(0.4, req_seconds{path="/b"})',
    "histogram_count(sum(req_seconds))",
]


def query(port, q, t):
    status, body = request(port, "GET", "/api/v1/query?" + urllib.parse.urlencode({"query": q, "time": "%.3f" % t}))
    if status != 200:
        raise AssertionError("%s on %d: %d %s" % (q, port, status, body[:300]))
    res = json.loads(body)["data"]["result"]
    return sorted((json.dumps(r["metric"], sort_keys=True), r["value"][1]) for r in res)


@unittest.skipUnless(os.access(PROMETHEUS, os.X_OK), "prometheus not installed")
class RemoteHistogramsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-rhist-")
        self.procs = []
        self.target_port = free_port()
        script = os.path.join(self.tmp, "target.py")
        with open(script, "w") as f:
            f.write(TARGET)
        t = Process([PYTHON, script, str(self.target_port), os.path.dirname(os.path.abspath(__file__))],
                    os.path.join(self.tmp, "target.log"))
        self.procs.append(t)
        t.wait_ready(self.target_port, "/metrics")

    def tearDown(self):
        for p in reversed(self.procs):
            p.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def prometheus(self, name, port, cfg, extra=()):
        p = Process([PROMETHEUS, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(self.tmp, name),
                     "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn",
                     "--enable-feature=native-histograms"] + list(extra), os.path.join(self.tmp, name + ".log"))
        self.procs.append(p)
        return p.wait_ready(port)

    def wait_for(self, port, q, n, what):
        deadline = time.time() + 60
        while True:
            got = query(port, q, time.time())
            if len(got) == n:
                return
            if time.time() > deadline:
                self.fail("%s: %s gave %s after 60 s\n%s" % (what, q, got, "\n".join(p.logs()[-1500:] for p in self.procs)))
            time.sleep(0.5)

    def test_histograms_over_remote_write_and_read(self):
        tw_port, p1_port, p2_port = free_port(), free_port(), free_port()
        # trainwatch forwards everything to P2 under another name.
        tw_cfg = self.write("tw.yml", textwrap.dedent("""\
            remote_write:
            - url: http://127.0.0.1:%d/api/v1/write
              send_native_histograms: true
              queue_config: {batch_send_deadline: 500ms}
              write_relabel_configs:
              - {source_labels: [__name__], regex: '(.+)', target_label: __name__, replacement: 'fwd_$1'}
            """ % p2_port))
        tw = Process([twtest.BINARY, "serve", "--data-dir", os.path.join(self.tmp, "tw"), "--listen",
                      "127.0.0.1:%d" % tw_port, "--collect.host=false", "--collect.gpu=false", "--scrape.self=false",
                      "--config.file", tw_cfg], os.path.join(self.tmp, "tw.log"))
        self.procs.append(tw)
        tw.wait_ready(tw_port)
        p2_cfg = self.write("p2.yml", textwrap.dedent("""\
            remote_read:
            - url: http://127.0.0.1:%d/api/v1/read
              read_recent: true
            """ % tw_port))
        self.prometheus("p2", p2_port, p2_cfg, ["--web.enable-remote-write-receiver"])
        p1_cfg = self.write("p1.yml", textwrap.dedent("""\
            global: {scrape_interval: 1s, scrape_timeout: 1s}
            scrape_configs:
            - job_name: proto
              static_configs: [{targets: ['127.0.0.1:%d']}]
            remote_write:
            - url: http://127.0.0.1:%d/api/v1/write
              send_native_histograms: true
              queue_config: {batch_send_deadline: 500ms}
            """ % (self.target_port, tw_port)))
        self.prometheus("p1", p1_port, p1_cfg)

        # 1. P1 -> trainwatch: the same answers as P1's own.
        self.wait_for(tw_port, "histogram_count(req_seconds)", 2, "trainwatch received")
        self.wait_for(p1_port, "histogram_count(req_seconds)", 2, "prometheus scraped")
        t = t_first = time.time()
        for q in QUERIES:
            want = query(p1_port, q, t)
            self.assertTrue(want, q)
            self.assertEqual(query(tw_port, q, t), want, q)
        # Stored as histograms, not as classic series.
        self.assertEqual(query(tw_port, "count(req_seconds_bucket)", t), [])

        # 2. trainwatch -> P2 (remote_write out): the forwarded copies.
        self.wait_for(p2_port, "histogram_count(fwd_req_seconds)", 2, "prometheus received from trainwatch")
        t = time.time()
        for q in QUERIES:
            self.assertEqual(query(p2_port, q.replace("req_seconds", "fwd_req_seconds"), t), query(p1_port, q, t), q)

        # 3. Remote read: trainwatch's SAMPLES response carries the histograms
        # (TimeSeries.histograms, float counts). Prometheus 2.42's remote read
        # client ignores that field (it reads floats only), so P2 sees no
        # req_seconds through remote_read: checked so a change shows.
        now = int(time.time() * 1000)
        matcher = ld(3, vint(1, 0) + ld(2, b"__name__") + ld(3, b"req_seconds"))
        req = snappy_literal(ld(1, vint(1, now - 600000) + vint(2, now) + matcher))
        status, body = request(tw_port, "POST", "/api/v1/read", req, {"Content-Encoding": "snappy"})
        self.assertEqual(status, 200, body[:300])
        counts = {}
        for f, result in fields(snappy_decode(body)):
            for g, ts in fields(result):
                kv = {}
                for h, v in fields(ts):
                    if h == 1:
                        lab = dict(fields(v))
                        kv[lab[1].decode()] = lab[2].decode()
                    elif h == 4:
                        hist = dict(fields(v))
                        self.assertIn(2, hist)  # count_float
                        counts[kv["path"]] = struct.unpack("<d", hist[2])[0]
        self.assertEqual(counts, {"/a": 8.0, "/b": 5.0})
        self.assertEqual(query(p2_port, "histogram_count(req_seconds)", t), [])

        # 4. The same read streamed: FLOAT_HISTOGRAM chunks (encoding 3), one
        # series a frame as Prometheus sends them (its client reads only the
        # first series of a frame).
        status, body = request(tw_port, "POST", "/api/v1/read", snappy_literal(snappy_decode(req) + vint(2, 1)),
                               {"Content-Encoding": "snappy"})
        self.assertEqual(status, 200, body[:300])
        i, encodings = 0, {}
        while i < len(body):
            n, i = read_uvarint(body, i)
            msg = body[i + 4:i + 4 + n]
            self.assertEqual(int.from_bytes(body[i:i + 4], "big"), crc32c(msg))
            i += 4 + n
            series = [v for f, v in fields(msg) if f == 1]
            self.assertEqual(len(series), 1)
            path = [dict(fields(v))[2].decode() for f, v in fields(series[0])
                    if f == 1 and dict(fields(v))[1] == b"path"][0]
            encodings.setdefault(path, set()).update(dict(fields(v))[3] for f, v in fields(series[0]) if f == 2)
        self.assertEqual(encodings, {"/a": {3}, "/b": {3}})

        # 5. trainwatch B reads them through `remote_read:` (streamed chunks,
        # asked for first): the same answers, bucket for bucket.
        b_port = free_port()
        b_cfg = self.write("b.yml", "remote_read:\n- url: http://127.0.0.1:%d/api/v1/read\n  read_recent: true\n" % tw_port)
        b = Process([twtest.BINARY, "serve", "--data-dir", os.path.join(self.tmp, "b"), "--listen",
                     "127.0.0.1:%d" % b_port, "--collect.host=false", "--collect.gpu=false", "--scrape.self=false",
                     "--config.file", b_cfg], os.path.join(self.tmp, "b.log"))
        self.procs.append(b)
        b.wait_ready(b_port)
        # Samples up to 3 s ago have all reached trainwatch, and it held some at t_first.
        time.sleep(max(0.0, t_first + 3 - time.time()))
        t = time.time() - 3
        for q in QUERIES:
            self.assertEqual(query(b_port, q, t), query(tw_port, q, t), q)
        for q in ("req_seconds", "req_seconds[20s]"):
            answers = []
            for port in (tw_port, b_port):
                status, body = request(port, "GET", "/api/v1/query?" + urllib.parse.urlencode({"query": q, "time": "%.3f" % t}))
                self.assertEqual(status, 200, body[:300])
                answers.append(sorted(json.dumps(r, sort_keys=True) for r in json.loads(body)["data"]["result"]))
            self.assertEqual(len(answers[0]), 2, q)
            self.assertEqual(answers[1], answers[0], q)
        metrics = request(b_port, "GET", "/metrics")[1].decode()
        self.assertRegex(metrics, r'trainwatch_remote_read_failures_total\{remote_name="[0-9a-f]+"\} 0')


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: remote_histograms_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
