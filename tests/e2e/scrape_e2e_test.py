#!/usr/bin/env python3
"""End-to-end tests of scraping: the real trainwatch binary scrapes real
targets (Debian's prometheus-node-exporter, a training-like script using
Debian's python3-prometheus-client) beside Debian's Prometheus 2.42 scraping
the same targets with the same scrape config, and the two stored series sets
are compared. Also /api/v1/targets, file_sd changes, SIGHUP and
POST /-/reload, staleness when targets go away, and scraping over TLS
(tls_config: CA, client certificate, server_name, insecure_skip_verify)
beside Prometheus with certificates made by Debian's openssl.

Usage: scrape_e2e_test.py /path/to/trainwatch [unittest args]

Every wait polls with a generous deadline; nothing depends on how fast the
machine is. Processes are started on free loopback ports and stopped by PID.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import urllib.parse

import twtest
from twtest import Process, Server, free_port, request

PROMETHEUS = "/usr/bin/prometheus"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
PYTHON = "/usr/bin/python3"

# The training-like script: fixed values so the test can check them.
TRAIN_SCRIPT = textwrap.dedent("""
    import sys, time
    from prometheus_client import Counter, Gauge, Histogram, start_http_server
    steps = Counter("train_steps", "Optimizer steps taken.", ["run"])
    loss = Gauge("train_loss", "Current training loss.", ["run"])
    step_time = Histogram("train_step_seconds", "Time per step.", ["run"], buckets=[0.1, 0.5, 1.0])
    steps.labels(run="r1").inc(42)
    loss.labels(run="r1").set(0.25)
    for v in (0.05, 0.3, 0.7, 2.0):
        step_time.labels(run="r1").observe(v)
    start_http_server(int(sys.argv[1]), addr="127.0.0.1")
    print("ready", flush=True)
    while True:
        time.sleep(1)
