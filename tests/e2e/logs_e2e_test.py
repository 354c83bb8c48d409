#!/usr/bin/env python3
"""End-to-end test of the log store (docs/logs.md) against the real trainwatch
binary: native NDJSON push, Elasticsearch _bulk and Loki push (JSON and
snappy-protobuf); queries with matchers, filters and cursor paging; the
histogram; live tail over SSE; kill -9 and restart keeping every acknowledged
line; log-derived metrics in the TSDB; `trainwatch logs`; and a log file
shipped by Debian's rsyslog (imfile + omelasticsearch) into /_bulk.

Usage: logs_e2e_test.py /path/to/trainwatch [unittest args]
"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

import twtest
from protowire import snappy_literal
from twtest import Server

# Unix seconds of the first pushed line: recent, so retention (15d) keeps it.
T0 = int(time.time()) // 3600 * 3600 - 7200


def rfc3339(secs, frac=""):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + frac + "Z"



def q(params):
    return urllib.parse.urlencode(params)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def pb_varint_field(num, v):
    return varint(num << 3) + varint(v)


class LogsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-logs-e2e-")
        self.data = os.path.join(self.tmp, "data")
        self.server = Server(self.data, ["--logs.metrics-interval", "1s", "--scrape.self=false"]).start()

    def tearDown(self):
        self.server.stop_quietly()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def push(self, labels, lines, expect=204):
        body = "".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines)
        status, resp = self.server.request("POST", "/api/v1/logs?" + q(labels), body.encode(),
                                           {"Content-Type": "application/x-ndjson"})
        self.assertEqual(status, expect, resp)
        return resp

    def query(self, query, **params):
        params["query"] = query
        status, body = self.server.request("GET", "/api/v1/logs/query?" + q(params))
        self.assertEqual(status, 200, body)
        doc = json.loads(body)
        self.assertEqual(doc["status"], "success")
        return doc["data"]

    def messages(self, query, **params):
        return [l["message"] for l in self.query(query, **params)["lines"]]

    def push_training_mix(self):
        lines = []
        for i in range(50):
            lines.append({"time": T0 + i, "level": "info", "message": "step %d loss %.3f" % (i, 2.0 / (i + 1)),
                          "step": i, "status": 200 + (i % 3) * 100})
        lines.append({"time": T0 + 50, "level": "error", "message": "RuntimeError: CUDA error: out of memory",
                      "status": 500})
        lines.append("Traceback (most recent call last):")  # not JSON: a plain message at receive time
        self.push({"project": "vision", "run": "r1", "rank": "0", "host": "n1", "source": "stdout"}, lines)
        self.push({"project": "vision", "run": "r2", "rank": "1", "host": "n2", "source": "stderr"},
                  [{"time": T0 + 60, "level": "WARN", "msg": "NCCL timeout on rank 1", "labels": {"gpu": "3"}}])

    def test_native_push_query_filters_and_paging(self):
        self.push_training_mix()
        data = self.query('{project="vision", run="r1"}', limit=100)
        self.assertEqual(len(data["lines"]), 52)
        self.assertEqual(data["next_cursor"], "")
        # Newest first: the plain line got the receive time, after everything else.
        self.assertEqual(data["lines"][0]["message"], "Traceback (most recent call last):")
        self.assertEqual(data["lines"][1]["level"], "ERROR")
        first = data["lines"][-1]
        self.assertEqual(first["time"], rfc3339(T0))
        self.assertEqual(first["labels"], {"host": "n1", "project": "vision", "rank": "0", "run": "r1",
                                           "source": "stdout"})
        self.assertEqual(first["fields"], {"step": 0, "status": 200})

        self.assertEqual(self.messages('level=ERROR CUDA'), ["RuntimeError: CUDA error: out of memory"])
        self.assertEqual(self.messages('"out of memory"'), ["RuntimeError: CUDA error: out of memory"])
        self.assertEqual(self.messages('status>=500'), ["RuntimeError: CUDA error: out of memory"])
        self.assertEqual(len(self.messages('{run="r1"} status=400')), 16)  # i % 3 == 2 for i < 50
        self.assertEqual(self.messages('rank=1'), ["NCCL timeout on rank 1"])  # the stream label
        self.assertEqual(self.messages('{gpu="3"} level>=WARNING'), ["NCCL timeout on rank 1"])
        self.assertEqual(self.messages('|~ "step 4[89] "'), ["step 49 loss 0.040", "step 48 loss 0.041"])
        self.assertEqual(self.messages('step -loss'), [])
        self.assertEqual(self.messages('level=ERROR CUDA or nccl'),
                         ["NCCL timeout on rank 1", "RuntimeError: CUDA error: out of memory"])
        self.assertEqual(len(self.messages('{project=~"vis.*"}', start=T0 + 10, end=T0 + 19)), 10)

        # Cursor paging returns every line exactly once, in order.
        want = self.messages('{project="vision"}', limit=1000)
        got, cursor = [], ""
        while True:
            page = self.query('{project="vision"}', limit=7, cursor=cursor)
            got += [l["message"] for l in page["lines"]]
            cursor = page["next_cursor"]
            if not cursor:
                break
        self.assertEqual(got, want)
        self.assertEqual(len(got), 53)

        status, body = self.server.request("GET", "/api/v1/logs/histogram?" + q(
            {"query": '{run="r1"} level=INFO', "start": T0, "end": T0 + 49, "step": "10s"}))
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["data"], [[T0 + 10 * k, 10] for k in range(5)])

        status, body = self.server.request("GET", "/api/v1/logs/labels")
        self.assertEqual(json.loads(body)["data"], ["gpu", "host", "project", "rank", "run", "source"])
        status, body = self.server.request("GET", "/api/v1/logs/label/run/values")
        self.assertEqual(json.loads(body)["data"], ["r1", "r2"])

        # Bad input: 400 naming the line and field; nothing of that body is stored.
        resp = self.push({"run": "bad"}, [{"message": "ok"}, {"time": "noon", "message": "x"}], expect=400)
        self.assertIn(b"line 2", resp)
        self.assertIn(b'"time"', resp)
        self.assertEqual(self.messages('{run="bad"}'), [])
        status, body = self.server.request("GET", "/api/v1/logs/query?" + q({"query": '{run="r1"'}))
        self.assertEqual(status, 400)
        self.assertIn(b"parse error at position", body)
        # Over-long lines are kept, truncated and flagged.
        self.push({"run": "long"}, [{"message": "x" * 70000}])
        line = self.query('{run="long"}')["lines"][0]
        self.assertTrue(line["truncated"])
        self.assertEqual(len(line["message"]), 65536)

    def test_retried_batch_is_stored_once(self):
        labels = {"project": "vision", "run": "retry", "batch_id": "client.0.abc.L1"}
        lines = [{"time": T0 + i, "message": "line %d" % i} for i in range(3)]
        self.push(labels, lines)
        self.push(labels, lines)  # a retry after a lost answer: 204, nothing stored again
        self.push(dict(labels, batch_id="client.0.abc.L2"), lines[:1])
        self.assertEqual(self.messages('{run="retry"}'), ["line 2", "line 1", "line 0", "line 0"])
        # batch_id is not a stream label
        self.assertEqual(self.query('{run="retry"}')["lines"][0]["labels"], {"project": "vision", "run": "retry"})
        self.push(dict(labels, batch_id=""), lines, expect=400)

    def test_hostile_pushes_are_refused_and_a_far_future_line_wipes_nothing(self):
        # Issue 25. A query-string label that is not UTF-8 (it would reach JSON answers and notifications).
        status, resp = self.server.request("POST", "/api/v1/logs?project=p&run=%ff%fe", b'{"message":"m"}\n',
                                           {"Content-Type": "application/x-ndjson"})
        self.assertEqual(status, 400, resp)
        self.assertIn(b'invalid parameter "run"', resp)
        # One line dated in 2262 is refused (--ingest.max-future, 10m by default), naming the line.
        self.push({"project": "p", "run": "keep"}, [{"time": T0, "message": "keep me"}])
        resp = self.push({"project": "p", "run": "evil"}, [{"time": "2262-01-01T00:00:00Z", "message": "evil"}],
                         expect=400)
        self.assertIn(b"line 1: time 2262-01-01T00:00:00Z is more than 10m after the server clock", resp)
        self.push({"project": "p", "run": "keep"}, [{"time": T0 + 1, "message": "still here"}])
        self.assertEqual(self.messages('{run="keep"}'), ["still here", "keep me"])
        self.assertEqual(self.messages('{run="evil"}'), [])
        # A line older than the retention would be deleted at once: the push is refused (400 naming the
        # line and the bound), nothing of it is stored, and the refusal is counted.
        resp = self.push({"project": "p", "run": "old"},
                         [{"time": T0, "message": "fine"}, {"time": T0 - 30 * 86400, "message": "too old"}],
                         expect=400)
        self.assertIn(b"line 2: time ", resp)
        self.assertIn(b"log retention 15d", resp)
        self.assertEqual(self.messages('{run="old"}'), [])
        status, body = self.server.request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertIn(b'trainwatch_logs_lines_rejected_total{reason="too_old"} 1\n', body)
        self.assertIn(b'trainwatch_logs_lines_rejected_total{reason="too_far_in_future"} 1\n', body)
        # Loki names the stream and the entry.
        status, resp = self.server.request(
            "POST", "/loki/api/v1/push",
            json.dumps({"streams": [{"stream": {"job": "x"},
                                     "values": [[str(T0 * 10**9), "ok"], [str((T0 - 30 * 86400) * 10**9), "old"]]}]}
                       ).encode(), {"Content-Type": "application/json"})
        self.assertEqual(status, 400, resp)
        self.assertIn(b"streams[0].values[1]: time ", resp)

    def test_elasticsearch_bulk_and_loki_push(self):
        status, body = self.server.request("GET", "/", headers={"Accept": "application/json"})
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["tagline"], "You Know, for Search")
        bulk = ('{"index":{"_index":"shipper"}}\n{"@timestamp":"%s","message":"from es",' % rfc3339(T0, ".5") +
                '"host":"n7","log.level":"error","pid":42}\n'
                '{"create":{"_index":"shipper"}}\n{"message":"second"}\n'
                '{"index":{"_index":"shipper"}}\n"not an object"\n')
        status, body = self.server.request("POST", "/_bulk", bulk.encode(), {"Content-Type": "application/x-ndjson"})
        self.assertEqual(status, 200, body)
        doc = json.loads(body)
        self.assertTrue(doc["errors"])
        self.assertEqual([list(i.keys())[0] for i in doc["items"]], ["index", "create", "index"])
        self.assertEqual([list(i.values())[0]["status"] for i in doc["items"]], [201, 201, 400])
        self.assertIn("error", doc["items"][2]["index"])
        lines = self.query('{index="shipper"}')["lines"]
        self.assertEqual(sorted(l["message"] for l in lines), ["from es", "second"])
        es = [l for l in lines if l["message"] == "from es"][0]
        self.assertEqual(es["level"], "ERROR")
        self.assertEqual(es["labels"], {"host": "n7", "index": "shipper"})
        self.assertEqual(es["fields"], {"pid": 42})
        self.assertEqual(es["time"], rfc3339(T0, ".5"))
        status, body = self.server.request("POST", "/other/_bulk", b'{"index":{}}\n{"message":"via path"}\n')
        self.assertEqual(status, 200, body)
        self.assertEqual(self.messages('{index="other"}'), ["via path"])
        status, body = self.server.request("POST", "/_bulk", b'not json\n{}\n')
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)["status"], 400)

        loki = {"streams": [{"stream": {"job": "train", "level": "error"},
                             "values": [[str(T0 * 10**9 + 1), "loki json line"],
                                        [str(T0 * 10**9 + 2), '{"msg":"structured","step":7}']]}]}
        status, body = self.server.request("POST", "/loki/api/v1/push", json.dumps(loki).encode(),
                                           {"Content-Type": "application/json"})
        self.assertEqual(status, 204, body)
        lines = self.query('{job="train"}')["lines"]
        self.assertEqual([l["message"] for l in lines], ["structured", "loki json line"])
        self.assertEqual(lines[0]["fields"], {"step": 7})
        self.assertEqual(lines[0]["time"], rfc3339(T0, ".000000002"))
        self.assertEqual(lines[1]["level"], "ERROR")

        ts = pb_varint_field(1, T0) + pb_varint_field(2, 5)
        entry = pb_field(1, ts) + pb_field(2, b"loki protobuf line")
        stream = pb_field(1, b'{job="proto", host="n9"}') + pb_field(2, entry)
        body = snappy_literal(pb_field(1, stream))
        status, resp = self.server.request("POST", "/loki/api/v1/push", body, {"Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 204, resp)
        lines = self.query('{job="proto"}')["lines"]
        self.assertEqual(len(lines), 1)
        self.assertEqual(lines[0]["message"], "loki protobuf line")
        self.assertEqual(lines[0]["labels"], {"host": "n9", "job": "proto"})
        self.assertEqual(lines[0]["time"], rfc3339(T0, ".000000005"))
        status, resp = self.server.request("POST", "/loki/api/v1/push", b"\x05garbage",
                                           {"Content-Type": "application/x-protobuf"})
        self.assertEqual(status, 400)

    def test_tail_over_sse(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        conn.request("GET", "/api/v1/logs/tail?" + q({"query": '{run="live"} level=ERROR'}))
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertTrue(resp.getheader("Content-Type").startswith("text/event-stream"))
        self.assertEqual(resp.readline(), b": tailing\n")  # subscribed
        self.push({"run": "live"}, [{"level": "info", "message": "not me"}, {"level": "error", "message": "me 1"}])
        self.push({"run": "other"}, [{"level": "error", "message": "other run"}])
        self.push({"run": "live"}, [{"level": "error", "message": "me 2"}])
        events = []
        deadline = time.time() + 10
        while len(events) < 2 and time.time() < deadline:
            line = resp.readline()
            if line.startswith(b"data: "):
                events.append(json.loads(line[6:]))
        conn.close()
        self.assertEqual([e["message"] for e in events], ["me 1", "me 2"])
        self.assertEqual(events[0]["labels"], {"run": "live"})

    def test_restart_after_kill9_keeps_every_acknowledged_line(self):
        for batch in range(20):
            self.push({"project": "p", "run": "crash"},
                      [{"time": T0 + batch * 100 + i, "message": "b%d l%d" % (batch, i)} for i in range(50)])
        self.server.kill9()
        self.server.start()
        msgs = self.messages('{run="crash"}', limit=5000)
        self.assertEqual(len(msgs), 1000)
        self.assertEqual(len(set(msgs)), 1000)
        self.assertEqual(self.messages('"b19 l49"'), ["b19 l49"])

    def test_log_metrics_in_tsdb(self):
        self.push({"project": "p", "run": "m"}, [
            {"level": "error", "message": "RuntimeError: CUDA error: an illegal memory access was encountered"},
            {"level": "info", "message": "step 1"}, {"level": "info", "message": "step 2"},
            "Traceback (most recent call last):"])
        deadline = time.time() + 20
        found = {}
        while time.time() < deadline:
            status, body = self.server.request("GET", "/api/v1/query?" + q(
                {"query": 'trainwatch_log_pattern_matches_total{run="m"} or trainwatch_log_lines_total{run="m"}'}))
            self.assertEqual(status, 200, body)
            found = {(r["metric"]["__name__"], r["metric"].get("pattern", r["metric"].get("level", ""))): r["value"][1]
                     for r in json.loads(body)["data"]["result"]}
            if len(found) >= 5:
                break
            time.sleep(0.3)
        self.assertEqual(found.get(("trainwatch_log_pattern_matches_total", "cuda_error")), "1")
        self.assertEqual(found.get(("trainwatch_log_pattern_matches_total", "traceback")), "1")
        self.assertEqual(found.get(("trainwatch_log_lines_total", "INFO")), "2")
        # The plain "Traceback ..." line has no level field: the server reads ERROR from it.
        self.assertEqual(found.get(("trainwatch_log_lines_total", "ERROR")), "2")

    def test_cli(self):
        self.push_training_mix()
        out = subprocess.run([twtest.BINARY, "logs", "level=ERROR CUDA", "--since", "0", "--url",
                              "http://127.0.0.1:%d" % self.server.port], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.count("\n"), 1)
        self.assertIn("ERROR", out.stdout)
        self.assertIn("RuntimeError: CUDA error: out of memory", out.stdout)
        self.assertIn('run="r1"', out.stdout)
        out = subprocess.run([twtest.BINARY, "logs", "{run=", "--url", "http://127.0.0.1:%d" % self.server.port],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 1)
        self.assertIn("parse error", out.stderr)

    def test_file_tailing_from_config_survives_restart(self):
        self.server.stop_quietly()
        log_dir = os.path.join(self.tmp, "joblogs")
        os.makedirs(log_dir)
        cfg = os.path.join(self.tmp, "trainwatch.yml")
        with open(cfg, "w") as f:
            f.write("trainwatch:\n  logs:\n    files:\n      - paths: ['%s/*.log']\n"
                    "        labels: {project: tail, source: file}\n        json: true\n" % log_dir)
        self.server = Server(self.data, ["--config.file", cfg, "--scrape.self=false"]).start()
        path = os.path.join(log_dir, "rank0.log")
        with open(path, "w") as f:
            f.write("step 1\nTraceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"
                    "RuntimeError: CUDA error\n{\"level\":\"warning\",\"message\":\"json\",\"step\":2}\n")
        want = ["step 1", "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"
                "RuntimeError: CUDA error", "json"]

        def wait_for(n):
            deadline = time.time() + 20
            got = []
            while time.time() < deadline:
                got = list(reversed(self.messages('{project="tail"}', limit=1000)))
                if len(got) >= n:
                    break
                time.sleep(0.2)
            return got
        self.assertEqual(wait_for(3), want)
        self.assertEqual(self.messages('{source="file"} level=ERROR CUDA'), [want[1]])
        self.server.terminate()
        with open(path, "a") as f:
            f.write("written while down\n")
        os.rename(path, path + ".1")  # rotated while down: the rest is read from rank0.log.1 (same inode)
        with open(path, "w") as f:
            f.write("after rotation\n")
        self.server.start()
        got = wait_for(5)
        time.sleep(2.5)  # a repeat would show up by now
        got = list(reversed(self.messages('{project="tail"}', limit=1000)))
        self.assertEqual(sorted(got), sorted(want + ["written while down", "after rotation"]))
        status, body = self.server.request("GET", "/-/ready")
        self.assertEqual(status, 200)

    def test_reload_applies_the_logs_section(self):
        self.server.stop_quietly()
        dir_a, dir_b = os.path.join(self.tmp, "a"), os.path.join(self.tmp, "b")
        os.makedirs(dir_a)
        os.makedirs(dir_b)
        cfg = os.path.join(self.tmp, "trainwatch.yml")

        def write_cfg(log_dir, patterns):
            with open(cfg, "w") as f:
                f.write("trainwatch:\n  logs:\n    patterns: {%s}\n    files:\n      - paths: ['%s/*.log']\n"
                        "        labels: {project: reload}\n" % (patterns, log_dir))
        write_cfg(dir_a, "")
        self.server = Server(self.data, ["--config.file", cfg, "--scrape.self=false",
                                         "--logs.metrics-interval", "1s"]).start()
        with open(os.path.join(dir_a, "x.log"), "w") as f:
            f.write("from a\n")

        def wait_for(want):
            deadline = time.time() + 20
            got = []
            while time.time() < deadline:
                got = sorted(self.messages('{project="reload"}', limit=1000))
                if got == want:
                    break
                time.sleep(0.2)
            return got
        self.assertEqual(wait_for(["from a"]), ["from a"])
        write_cfg(dir_b, "disk_full: 'No space left'")
        self.server.proc.send_signal(signal.SIGHUP)
        time.sleep(1.5)
        with open(os.path.join(dir_a, "x.log"), "a") as f:
            f.write("a after reload\n")  # no longer tailed
        with open(os.path.join(dir_b, "y.log"), "w") as f:
            f.write("No space left on device\n")
        self.assertEqual(wait_for(["No space left on device", "from a"]), ["No space left on device", "from a"])
        deadline, series = time.time() + 20, []
        while time.time() < deadline and not series:
            status, body = self.server.request("GET", "/api/v1/query?" + q(
                {"query": 'trainwatch_log_pattern_matches_total{pattern="disk_full"}'}))
            series = json.loads(body)["data"]["result"]
            time.sleep(0.3)
        self.assertEqual([r["value"][1] for r in series], ["1"])
        # A bad section changes nothing and says why.
        with open(cfg, "w") as f:
            f.write("trainwatch:\n  logs:\n    patterns: {bad: '('}\n")
        status, body = self.server.request("POST", "/-/reload")
        self.assertNotEqual(status, 200)
        self.assertIn(b"bad", body)
        with open(os.path.join(dir_b, "y.log"), "a") as f:
            f.write("still tailed\n")
        self.assertEqual(wait_for(["No space left on device", "from a", "still tailed"]),
                         ["No space left on device", "from a", "still tailed"])

    def test_forwarding_to_elasticsearch_and_loki_queues_while_target_is_down(self):
        self.server.stop_quietly()
        target_port = twtest.free_port()
        cfg = os.path.join(self.tmp, "forward.yml")
        with open(cfg, "w") as f:
            f.write("trainwatch:\n  logs:\n    forward:\n"
                    "      - {type: elasticsearch, url: 'http://127.0.0.1:%d', index: fwd}\n"
                    "      - {type: loki, url: 'http://127.0.0.1:%d'}\n" % (target_port, target_port))
        self.server = Server(self.data, ["--config.file", cfg, "--scrape.self=false"]).start()
        lines = [{"time": T0 + i, "level": "error" if i % 5 == 0 else "info", "message": "fwd %d" % i, "step": i}
                 for i in range(30)]
        self.push({"project": "f", "run": "r"}, lines)  # the target is down: queued in the store
        time.sleep(1.5)
        target = Server(os.path.join(self.tmp, "target"), ["--scrape.self=false"], port=target_port).start()
        try:
            def on_target(query):
                status, body = target.request("GET", "/api/v1/logs/query?" + q({"query": query, "limit": 1000}))
                self.assertEqual(status, 200, body)
                return json.loads(body)["data"]["lines"]
            deadline = time.time() + 40
            es = loki = []
            while time.time() < deadline:
                es = on_target('{index="fwd"}')
                loki = on_target('{run="r"}')  # Loki keeps the original stream labels (no index label)
                loki = [l for l in loki if "index" not in l["labels"]]
                if len(es) >= 30 and len(loki) >= 30:
                    break
                time.sleep(0.3)
            self.assertEqual(sorted(l["message"] for l in es), sorted("fwd %d" % i for i in range(30)))
            self.assertEqual(sorted(l["message"] for l in loki), sorted("fwd %d" % i for i in range(30)))
            one = [l for l in es if l["message"] == "fwd 5"][0]
            self.assertEqual(one["level"], "ERROR")
            self.assertEqual(one["fields"], {"step": 5})
            self.assertEqual(one["labels"], {"index": "fwd", "project": "f", "run": "r"})
            self.assertEqual(one["time"], rfc3339(T0 + 5))
            lk = [l for l in loki if l["message"] == "fwd 5"][0]
            self.assertEqual((lk["labels"], lk["level"], lk["fields"]), ({"project": "f", "run": "r"}, "ERROR", {"step": 5}))
            # A restart of the sender sends nothing twice.
            self.server.terminate()
            self.server.start()
            time.sleep(2.5)
            self.assertEqual(len(on_target('{index="fwd"}')), 30)
        finally:
            target.stop_quietly()

    @unittest.skipUnless(os.path.exists("/usr/sbin/rsyslogd") and
                         os.path.exists("/usr/lib/x86_64-linux-gnu/rsyslog/omelasticsearch.so"),
                         "rsyslog and rsyslog-elasticsearch are not installed")
    def test_rsyslog_ships_a_log_file_through_bulk(self):
        work = os.path.join(self.tmp, "rsyslog")
        os.makedirs(work)
        log_file = os.path.join(self.tmp, "train.log")
        sent = ["step %d loss %.4f" % (i, 1.0 / (i + 1)) for i in range(300)]
        sent[150] = "RuntimeError: CUDA error: device-side assert triggered \"quoted\" \\ back"
        with open(log_file, "w") as f:
            f.write("\n".join(sent) + "\n")
        conf = os.path.join(work, "rsyslog.conf")
        with open(conf, "w") as f:
            f.write('''
global(workDirectory="%(work)s")
module(load="imfile" mode="polling" PollingInterval="1")
module(load="omelasticsearch")
template(name="tw" type="list" option.jsonf="on") {
  property(outname="message" name="msg" format="jsonf")
  property(outname="host" name="hostname" format="jsonf")
  property(outname="program" name="programname" format="jsonf")
  property(outname="@timestamp" name="timereported" dateFormat="rfc3339" format="jsonf")
}
ruleset(name="ship") {
  action(type="omelasticsearch" server="127.0.0.1" serverport="%(port)d" template="tw"
         searchIndex="rsyslog" bulkmode="on" errorFile="%(work)s/es-errors.json"
         action.resumeRetryCount="-1" action.resumeInterval="1")
}
input(type="imfile" File="%(file)s" Tag="train:" ruleset="ship")
''' % {"work": work, "port": self.server.port, "file": log_file})
        pidfile = os.path.join(work, "rsyslogd.pid")
        rsyslog = twtest.Process(["/usr/sbin/rsyslogd", "-n", "-f", conf, "-i", pidfile],
                                 os.path.join(work, "rsyslogd.log"))
        try:
            deadline = time.time() + 60
            got = []
            while time.time() < deadline:
                got = self.messages('{index="rsyslog"}', limit=1000)
                if len(got) >= len(sent):
                    break
                time.sleep(0.5)
        finally:
            rsyslog.stop()
        self.assertEqual(sorted(got), sorted(sent), rsyslog.logs())
        self.assertEqual(self.messages('{index="rsyslog", program="train"} CUDA device'), [sent[150]])


if __name__ == "__main__":
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
