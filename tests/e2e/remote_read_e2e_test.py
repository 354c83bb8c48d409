#!/usr/bin/env python3
"""End-to-end test of POST /api/v1/read (Prometheus remote read, issue 21).

Usage: remote_read_e2e_test.py /path/to/trainwatch [/path/to/prometheus] [unittest args]

Imports series into `trainwatch serve`, then reads them back (1) by hand in
both response types, SAMPLES (snappy ReadResponse) and STREAMED_XOR_CHUNKS
(CRC-checked frames whose XOR chunks are decoded here the way Prometheus's
reader decodes them, timestamps at the edges of every bucket included), and
(2) through a real Prometheus 2.42 whose remote_read points at trainwatch
(skipped when /usr/bin/prometheus is missing): its PromQL answers over data
only trainwatch holds equal what was imported; and (3) the other way round,
trainwatch's `remote_read:` reading a real Prometheus 2.42 as its long-term
store (external labels, read_recent, required_matchers, a dead store).
"""
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import time
import unittest
import urllib.parse

import twtest
from protowire import crc32c, fields, ld, read_uvarint, snappy_decode, snappy_literal, vint
from twtest import Process, free_port, request

PROMETHEUS = "/usr/bin/prometheus"


def labels_of(msg):
    ls = {}
    for f, v in fields(msg):
        if f == 1:
            kv = dict(fields(v))
            ls[kv.get(1, b"").decode()] = kv.get(2, b"").decode()
    return ls


def signed(u):
    return u - (1 << 64) if u >= 1 << 63 else u


class Bits:
    def __init__(self, b):
        self.b, self.pos = b, 0

    def bit(self):
        v = (self.b[self.pos >> 3] >> (7 - (self.pos & 7))) & 1
        self.pos += 1
        return v

    def bits(self, n):
        v = 0
        for _ in range(n):
            v = (v << 1) | self.bit()
        return v

    def uvarint(self):
        shift = result = 0
        while True:
            x = self.bits(8)
            result |= (x & 0x7F) << shift
            if x < 0x80:
                return result
            shift += 7


def xor_decode(data):
    """Prometheus's XOR chunk reader (tsdb/chunkenc/xor.go), bucket bounds included."""
    n = int.from_bytes(data[:2], "big")
    r = Bits(data[2:])
    out = []
    t = vbits = delta = leading = trailing = 0
    for i in range(n):
        if i == 0:
            z = r.uvarint()
            t = (z >> 1) ^ -(z & 1)
            vbits = r.bits(64)
        else:
            if i == 1:
                delta = r.uvarint()
            else:
                ones = 0
                while ones < 4 and r.bit() == 1:
                    ones += 1
                size = {0: 0, 1: 14, 2: 17, 3: 20, 4: 64}[ones]
                dod = 0
                if size:
                    raw = r.bits(size)
                    dod = signed(raw) if size == 64 else (raw - (1 << size) if raw > (1 << (size - 1)) else raw)
                delta += dod
            t += delta
            if r.bit():
                if r.bit():
                    leading, sig = r.bits(5), r.bits(6)
                    sig = sig or 64
                    trailing = 64 - leading - sig
                vbits ^= r.bits(64 - leading - trailing) << trailing
        out.append((t, struct.unpack("<d", struct.pack("<Q", vbits))[0]))
    return out


def read_request(start, end, matchers, types=()):
    q = vint(1, start) + vint(2, end)
    for typ, name, value in matchers:
        q += ld(3, vint(1, typ) + ld(2, name.encode()) + ld(3, value.encode()))
    body = ld(1, q)
    for t in types:
        body += vint(2, t)
    return snappy_literal(body)


# Intervals between samples, ms: dods of 0, +-8192 (the 14-bit bucket's edges
# that two's complement and Prometheus read differently), +-65536, +-2^19 and beyond.
INTERVALS = [15000, 15000, 23192, 15000, 6808, 15000, 23191, 6809, 15000, 80536, 15000, 539288, 15000, 15000,
             1063576, 15000] + [15000] * 150


class RemoteReadTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw_rr_e2e_")
        self.procs = []
        self.tw_port = free_port()
        self.tw = Process([twtest.BINARY, "serve", "--data-dir", os.path.join(self.tmp, "tw"), "--listen",
                           "127.0.0.1:%d" % self.tw_port, "--collect.host=false", "--collect.gpu=false"],
                          os.path.join(self.tmp, "tw.log"))
        self.procs.append(self.tw)
        self.tw.wait_ready(self.tw_port)
        self.t0 = (int(time.time()) - 3 * 3600) * 1000
        self.expected = {}
        lines = []
        for job, scale in (("a", 1.0), ("b", -0.37)):
            t, pts = self.t0, []
            for i, dt in enumerate(INTERVALS):
                v = 42.0 if i % 7 == 3 else scale * i + math.sin(i) / 3
                pts.append((t, v))
                lines.append('rr_metric{job="%s"} %r %d' % (job, v, t))
                t += dt
            self.expected[job] = pts
        self.t_end = max(p[0] for p in self.expected["a"])
        status, body = request(self.tw_port, "POST", "/api/v1/import/prometheus", "\n".join(lines).encode() + b"\n")
        self.assertEqual(status, 204, body)

    def tearDown(self):
        for p in reversed(self.procs):
            p.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def read(self, body):
        return request(self.tw_port, "POST", "/api/v1/read", body,
                       {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf"})

    def test_samples_and_streamed_chunks(self):
        req = read_request(self.t0, self.t_end, [(0, "__name__", "rr_metric"), (2, "job", "a|b")])
        status, body = self.read(req)
        self.assertEqual(status, 200, body)
        results = [v for f, v in fields(snappy_decode(body)) if f == 1]
        self.assertEqual(len(results), 1)
        got = {}
        for f, ts in fields(results[0]):
            self.assertEqual(f, 1)
            ls = labels_of(ts)
            samples = []
            for sf, sv in fields(ts):
                if sf == 2:
                    s = dict(fields(sv))
                    samples.append((signed(s.get(2, 0)), struct.unpack("<d", s.get(1, bytes(8)))[0]))
            got[ls["job"]] = samples
            self.assertEqual(ls, {"__name__": "rr_metric", "job": ls["job"]})
        self.assertEqual(got, self.expected)

        # Streamed XOR chunks, a sub-range, and a second query with a negative matcher.
        req = read_request(self.t0 + 1, self.t_end, [(0, "__name__", "rr_metric")], types=(1,))
        req = snappy_literal(snappy_decode(req) + ld(1, vint(1, self.t0) + vint(2, self.t_end) +
                                                  ld(3, ld(2, b"__name__") + ld(3, b"rr_metric")) +
                                                  ld(3, vint(1, 1) + ld(2, b"job") + ld(3, b"a"))))
        status, body = self.read(req)
        self.assertEqual(status, 200, body)
        i, by_query = 0, {}
        while i < len(body):
            n, i = read_uvarint(body, i)
            crc = int.from_bytes(body[i:i + 4], "big")
            msg = body[i + 4:i + 4 + n]
            i += 4 + n
            self.assertEqual(crc, crc32c(msg), "frame CRC")
            top = fields(msg)
            qi = dict(top).get(2, 0)
            for f, series in top:
                if f != 1:
                    continue
                ls = labels_of(series)
                pts = []
                for cf, chunk in fields(series):
                    if cf != 2:
                        continue
                    c = dict(fields(chunk))
                    self.assertEqual(c[3], 1, "XOR encoding")
                    decoded = xor_decode(c[4])
                    self.assertEqual((signed(c[1]), signed(c[2])), (decoded[0][0], decoded[-1][0]))
                    self.assertLessEqual(len(decoded), 120)
                    pts += decoded
                by_query.setdefault(qi, {})[ls["job"]] = pts
        self.assertEqual(by_query[0], {"a": self.expected["a"][1:], "b": self.expected["b"][1:]})
        self.assertEqual(by_query[1], {"b": self.expected["b"]})

        # Malformed requests are 400s naming the problem.
        status, body = self.read(b"garbage")
        self.assertEqual(status, 400)
        status, body = self.read(snappy_literal(b"\x0a\x05\x08"))
        self.assertEqual(status, 400)
        self.assertIn(b"protobuf: offset", body)
        status, body = self.read(read_request(self.t0, self.t_end, [(2, "job", "(")]))
        self.assertEqual(status, 400, body)
        status, body = self.read(read_request(self.t0, self.t_end, [(0, "job", "a")], types=(7,)))
        self.assertEqual(status, 400, body)

    @unittest.skipUnless(os.access(PROMETHEUS, os.X_OK), "prometheus not installed")
    def test_real_prometheus_reads_trainwatch(self):
        prom_port = free_port()
        cfg = os.path.join(self.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("""remote_read:
  - url: http://127.0.0.1:%d/api/v1/read
    read_recent: true
""" % self.tw_port)
        prom = Process([PROMETHEUS, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(self.tmp, "prom"),
                        "--web.listen-address=127.0.0.1:%d" % prom_port], os.path.join(self.tmp, "prom.log"))
        self.procs.append(prom)
        prom.wait_ready(prom_port)
        # A range selector returns the raw samples Prometheus read from trainwatch.
        at = (self.t_end + 1) / 1000.0
        span = (self.t_end - self.t0) // 1000 + 1
        status, body = request(prom_port, "GET", "/api/v1/query?query=%s&time=%.3f" % (
            urllib.parse.quote('rr_metric{job=~"a|b"}[%ds]' % span), at))
        self.assertEqual(status, 200, body)
        got = {r["metric"]["job"]: [(int(round(float(t) * 1000)), float(v)) for t, v in r["values"]]
               for r in json.loads(body)["data"]["result"]}
        self.assertEqual(got, self.expected, prom.logs()[-2000:])
        # And PromQL over them.
        status, body = request(prom_port, "GET", "/api/v1/query?query=%s&time=%.3f" % (
            urllib.parse.quote('count_over_time(rr_metric{job="a"}[%ds])' % span), at))
        self.assertEqual(json.loads(body)["data"]["result"][0]["value"][1], str(len(INTERVALS)))


def write_request(series):
    """A remote write 1.0 WriteRequest (snappy): [(labels dict, [(t, v)])]."""
    body = b""
    for labels, samples in series:
        ts = b"".join(ld(1, ld(1, k.encode()) + ld(2, v.encode())) for k, v in sorted(labels.items()))
        ts += b"".join(ld(2, b"\x09" + struct.pack("<d", v) + vint(2, t)) for t, v in samples)
        body += ld(1, ts)
    return snappy_literal(body)


@unittest.skipUnless(os.access(PROMETHEUS, os.X_OK), "prometheus not installed")
class RemoteReadClientTest(unittest.TestCase):
    """trainwatch's `remote_read:` with Debian's Prometheus 2.42 as the long-term store."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw_rrc_e2e_")
        self.procs = []
        self.prom_port = free_port()
        cfg = os.path.join(self.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1h\n")
        prom = Process([PROMETHEUS, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(self.tmp, "prom"),
                        "--web.listen-address=127.0.0.1:%d" % self.prom_port, "--web.enable-remote-write-receiver"],
                       os.path.join(self.tmp, "prom.log"))
        self.procs.append(prom)
        prom.wait_ready(self.prom_port)
        # History only the long-term store holds: two hours ago, with the cluster's external label.
        now = int(time.time()) * 1000
        self.t0 = now - 2 * 3600 * 1000
        self.old = [(self.t0 + i * 15000, float(i)) for i in range(40)]
        status, body = request(self.prom_port, "POST", "/api/v1/write", write_request([
            ({"__name__": "lt_loss", "job": "train", "cluster": "c1"}, self.old),
            ({"__name__": "lt_loss", "job": "other", "cluster": "c2"}, self.old),
        ]), {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
             "X-Prometheus-Remote-Write-Version": "0.1.0"})
        self.assertEqual(status, 204, body)
        self.dead_port = free_port()  # nothing listens there
        self.tw_cfg = os.path.join(self.tmp, "trainwatch.yml")
        with open(self.tw_cfg, "w") as f:
            f.write("""global:
  external_labels: {cluster: c1}
remote_read:
  - url: http://127.0.0.1:%d/api/v1/read
    name: longterm
  - url: http://127.0.0.1:%d/api/v1/read
    name: only-for-z
    required_matchers: {job: z}
    read_recent: true
""" % (self.prom_port, self.dead_port))
        self.tw_port = free_port()
        self.tw = Process([twtest.BINARY, "serve", "--data-dir", os.path.join(self.tmp, "tw"), "--listen",
                           "127.0.0.1:%d" % self.tw_port, "--collect.host=false", "--collect.gpu=false",
                           "--config.file", self.tw_cfg], os.path.join(self.tmp, "tw.log"))
        self.procs.append(self.tw)
        self.tw.wait_ready(self.tw_port)
        # Recent data only trainwatch holds.
        self.recent = now - 60000
        status, body = request(self.tw_port, "POST", "/api/v1/import/prometheus",
                               ('lt_loss{job="train"} 0.5 %d\n' % self.recent).encode())
        self.assertEqual(status, 204, body)

    def tearDown(self):
        for p in reversed(self.procs):
            p.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def query(self, path, **params):
        status, body = request(self.tw_port, "GET", path + "?" + urllib.parse.urlencode(params))
        self.assertEqual(status, 200, body)
        return json.loads(body)["data"]

    def test_promql_reads_the_long_term_store(self):
        # The old samples through trainwatch's PromQL: the external label matched and removed,
        # the other cluster's series not asked for.
        t_end = self.old[-1][0]
        r = self.query("/api/v1/query", query="lt_loss[%ds]" % ((t_end - self.t0) // 1000 + 1), time="%.3f" % (t_end / 1000))
        self.assertEqual([x["metric"] for x in r["result"]], [{"__name__": "lt_loss", "job": "train"}], self.tw.logs())
        self.assertEqual([(int(round(float(t) * 1000)), float(v)) for t, v in r["result"][0]["values"]], self.old)
        # One series across both stores: the remote's history and the local recent sample.
        r = self.query("/api/v1/query", query='count_over_time(lt_loss{job="train"}[3h])', time="%.3f" % (self.recent / 1000))
        self.assertEqual(r["result"][0]["value"][1], str(len(self.old) + 1))
        r = self.query("/api/v1/series", **{"match[]": "lt_loss", "start": str(self.t0 / 1000), "end": str(self.recent / 1000)})
        self.assertEqual(r, [{"__name__": "lt_loss", "job": "train"}])
        # read_recent: false. Once trainwatch holds data older than the window, the store is not asked.
        status, body = request(self.tw_port, "POST", "/api/v1/import/prometheus",
                               ('lt_loss{job="train"} 9 %d\n' % (self.t0 - 3600 * 1000)).encode())
        self.assertEqual(status, 204, body)
        r = self.query("/api/v1/query", query='count_over_time(lt_loss{job="train"}[30m])', time="%.3f" % (t_end / 1000))
        self.assertEqual(r["result"], [])
        # The store with required_matchers {job: z} was never asked: nothing failed.
        metrics = request(self.tw_port, "GET", "/metrics")[1].decode()
        self.assertIn('trainwatch_remote_read_failures_total{remote_name="only-for-z"} 0', metrics)
        self.assertRegex(metrics, r'trainwatch_remote_read_queries_total\{remote_name="longterm"\} [1-9]')
        # Asked (job="z"), it fails: logged and counted, the query answered from the others.
        r = self.query("/api/v1/query", query='lt_loss{job="z"}', time="%.3f" % (self.recent / 1000))
        self.assertEqual(r["result"], [])
        metrics = request(self.tw_port, "GET", "/metrics")[1].decode()
        self.assertIn('trainwatch_remote_read_failures_total{remote_name="only-for-z"} 1', metrics)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: remote_read_e2e_test.py /path/to/trainwatch [/path/to/prometheus] [unittest args]")
    twtest.BINARY = sys.argv.pop(1)
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        PROMETHEUS = sys.argv.pop(1)
    unittest.main(verbosity=2)