""")


# A metrics endpoint over TLS that requires a client certificate, and shows
# the Host header and TLS server name (SNI) each request came with.
TLS_SCRIPT = textwrap.dedent("""
    import http.server, socketserver, ssl, sys
    port, cert, key, client_ca = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(client_ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    def sni(sock, name, _ctx):
        sock.tw_sni = name or ""
    ctx.sni_callback = sni
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_GET(self):
            body = ('# TYPE tls_probe_info gauge\\ntls_probe_info{host="%s",sni="%s"} 1\\n'
                    '# TYPE tls_probe_value gauge\\ntls_probe_value 42\\n'
                    % (self.headers.get("Host", ""), getattr(self.request, "tw_sni", ""))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *args):
            pass
    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
    srv = Server(("127.0.0.1", port), Handler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("ready", flush=True)
    srv.serve_forever()
""")


def make_certs(d):
    """Two CAs, a server certificate for DNS name tw-test.local only (no IP
    SAN, so the name must come from server_name) and a client certificate,
    both from the first CA. Returns {name: path}."""
    def ossl(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, cwd=d)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "other_ca"):
        ossl("req", "-x509", *ec, "-keyout", ca + ".key", "-out", ca + ".crt", "-days", "2",
             "-subj", "/CN=trainwatch test " + ca)
    for name, ext in (("server", "subjectAltName=DNS:tw-test.local\nextendedKeyUsage=serverAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write("basicConstraints=CA:FALSE\n" + ext)
        ossl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name)
        ossl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", name + ".crt", "-days", "2", "-extfile", name + ".ext")
    return {n: os.path.join(d, n) for n in ("ca.crt", "other_ca.crt", "server.crt", "server.key",
                                            "client.crt", "client.key")}


def wait_for(fn, what, timeout=90, every=0.2):
    """Polls fn() until it returns a truthy value; fails with `what` after timeout seconds."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = fn()
            if last:
                return last
        except (OSError, ValueError, KeyError) as e:
            last = e
        time.sleep(every)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def get_json(port, path, params=None):
    if params:
        path += "?" + urllib.parse.urlencode(params, doseq=True)
    status, body = request(port, "GET", path, timeout=30)
    if status != 200:
        raise ValueError("GET %s: %d %r" % (path, status, body[:300]))
    return json.loads(body)


def series_set(port, match):
    now = time.time()
    d = get_json(port, "/api/v1/series", {"match[]": match, "start": now - 3600, "end": now + 60})
    return {tuple(sorted(s.items())) for s in d["data"]}


def instant(port, query):
    d = get_json(port, "/api/v1/query", {"query": query})
    return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in d["data"]["result"]}


def scrape_config(jobs, interval="1s"):
    lines = ["global: {scrape_interval: %s, scrape_timeout: %s}" % (interval, interval), "scrape_configs:"]
    for j in jobs:
        lines.append("  - " + json.dumps(j))
    return "\n".join(lines) + "\n"


class ScrapeE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tw-scrape-e2e-")
        cls.procs = []
        # Debian's node exporter with a small, stable set of collectors.
        cls.node_port = free_port()
        cls.node = Process([NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % cls.node_port,
                            "--collector.disable-defaults", "--collector.cpu", "--collector.meminfo",
                            "--collector.loadavg", "--collector.stat", "--collector.uname", "--collector.time"],
                           os.path.join(cls.tmp, "node.log"))
        cls.procs.append(cls.node)
        cls.node.wait_ready(cls.node_port, "/metrics")
        # The training script.
        cls.train_port = free_port()
        script = os.path.join(cls.tmp, "train.py")
        with open(script, "w") as f:
            f.write(TRAIN_SCRIPT)
        cls.train = Process([PYTHON, script, str(cls.train_port)], os.path.join(cls.tmp, "train.log"))
        cls.procs.append(cls.train)
        cls.train.wait_ready(cls.train_port, "/metrics")

    @classmethod
    def tearDownClass(cls):
        for p in reversed(cls.procs):
            p.stop()
        if os.environ.get("TW_E2E_KEEP"):
            sys.stderr.write("kept %s\n" % cls.tmp)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=self.tmp)
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop_quietly()

    def trainwatch(self, config_text, extra=()):
        cfg = os.path.join(self.dir, "trainwatch.yml")
        with open(cfg, "w") as f:
            f.write(config_text)
        s = Server(os.path.join(self.dir, "data"), extra_args=["--config.file", cfg] + list(extra))
        self.servers.append(s)
        s.start()
        return s, cfg

    def prometheus(self, config_text):
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(config_text)
        port = free_port()
        p = Process([PROMETHEUS, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(self.dir, "prom"),
                     "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                    os.path.join(self.dir, "prometheus.log"))
        self.addCleanup(p.stop)
        p.wait_ready(port)
        return port

    def wait_scrapes(self, port, job, n=3):
        """Waits until /api/v1/targets showed n different successful scrapes of `job`'s target."""
        seen = set()

        def ok():
            for t in get_json(port, "/api/v1/targets", {"state": "active"})["data"]["activeTargets"]:
                if t["scrapePool"] == job and t["health"] == "up":
                    seen.add(t["lastScrape"])
            return len(seen) >= n
        wait_for(ok, "%d scrapes of job %s on port %d" % (n, job, port))

    @unittest.skipUnless(os.path.exists(PROMETHEUS), "needs Debian's prometheus")
    def test_same_series_as_prometheus(self):
        jobs = [{"job_name": "node", "static_configs": [{"targets": ["127.0.0.1:%d" % self.node_port]}]},
                {"job_name": "train", "static_configs": [{"targets": ["127.0.0.1:%d" % self.train_port],
                                                          "labels": {"team": "ml"}}],
                 "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": "python_gc_.*",
                                             "action": "drop"}]}]
        config = scrape_config(jobs)
        # Without the training rule pack: its recording rules (trainwatch:loss
        # from train_loss) would add series this Prometheus has no rules for.
        tw, _ = self.trainwatch(config, extra=["--scrape.self=false", "--rules.default-pack=false"])
        prom = self.prometheus(config)
        for port in (tw.port, prom):
            for job in ("node", "train"):
                self.wait_scrapes(port, job)
        for job in ("node", "train"):
            ours = series_set(tw.port, '{job="%s"}' % job)
            theirs = series_set(prom, '{job="%s"}' % job)
            self.assertGreater(len(theirs), 20, job)
            self.assertEqual(ours - theirs, set(), "series only trainwatch stored for job %s" % job)
            self.assertEqual(theirs - ours, set(), "series only Prometheus stored for job %s" % job)
        # Values of the training script as its code set them.
        inst = "127.0.0.1:%d" % self.train_port
        base = {"instance": inst, "job": "train", "team": "ml", "run": "r1"}

        def value(name, **extra):
            want = dict(base, __name__=name, **extra)
            r = instant(tw.port, name)
            for k, v in r.items():
                if dict(k) == want:
                    return v
            raise AssertionError("no %r in %r" % (want, r))
        self.assertEqual(value("train_steps_total"), 42)
        self.assertEqual(value("train_loss"), 0.25)
        for le, n in (("0.1", 1), ("0.5", 2), ("1.0", 3), ("+Inf", 4)):
            self.assertEqual(value("train_step_seconds_bucket", le=le), n, le)
        self.assertEqual(value("train_step_seconds_count"), 4)
        self.assertAlmostEqual(value("train_step_seconds_sum"), 3.05)
        # Values agree with Prometheus's for the same series (all constant here).
        for q in ("train_steps_total", "train_loss", "train_step_seconds_bucket", "train_step_seconds_sum",
                  "train_steps_created"):
            self.assertEqual(instant(tw.port, q), instant(prom, q), q)
        # Report series per target.
        for name in ("up", "scrape_duration_seconds", "scrape_samples_scraped",
                     "scrape_samples_post_metric_relabeling", "scrape_series_added"):
            self.assertEqual(len(instant(tw.port, '%s{job="train"}' % name)), 1, name)
        scraped = instant(tw.port, 'scrape_samples_scraped{job="train"}')
        post = instant(tw.port, 'scrape_samples_post_metric_relabeling{job="train"}')
        self.assertGreater(list(scraped.values())[0], list(post.values())[0])  # python_gc_* dropped
        self.assertEqual(instant(tw.port, 'scrape_samples_post_metric_relabeling{job="train"}'),
                         instant(prom, 'scrape_samples_post_metric_relabeling{job="train"}'))
        # Metadata from the scrapes.
        md = get_json(tw.port, "/api/v1/metadata", {"metric": "train_loss"})["data"]
        self.assertEqual(md, get_json(prom, "/api/v1/metadata", {"metric": "train_loss"})["data"])

    def test_targets_api_reload_file_sd_and_staleness(self):
        sd = os.path.join(self.dir, "sd.json")
        with open(sd, "w") as f:
            json.dump([{"targets": ["127.0.0.1:%d" % self.train_port], "labels": {"src": "file"}}], f)
        closed = free_port()
        # "nhcb": the training script's classic histogram (OpenMetrics, with
        # _created) stored as a native histogram with custom buckets.
        nhcb = {"job_name": "nhcb", "convert_classic_histograms_to_nhcb": True,
                "static_configs": [{"targets": ["127.0.0.1:%d" % self.train_port]}],
                "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": "train_step_seconds.*",
                                            "action": "keep"}]}
        jobs = [{"job_name": "node", "static_configs": [{"targets": ["127.0.0.1:%d" % self.node_port]}]},
                {"job_name": "closed", "static_configs": [{"targets": ["127.0.0.1:%d" % closed]}]},
                {"job_name": "files", "file_sd_configs": [{"files": [os.path.join(self.dir, "*.json")]}]}, nhcb]
        tw, cfg = self.trainwatch(scrape_config(jobs))

        def targets(state=None):
            return get_json(tw.port, "/api/v1/targets", {"state": state} if state else None)["data"]

        def by_pool():
            return {t["scrapePool"]: t for t in targets()["activeTargets"]}

        # (c) up and down targets, in Prometheus's shape; trainwatch scrapes itself too.
        def settled():
            p = by_pool()
            return p if all(p.get(j, {}).get("health") in ("up", "down") for j in ("node", "closed", "files",
                                                                                   "trainwatch", "nhcb")) else None
        pools = wait_for(settled, "every target scraped")
        self.check_nhcb(tw.port)
        node = pools["node"]
        self.assertEqual(node["health"], "up", node)
        self.assertEqual(sorted(node.keys()), sorted(
            ["discoveredLabels", "labels", "scrapePool", "scrapeUrl", "globalUrl", "lastError", "lastScrape",
             "lastScrapeDuration", "health", "scrapeInterval", "scrapeTimeout"]))
        self.assertEqual(node["labels"], {"instance": "127.0.0.1:%d" % self.node_port, "job": "node"})
        self.assertEqual(node["discoveredLabels"], {
            "__address__": "127.0.0.1:%d" % self.node_port, "__metrics_path__": "/metrics", "__scheme__": "http",
            "__scrape_interval__": "1s", "__scrape_timeout__": "1s", "job": "node"})
        self.assertEqual(node["scrapeUrl"], "http://127.0.0.1:%d/metrics" % self.node_port)
        self.assertEqual(node["scrapeInterval"], "1s")
        self.assertRegex(node["lastScrape"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
        self.assertEqual(node["lastError"], "")
        self.assertEqual(pools["closed"]["health"], "down")
        self.assertIn("127.0.0.1:%d" % closed, pools["closed"]["lastError"])
        self.assertEqual(pools["files"]["labels"]["src"], "file")
        self.assertEqual(pools["files"]["discoveredLabels"]["__meta_filepath"], sd)
        self.assertEqual(pools["trainwatch"]["health"], "up", pools["trainwatch"])
        self.assertEqual(targets("dropped")["activeTargets"], [])
        self.assertEqual(instant(tw.port, 'up{job="closed"}'),
                         {(("__name__", "up"), ("instance", "127.0.0.1:%d" % closed), ("job", "closed")): 0.0})

        # (d) a file_sd change is picked up: a second target in the file.
        with open(sd + ".tmp", "w") as f:
            json.dump([{"targets": ["127.0.0.1:%d" % self.train_port, "127.0.0.1:%d" % self.node_port],
                        "labels": {"src": "file"}}], f)
        os.rename(sd + ".tmp", sd)
        wait_for(lambda: len([t for t in targets()["activeTargets"] if t["scrapePool"] == "files"]) == 2,
                 "the second file_sd target")
        wait_for(lambda: instant(tw.port, 'up{job="files",instance="127.0.0.1:%d"} == 1' % self.node_port),
                 "the new file_sd target scraped")

        # (e)+(f) POST /-/reload with the node job removed and a relabeled, dropped target added:
        # node's series go stale at once.
        self.assertTrue(instant(tw.port, 'node_load1{job="node"}'))
        # The nhcb job with the conversion off: its loop restarts, the
        # native histogram goes stale and the classic series come.
        jobs2 = [jobs[1], jobs[2], dict(nhcb, convert_classic_histograms_to_nhcb=False),
                 {"job_name": "dropper", "static_configs": [{"targets": ["a:1", "b:2"]}],
                  "relabel_configs": [{"source_labels": ["__address__"], "regex": "a:1", "action": "drop"}]}]
        with open(cfg, "w") as f:
            f.write(scrape_config(jobs2))
        status, body = tw.request("POST", "/-/reload")
        self.assertEqual(status, 200, body)
        pools = by_pool()
        self.assertNotIn("node", pools)
        self.assertIn("dropper", pools)
        dropped = targets("dropped")["droppedTargets"]
        self.assertEqual([d["discoveredLabels"]["__address__"] for d in dropped], ["a:1"])
        self.assertEqual(targets("active")["droppedTargets"], [])
        wait_for(lambda: instant(tw.port, 'node_load1{job="node"}') == {}, "node series stale after reload")
        self.assertEqual(instant(tw.port, 'up{job="node"}'), {})
        self.assertEqual(instant(tw.port, 'histogram_count(train_step_seconds{job="nhcb"})'), {})
        wait_for(lambda: instant(tw.port, 'train_step_seconds_count{job="nhcb"}'), "nhcb job's classic series after reload")

        # A bad config: 500 with the reason; the running set stays.
        with open(cfg, "w") as f:
            f.write(scrape_config([{"job_name": "bad", "scrape_interval": "5x"}]))
        status, body = tw.request("POST", "/-/reload")
        self.assertEqual(status, 500)
        self.assertIn(b"scrape_interval", body)
        self.assertIn(b'job "bad"', body)
        self.assertIn("dropper", by_pool())
        self.assertEqual(tw.request("GET", "/-/reload")[0], 405)

        # SIGHUP with the node job back.
        with open(cfg, "w") as f:
            f.write(scrape_config(jobs))
        os.kill(tw.proc.pid, signal.SIGHUP)
        wait_for(lambda: "node" in by_pool() and "dropper" not in by_pool(), "SIGHUP reload")
        wait_for(lambda: instant(tw.port, 'up{job="node"} == 1'), "node scraped again after SIGHUP")
        self.assertIsNone(tw.proc.poll())

    def check_nhcb(self, port):
        """The "nhcb" job's native histogram answers as the "files" job's
        classic series of the same target do (Prometheus 2.42 has no NHCB, so
        there is no peer to compare with): count, sum and quantiles, the
        classic histogram_quantile over le buckets against the native one over
        custom buckets (both interpolate linearly, promql/quantile.go)."""
        inst = "127.0.0.1:%d" % self.train_port
        native = 'train_step_seconds{job="nhcb"}'
        classic = 'train_step_seconds_%%s{job="files",instance="%s"}' % inst
        for job in ("nhcb", "files"):
            self.wait_scrapes(port, job, 3)  # for the rates below
        self.assertEqual(instant(port, '{job="nhcb",__name__=~"train_step_seconds_(bucket|count|sum)"}'), {})

        def one(q):
            r = instant(port, q)
            self.assertEqual(len(r), 1, (q, r))
            return list(r.values())[0]
        self.assertEqual(one("histogram_count(%s)" % native), one(classic % "count"))
        self.assertEqual(one("histogram_count(%s)" % native), 4)
        self.assertAlmostEqual(one("histogram_sum(%s)" % native), one(classic % "sum"))
        for q in (0.25, 0.5, 0.6, 0.9):
            self.assertAlmostEqual(one("histogram_quantile(%g, %s)" % (q, native)),
                                   one("histogram_quantile(%g, %s)" % (q, classic % "bucket")), msg=q)
        self.assertAlmostEqual(one("histogram_quantile(0.6, %s)" % native), 0.7)
        # Over rates: the target's values are constant, so both are NaN, and
        # the rates of count agree.
        self.assertEqual(one("histogram_count(rate(%s[5s]))" % native), one("rate(%s[5s])" % (classic % "count")))
        r = [one("histogram_quantile(0.9, rate(%s[5s]))" % native),
             one("histogram_quantile(0.9, rate(%s[5s]))" % (classic % "bucket"))]
        self.assertTrue(all(x != x for x in r), r)

    @unittest.skipUnless(os.path.exists(PROMETHEUS), "needs Debian's prometheus")
    def test_tls_like_prometheus(self):
        c = make_certs(self.dir)
        port = free_port()
        script = os.path.join(self.dir, "tls_server.py")
        with open(script, "w") as f:
            f.write(TLS_SCRIPT)
        srv = Process([PYTHON, script, str(port), c["server.crt"], c["server.key"], c["ca.crt"]],
                      os.path.join(self.dir, "tls.log"))
        self.addCleanup(srv.stop)
        wait_for(lambda: b"ready" in open(srv.log_path, "rb").read(), "the TLS server")
        client = {"cert_file": c["client.crt"], "key_file": c["client.key"]}
        tls = {  # job → (tls_config, scrape should succeed)
            "tls_ok": (dict(client, ca_file=c["ca.crt"], server_name="tw-test.local"), True),
            "tls_insecure": (dict(client, insecure_skip_verify=True), True),
            "tls_wrong_ca": (dict(client, ca_file=c["other_ca.crt"], server_name="tw-test.local"), False),
            "tls_no_server_name": (dict(client, ca_file=c["ca.crt"]), False),
            "tls_no_client_cert": ({"ca_file": c["ca.crt"], "server_name": "tw-test.local"}, False),
        }
        jobs = [{"job_name": j, "scheme": "https", "tls_config": t,
                 "static_configs": [{"targets": ["127.0.0.1:%d" % port]}]} for j, (t, _) in tls.items()]
        config = scrape_config(jobs)
        tw, _ = self.trainwatch(config, extra=["--scrape.self=false", "--rules.default-pack=false"])
        prom = self.prometheus(config)

        def health(p):
            got = {t["scrapePool"]: t for t in get_json(p, "/api/v1/targets")["data"]["activeTargets"]}
            return got if all(got.get(j, {}).get("health") in ("up", "down") for j in tls) else None
        for p in (tw.port, prom):
            targets = wait_for(lambda: health(p), "every TLS target scraped on port %d" % p)
            for j, (_, ok) in tls.items():
                self.assertEqual(targets[j]["health"], "up" if ok else "down", (p, j, targets[j]))
                self.assertEqual(targets[j]["lastError"] == "", ok, (p, j, targets[j]))
            for j in ("tls_ok", "tls_insecure"):
                self.wait_scrapes(p, j, 2)
        ours = {j: health(tw.port)[j]["lastError"] for j in tls}
        self.assertIn("x509", ours["tls_wrong_ca"])
        self.assertIn("x509", ours["tls_no_server_name"])
        # The same series as Prometheus stores, with the target's own Host
        # header and server_name as the TLS name.
        inst = "127.0.0.1:%d" % port
        ok_info = series_set(tw.port, 'tls_probe_info{job="tls_ok"}')
        self.assertEqual(ok_info, series_set(prom, 'tls_probe_info{job="tls_ok"}'))
        self.assertEqual(ok_info, {(("__name__", "tls_probe_info"), ("host", inst), ("instance", inst),
                                    ("job", "tls_ok"), ("sni", "tw-test.local"))})
        for j in ("tls_ok", "tls_insecure"):
            q = 'tls_probe_value{job="%s"}' % j
            self.assertEqual(instant(tw.port, q), instant(prom, q), j)
            self.assertEqual(list(instant(tw.port, q).values()), [42.0], j)
        for j in ("tls_wrong_ca", "tls_no_server_name", "tls_no_client_cert"):
            self.assertEqual(instant(tw.port, '{job="%s",__name__!~"up|scrape_.*"}' % j), {}, j)
            self.assertEqual(instant(tw.port, 'up{job="%s"}' % j), instant(prom, 'up{job="%s"}' % j), j)


if __name__ == "__main__":
    twtest.BINARY = sys.argv.pop(1)
    unittest.main()
