#!/usr/bin/env python3
"""End-to-end test of POST /api/v1/otlp/v1/metrics (OTLP metrics, issue 21).

Usage: otlp_e2e_test.py /path/to/trainwatch [unittest args]

No OpenTelemetry SDK is packaged in Debian 12, so the requests are built here
from the published schema (opentelemetry-proto, metrics/v1 and
collector/metrics/v1; OTLP/JSON as its examples/metrics.json): protobuf,
gzip-compressed as the collector's otlphttp exporter sends it, and JSON.
Checks what Prometheus 3 stores for them (names with units and suffixes,
job/instance and target_info from the resource, explicit histograms as
buckets histogram_quantile reads, exponential histograms as native
histograms), delta sums and histograms made cumulative, partial success for
points that cannot be stored, clear 400/415s, and that every answered point
survives a kill -9; with the config file's otlp.convert_histograms_to_nhcb
(turned on by a reload) explicit histograms are native histograms with custom
buckets that answer as the classic series do.
"""
import gzip
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
from protowire import fields, ld, vint

PATH = "/api/v1/otlp/v1/metrics"


def fixed64(field, n):
    return bytes([(field << 3) | 1]) + struct.pack("<Q", n)


def double(field, v):
    return bytes([(field << 3) | 1]) + struct.pack("<d", v)


def attr(key, value):
    if isinstance(value, bool):
        any_value = vint(2, int(value))
    elif isinstance(value, int):
        any_value = vint(3, value)
    else:
        any_value = ld(1, value.encode())
    return ld(1, key.encode()) + ld(2, any_value)


def metric(name, unit, field, data):
    return ld(1, name.encode()) + ld(3, unit.encode()) + ld(field, data)


def request(resource, metrics):
    res = b"".join(ld(1, attr(k, v)) for k, v in resource.items())
    scope = ld(1, ld(1, b"trainer.lib")) + b"".join(ld(2, m) for m in metrics)
    return ld(1, ld(1, res) + ld(2, scope))


class OtlpTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-otlp-e2e-")
        self.config = os.path.join(self.tmp, "trainwatch.yml")
        self.write_config(False)
        self.server = twtest.Server(os.path.join(self.tmp, "data"), extra_args=["--config.file", self.config]).start()
        self.now_ms = int(time.time() * 1000) // 1000 * 1000

    def tearDown(self):
        self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write_config(self, nhcb):
        with open(self.config, "w") as f:
            f.write("otlp:\n  convert_histograms_to_nhcb: %s\n" % ("true" if nhcb else "false"))

    def post(self, body, content_type="application/x-protobuf", gz=False):
        headers = {"Content-Type": content_type}
        if gz:
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        return self.server.request("POST", PATH, body, headers)

    def query(self, expr, at_ms=None):
        q = "/api/v1/query?query=" + urllib.parse.quote(expr) + "&time=%.3f" % ((at_ms or self.now_ms) / 1000)
        status, body = self.server.request("GET", q)
        self.assertEqual(status, 200, body)
        return {json.dumps(r["metric"], sort_keys=True): float(r["value"][1]) for r in json.loads(body)["data"]["result"]}

    def one(self, expr, at_ms=None):
        got = self.query(expr, at_ms)
        self.assertEqual(len(got), 1, (expr, got))
        return list(got.values())[0]

    def ns(self, ms):
        return ms * 1_000_000

    def test_protobuf_gzip_as_prometheus3_stores_it(self):
        t1, t2 = self.now_ms - 30_000, self.now_ms - 15_000
        gauge = b"".join(ld(1, ld(7, attr("gpu", g)) + fixed64(3, self.ns(t2)) + double(4, u))
                         for g, u in (("0", 0.93), ("1", 0.41)))
        tokens = b"".join(ld(1, fixed64(2, self.ns(t1 - 60_000)) + fixed64(3, self.ns(t)) + fixed64(6, n))
                          for t, n in ((t1, 1000), (t2, 4000))) + vint(2, 2) + vint(3, 1)
        # step.duration: bounds 0.1 0.2 0.4, counts 2 6 2 0 (packed).
        hist = ld(1, fixed64(3, self.ns(t2)) + fixed64(4, 10) + double(5, 2.1)
                  + ld(6, struct.pack("<4Q", 2, 6, 2, 0)) + ld(7, struct.pack("<3d", 0.1, 0.2, 0.4))) + vint(2, 2)
        # An exponential histogram, scale 1 (base sqrt 2): 4 values in (1, 1.414], 4 in (1.414, 2].
        exp = ld(1, fixed64(3, self.ns(t2)) + fixed64(4, 8) + double(5, 11.5) + vint(6, 2)
                 + ld(8, vint(1, 0) + ld(2, bytes([4, 4])))) + vint(2, 2)
        summary = ld(1, fixed64(3, self.ns(t2)) + fixed64(4, 100) + double(5, 25)
                     + ld(6, double(1, 0.5) + double(2, 0.2)) + ld(6, double(1, 0.99) + double(2, 0.8)))
        body = request({"service.name": "trainer", "service.namespace": "ml", "service.instance.id": "node-1:0",
                        "host.name": "node-1", "gpu.count": 8},
                       [metric("gpu.utilization", "1", 5, gauge), metric("train.tokens", "{token}", 7, tokens),
                        metric("step.duration", "s", 9, hist), metric("batch.size", "", 10, exp),
                        metric("data.latency", "ms", 11, summary)])
        status, resp = self.post(body, gz=True)
        self.assertEqual(status, 200, resp)
        self.assertEqual(resp, b"")  # an empty ExportMetricsServiceResponse: nothing rejected

        job = '{job="ml/trainer", instance="node-1:0"}'
        self.assertEqual(self.one('gpu_utilization_ratio{gpu="0", job="ml/trainer", instance="node-1:0"}'), 0.93)
        self.assertEqual(self.one('train_tokens_total' + job, t2), 4000)
        self.assertEqual(self.one('increase(train_tokens_total[20s])', t2), 3000 * 20 / 15)
        # histogram_quantile over the buckets: the median is in (0.1, 0.2].
        self.assertAlmostEqual(self.one('histogram_quantile(0.5, step_duration_seconds_bucket)'), 0.15)
        self.assertEqual(self.one('step_duration_seconds_count'), 10)
        self.assertEqual(self.one('step_duration_seconds_sum'), 2.1)
        # The exponential histogram is a native one, as in Prometheus 3.
        self.assertAlmostEqual(self.one('histogram_quantile(0.5, batch_size)'), 2 ** 0.5)
        self.assertAlmostEqual(self.one('histogram_quantile(0.75, batch_size)'), 2 ** 0.75)
        self.assertEqual(self.one('histogram_count(batch_size)'), 8)
        self.assertEqual(self.one('histogram_sum(batch_size)'), 11.5)
        self.assertEqual(self.one('histogram_fraction(0, 2, batch_size)'), 1)
        self.assertEqual(self.query('batch_size_bucket'), {})
        status, body = self.server.request("GET", "/api/v1/query?query=batch_size&time=%.3f" % (self.now_ms / 1000))
        h = json.loads(body)["data"]["result"][0]["histogram"][1]
        self.assertEqual((h["count"], h["sum"]), ("8", "11.5"))
        self.assertEqual(h["buckets"], [[0, "1", "1.414213562373095", "4"], [0, "1.414213562373095", "2", "4"]])
        self.assertEqual(self.one('data_latency_milliseconds{quantile="0.99"}'), 0.8)
        self.assertEqual(self.one('data_latency_milliseconds_count'), 100)
        info = self.query('target_info')
        self.assertEqual(list(info.values()), [1.0])
        self.assertEqual(json.loads(list(info)[0]),
                         {"__name__": "target_info", "job": "ml/trainer", "instance": "node-1:0",
                          "host_name": "node-1", "gpu_count": "8"})

        self.check_nhcb_after_reload(t1, t2)

        # Acknowledged means durable: every series after a kill -9.
        self.server.kill9()
        self.server.start()
        self.assertEqual(self.one('train_tokens_total' + job, t2), 4000)
        self.assertEqual(self.one('histogram_count(step_rate_seconds)', t2), 20)
        self.assertAlmostEqual(self.one('histogram_quantile(0.5, step_duration_seconds_bucket)'), 0.15)
        self.assertEqual(self.one('histogram_count(batch_size)'), 8)

    def check_nhcb_after_reload(self, t1, t2):
        """otlp.convert_histograms_to_nhcb, switched on by a reload: the same
        explicit-bucket histogram posted before (classic series) and after
        (one native histogram with custom buckets under the family name)
        answers the same to count, sum and quantiles, over rates too (both
        interpolate linearly, promql/quantile.go). Prometheus 2.42 has no
        NHCB, so there is no peer to compare with."""
        def body():
            # step.rate: bounds 0.1 0.2 0.4; counts 2 6 2 0 at t1, 4 8 6 2 at t2, started at t1 - 60 s.
            pts = b"".join(ld(1, fixed64(2, self.ns(t1 - 60_000)) + fixed64(3, self.ns(t)) + fixed64(4, sum(c))
                              + double(5, s) + ld(6, struct.pack("<4Q", *c)) + ld(7, struct.pack("<3d", 0.1, 0.2, 0.4)))
                           for t, c, s in ((t1, (2, 6, 2, 0), 2.1), (t2, (4, 8, 6, 2), 5.0)))
            return request({"service.name": "trainer"}, [metric("step.rate", "s", 9, pts + vint(2, 2))])
        status, resp = self.post(body())
        self.assertEqual((status, resp), (200, b""))
        self.assertEqual(self.query('step_rate_seconds', t2), {})
        self.write_config(True)
        status, resp = self.server.request("POST", "/-/reload")
        self.assertEqual(status, 200, resp)
        status, resp = self.post(body())
        self.assertEqual((status, resp), (200, b""))
        self.assertEqual(self.one('histogram_count(step_rate_seconds)', t2), 20)
        pairs = [("histogram_count(step_rate_seconds)", "step_rate_seconds_count"),
                 ("histogram_sum(step_rate_seconds)", "step_rate_seconds_sum"),
                 ("histogram_count(rate(step_rate_seconds[1m]))", "rate(step_rate_seconds_count[1m])"),
                 ("histogram_sum(rate(step_rate_seconds[1m]))", "rate(step_rate_seconds_sum[1m])")]
        for q in (0.25, 0.5, 0.7, 0.9):
            pairs.append(("histogram_quantile(%g, step_rate_seconds)" % q,
                          "histogram_quantile(%g, step_rate_seconds_bucket)" % q))
            pairs.append(("histogram_quantile(%g, rate(step_rate_seconds[1m]))" % q,
                          "histogram_quantile(%g, rate(step_rate_seconds_bucket[1m]))" % q))
        for native, classic in pairs:
            self.assertAlmostEqual(self.one(native, t2), self.one(classic, t2), msg=native)
        # The rate's buckets are 2 2 4 2: the 0.7 quantile is 3/4 into (0.2, 0.4].
        self.assertAlmostEqual(self.one("histogram_quantile(0.7, rate(step_rate_seconds[1m]))", t2), 0.35)

    def exp_delta(self, t, scale, offset, counts, neg=()):
        point = (fixed64(3, self.ns(t)) + fixed64(4, sum(counts) + sum(neg)) + double(5, float(len(counts)))
                 + vint(6, scale * 2 if scale >= 0 else -scale * 2 - 1)
                 + ld(8, vint(1, offset * 2) + ld(2, bytes(counts))))
        if neg:
            point += ld(9, vint(1, 0) + ld(2, bytes(neg)))
        return metric("req.latency", "s", 10, ld(1, point) + vint(2, 1))

    def test_delta_exponential_histograms_become_cumulative(self):
        t = self.now_ms - 40_000
        # Scale 10 is downscaled to 8 (4 buckets merged); then a scale 0 delta.
        for i, m in enumerate((self.exp_delta(t, 10, 0, [1, 1, 1, 1]), self.exp_delta(t + 10_000, 0, 0, [2], [1]),
                               self.exp_delta(t + 20_000, 0, 1, [3]))):
            status, resp = self.post(request({"service.name": "api"}, [m]))
            self.assertEqual(status, 200, resp)
            self.assertEqual(resp, b"", i)
        self.assertEqual(self.one('histogram_count(req_latency_seconds{job="api"})', t), 4)
        self.assertEqual(self.one('histogram_count(req_latency_seconds)', t + 20_000), 10)
        self.assertEqual(self.one('histogram_sum(req_latency_seconds)', t + 20_000), 6)
        # (1,2]: 4 + 2, (2,4]: 3, one negative observation in [-2,-1).
        self.assertEqual(self.one('histogram_fraction(1, 2, req_latency_seconds)', t + 20_000), 0.6)
        self.assertEqual(self.one('histogram_fraction(-2, -1, req_latency_seconds)', t + 20_000), 0.1)
        # Scale below -4: rejected as Prometheus does, named in partial success.
        status, resp = self.post(request({}, [self.exp_delta(t + 30_000, -5, 0, [1])]))
        self.assertEqual(status, 200, resp)
        partial = dict(fields(dict(fields(resp))[1]))
        self.assertEqual(partial[1], 1)
        self.assertIn(b"scale must be >= -4, was -5", partial[2])

    def json_sum(self, name, temporality, points):
        return {"resourceMetrics": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "loader"}}]},
            "scopeMetrics": [{"metrics": [{"name": name, "unit": "By", "sum": {
                "aggregationTemporality": temporality, "isMonotonic": True,
                "dataPoints": [{"asInt": str(v), "timeUnixNano": str(self.ns(t))} for t, v in points]}}]}]}]}

    def test_json_deltas_become_cumulative(self):
        t = self.now_ms - 40_000
        for batch in ([(t, 100), (t + 10_000, 50)], [(t + 20_000, 25)], [(t + 30_000, 5)]):
            status, resp = self.post(json.dumps(self.json_sum("io.read", "AGGREGATION_TEMPORALITY_DELTA", batch)).encode(),
                                     "application/json")
            self.assertEqual(status, 200, resp)
            self.assertEqual(json.loads(resp), {})
        self.assertEqual(self.one('io_read_bytes_total{job="loader"}', t + 30_000), 180)
        self.assertEqual(self.one('io_read_bytes_total', t + 10_000), 150)
        # A point not after the series' last one is rejected, the rest stored.
        status, resp = self.post(json.dumps(self.json_sum("io.read", 1, [(t, 7), (t + 35_000, 20)])).encode(),
                                 "application/json")
        self.assertEqual(status, 200, resp)
        partial = json.loads(resp)["partialSuccess"]
        self.assertEqual(partial["rejectedDataPoints"], "1")
        self.assertIn('metric "io.read": delta point not after', partial["errorMessage"])
        self.assertEqual(self.one('io_read_bytes_total', t + 35_000), 200)

    def test_bad_requests_are_named_and_the_server_keeps_serving(self):
        status, resp = self.post(b"\x0a\x05\x01")
        self.assertEqual(status, 400)
        self.assertIn(b"otlp: protobuf: offset", resp)
        status, resp = self.post(b'{"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"name": "g", "gauge": '
                                 b'{"dataPoints": [{"asDouble": "x"}]}}]}]}]}', "application/json")
        self.assertEqual(status, 400)
        self.assertIn(b"resourceMetrics[0].scopeMetrics[0].metrics[0].gauge.dataPoints[0].asDouble", resp)
        status, resp = self.post(b"g 1\n", "text/plain")
        self.assertEqual(status, 415, resp)
        # Partial success over protobuf: the response names the rejected points.
        bad = ld(1, fixed64(3, self.ns(self.now_ms)) + fixed64(4, 1) + ld(6, struct.pack("<Q", 1))
                 + ld(7, struct.pack("<d", 1.0))) + vint(2, 2)
        good = ld(1, fixed64(3, self.ns(self.now_ms)) + double(4, 3))
        status, resp = self.post(request({}, [metric("bad.hist", "", 9, bad), metric("good", "", 5, good)]))
        self.assertEqual(status, 200, resp)
        partial = dict(fields(dict(fields(resp))[1]))
        self.assertEqual(partial[1], 1)
        self.assertIn(b"1 bucket counts for 1 explicit bounds", partial[2])
        self.assertEqual(self.one("good"), 3)
        status, _ = self.server.request("GET", "/-/ready")
        self.assertEqual(status, 200)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: otlp_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
