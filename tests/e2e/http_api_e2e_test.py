#!/usr/bin/env python3
"""The HTTP API's JSON shapes against real Prometheus 2.42 responses.

Usage: http_api_e2e_test.py /path/to/trainwatch [unittest args]

../shared/conformance/http_api/prometheus_2.42/ holds bodies captured from
Debian's Prometheus 2.42 (INDEX.tsv: file, status, content type, request).
This test imports series like the captured server's own (up,
scrape_samples_scraped, prometheus_http_requests_total, job:up:sum, ALERTS)
at the captured timestamps into a real trainwatch, sends every captured
request it implements (GET, and form POST for the query endpoints), and
requires the same HTTP status, content type and JSON shape: the same keys
and JSON value types, recursively (list elements against the captured
first element), and the same errorType. Deterministic error strings must be
equal too.
"""
import json
import os
import shutil
import sys
import tempfile
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import twtest  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
CAPTURES = os.path.join(REPO, "..", "shared", "conformance", "http_api", "prometheus_2.42")

# Captures not compared here, and why.
NOT_COMPARED = {
    "targets.json": "scrape API (api_scrape.cc, tested with the scrape module)",
    "metadata_limit5.json": "scrape API (api_scrape.cc, tested with the scrape module)",
    "rules.json": "rules API (api_rules.cc, compared in rules_e2e_test.py)",
    "alerts.json": "rules API (api_rules.cc, compared in rules_e2e_test.py)",
    # /federate answers at the server's clock with a 5 m lookback, and this
    # data is older: its output is checked byte for byte in api_test.cc.
    "federate_up.txt": "needs samples within 5 m of now",
}
# Warnings Prometheus 3.x gives where the 2.42 capture has none (the engine
# follows 3.x; docs/compatibility.md): checked, then left out of the shape.
WARNINGS_3X = {
    "query_histogram_quantile_on_gauge.json":
        'PromQL warning: bucket label "le" is missing or has a malformed value of "" for metric name "up" (1:25)',
}
# Error strings that must match byte for byte (the others may be worded differently).
EXACT_ERRORS = {"query_parse_error.json", "query_range_bad_step.json"}
CAPTURE_TIME = 1796207149


def json_type(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "null"
    return "list" if isinstance(v, list) else "object"


def shape_diff(ours, ref, path="$"):
    """None when `ours` has ref's shape, else where it differs."""
    if json_type(ours) != json_type(ref):
        return "%s: %s vs %s" % (path, json_type(ours), json_type(ref))
    if isinstance(ref, dict):
        if set(ours) != set(ref):
            return "%s: keys %s vs %s" % (path, sorted(ours), sorted(ref))
        for k in ref:
            d = shape_diff(ours[k], ref[k], "%s.%s" % (path, k))
            if d:
                return d
    elif isinstance(ref, list) and ref:
        if not ours:
            return "%s: empty list, Prometheus has %d items" % (path, len(ref))
        if len({json_type(x) for x in ref}) > 1:
            # A tuple such as [time, "value"]: position by position.
            if len(ours) != len(ref):
                return "%s: %d items vs %d" % (path, len(ours), len(ref))
            pairs = zip(ours, ref)
        else:
            pairs = ((item, ref[0]) for item in ours)
        for i, (item, r) in enumerate(pairs):
            d = shape_diff(item, r, "%s[%d]" % (path, i))
            if d:
                return d
    return None


def data_lines():
    """The captured server's own series, 5 s apart, ending at the captured times."""
    inst = 'instance="127.0.0.1:19090",job="prometheus"'
    out = []
    for k in range(12):
        ts = 1796207146715 - (11 - k) * 5000
        out.append('up{%s} 1 %d' % (inst, ts))
        out.append('scrape_samples_scraped{%s} 812 %d' % (inst, ts))
        out.append('prometheus_http_requests_total{code="200",handler="/metrics",%s} %d %d' % (inst, 10 + k, ts))
        out.append('job:up:sum{job="prometheus"} 1 %d' % (ts + 2238))
        out.append('ALERTS{alertname="AlwaysFiring",alertstate="firing",severity="none"} 1 %d' % (ts + 2238))
    return ("\n".join(out) + "\n").encode()


class HttpApiShapeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(os.path.join(CAPTURES, "INDEX.tsv")):
            raise unittest.SkipTest("captures not found at %s" % CAPTURES)
        cls.tmp = tempfile.mkdtemp(prefix="tw-http-api-")
        # The captures hold fixed timestamps: keep them whatever today's date.
        cls.tw = twtest.Server(os.path.join(cls.tmp, "data"), ["--retention.time", "0"]).start()
        status, body = cls.tw.request("POST", "/api/v1/import/prometheus", data_lines())
        if status != 204:
            cls.tearDownClass()
            raise RuntimeError("import: %d %r" % (status, body))

    @classmethod
    def tearDownClass(cls):
        cls.tw.stop_quietly()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def captures(self):
        with open(os.path.join(CAPTURES, "INDEX.tsv")) as f:
            for line in f:
                if line.strip():
                    name, status, ctype, request = line.rstrip("\n").split("\t")
                    yield name, int(status), ctype, request

    def get(self, request):
        conn_status, body = self.tw.request("GET", request)
        return conn_status, body

    def test_every_captured_endpoint(self):
        compared = 0
        for name, status, ctype, request in self.captures():
            if name in NOT_COMPARED:
                continue
            with self.subTest(capture=name):
                path, _, qs = request.partition("?")
                params = urllib.parse.parse_qsl(qs, keep_blank_values=True)
                if path == "/api/v1/query" and not any(k == "time" for k, _ in params):
                    # The capture used the server's clock; ours is later than the data.
                    params.append(("time", "%d.698" % CAPTURE_TIME))
                full = path + ("?" + urllib.parse.urlencode(params) if params else "")
                got_status, body = self.tw.request("GET", full)
                with open(os.path.join(CAPTURES, name), "rb") as f:
                    ref = json.loads(f.read())
                self.assertEqual(got_status, status, body[:300])
                got = json.loads(body)
                if name in WARNINGS_3X:
                    self.assertEqual(got.pop("warnings", None), [WARNINGS_3X[name]], full)
                self.assertIsNone(shape_diff(got, ref), "%s: %s" % (full, body[:400]))
                if ref["status"] == "error":
                    self.assertEqual(got["errorType"], ref["errorType"])
                    if name in EXACT_ERRORS:
                        self.assertEqual(got["error"], ref["error"])
                if name in ("format_query.json", "query_scalar.json", "query_string.json", "query_exemplars.json",
                            "query_empty.json", "query_up.json"):
                    self.assertEqual(got, ref, full)  # same data here, so the same answer
                if name in ("label_job_values.json", "series_up.json"):
                    # trainwatch may also hold its own self-scraped series (job="trainwatch").
                    for item in ref["data"]:
                        self.assertIn(item, got["data"], full)
                if path.startswith("/api/v1/query") or path == "/api/v1/format_query":
                    # Form POST, as Grafana sends queries, gives the same answer.
                    p_status, p_body = self.tw.request(
                        "POST", path, urllib.parse.urlencode(params).encode(),
                        {"Content-Type": "application/x-www-form-urlencoded"})
                    self.assertEqual((p_status, json.loads(p_body)), (got_status, json.loads(body)))
                compared += 1
        self.assertEqual(compared, 18)

    def test_content_type(self):
        conn = __import__("http.client").client.HTTPConnection("127.0.0.1", self.tw.port, timeout=10)
        try:
            conn.request("GET", "/api/v1/labels")
            resp = conn.getresponse()
            resp.read()
            self.assertEqual(resp.getheader("Content-Type").split(";")[0], "application/json")
        finally:
            conn.close()

    def test_grafana_health_check_and_time_formats(self):
        # Grafana's "Save & test": an instant `1+1` query sent as a form POST.
        status, body = self.tw.request("POST", "/api/v1/query", b"query=1%2B1&time=1796207149.5",
                                       {"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual((status, json.loads(body)),
                         (200, {"status": "success", "data": {"resultType": "scalar", "result": [1796207149.5, "2"]}}))
        # RFC 3339 and unix times select the same instant.
        a = self.get("/api/v1/query?query=up&time=2026-12-02T10:25:49.698Z")
        b = self.get("/api/v1/query?query=up&time=1796207149.698")
        self.assertEqual(a, b)
        self.assertEqual(a[0], 200)
        self.assertEqual(len(json.loads(a[1])["data"]["result"]), 1)
        r = self.get("/api/v1/query_range?query=up&start=2026-12-02T10:25:00Z&end=1796207149&step=15s")
        self.assertEqual(r[0], 200, r[1])
        self.assertEqual([p[0] for p in json.loads(r[1])["data"]["result"][0]["values"]],
                         [1796207100, 1796207115, 1796207130, 1796207145])

    def test_errors_as_prometheus(self):
        cases = [
            ("/api/v1/query?query=up&time=nope", 400, "bad_data",
             'invalid parameter "time": cannot parse "nope" to a valid timestamp'),
            ("/api/v1/query?query=up&timeout=soon", 400, "bad_data",
             'invalid parameter "timeout": cannot parse "soon" to a valid duration'),
            ("/api/v1/query_range?query=up&start=10&end=5&step=1", 400, "bad_data",
             'invalid parameter "end": end timestamp must not be before start time'),
            ("/api/v1/query_range?query=up&start=0&end=100000&step=1", 400, "bad_data",
             "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"),
            ("/api/v1/series", 400, "bad_data", "no match[] parameter provided"),
            ("/api/v1/label/1bad/values", 400, "bad_data", 'invalid label name: "1bad"'),
            ("/api/v1/labels?limit=-1", 400, "bad_data", 'invalid parameter "limit": limit must be non-negative'),
            ("/api/v1/query?query=rate(up)", 400, "bad_data", None),
        ]
        for req, status, etype, msg in cases:
            with self.subTest(req=req):
                got_status, body = self.get(req)
                got = json.loads(body)
                self.assertEqual((got_status, got["status"], got["errorType"]), (status, "error", etype), body)
                if msg is not None:
                    self.assertEqual(got["error"], msg)

    def test_limit(self):
        status, body = self.get("/api/v1/label/__name__/values?limit=2")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body), {"status": "success", "data": ["ALERTS", "job:up:sum"],
                                            "warnings": ["results truncated due to limit"]})
        status, body = self.get("/api/v1/series?match[]=%7Bjob%3D%22prometheus%22%7D&limit=1")
        self.assertEqual(len(json.loads(body)["data"]), 1)
        status, body = self.get("/api/v1/label/__name__/values?start=1796207100&end=1796207149&match[]=up")
        self.assertEqual(json.loads(body)["data"], ["up"])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: http_api_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
