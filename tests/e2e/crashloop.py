"""Crash loop (issue 17): `trainwatch serve` is killed with SIGKILL at random
moments while every write path is being written, restarted on the same data
dir and port, and checked: every acknowledged write is found exactly once and
the server becomes ready again without manual repair.

Shared by tests/e2e/crash_loop_test.py (ctest, ~20 kills) and
bench/crashloop/run.py (--kills 1000). Python 3 standard library only; the
remote_write body uses the hand encoder of remote_write_e2e_test.py (protobuf
by hand, snappy literal-only blocks, which are valid snappy).

One cycle (kill number k):
  1. (k > 1) start the server again; with probability startup_kill_fraction it
     is first killed once during its start-up (replay) and started again;
     /-/ready must answer 200 within ready_timeout, else the cycle fails with
     the server's log.
  2. Retry what the clients retry: a run batch, a run creation and a native log
     push that got no answer are resent unchanged (same batch_id / run id)
     until answered 200/204, as clients/python does.
  3. Verify the previous cycle's writes (and everything every
     full_check_every kills): acknowledged ones exactly once with their value,
     unanswered ones at most once, nothing that was never sent.
  4. Writers (one thread per path) and a flusher write with series, streams
     and comments labelled c=<k>; SIGKILL after uniform(min_delay, max_delay)
     seconds; writers are stopped and joined.
After the last kill: restart, retry, full check; SIGTERM must exit 0; a clean
restart must still hold everything (full check again).

Write paths (each records only what was answered 2xx as acknowledged):
  import   POST /api/v1/import/prometheus: 8 series x 3 timestamps per request,
           timestamps random in the last 6 h (out-of-order into fresh series, so
           flushes write overlapping blocks that compaction then merges)
  rw       POST /api/v1/write (snappy protobuf): 8 series x 3 samples, in order, near now
  runs     POST /api/v1/runs (a new run every 40 batches), then batches of 20 steps
           x 2 keys with batch ids; unanswered ones retried, every step exactly once
           in /api/v1/runs/{id}/history
  logs     Loki JSON push, Elasticsearch _bulk and native /api/v1/logs (with a
           batch_id, retried), 5 lines each with a unique id in the message
  silences POST /api/v2/silences (embedded notifier), acknowledged ids listed by
           GET /api/v2/silences after the restart
  flush    POST /api/v1/admin/tsdb/flush at random moments (persist + compact)
"""
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twtest  # noqa: E402
from remote_write_e2e_test import ld, snappy_literal, uvarint  # noqa: E402

AM_CONFIG = "route:\n  receiver: 'null'\nreceivers:\n  - name: 'null'\n"
SERIES = 8            # series per request (import, rw)
TS_PER_REQUEST = 3    # samples per series per request
OLD_SPAN_MS = 6 * 3600 * 1000
RUN_POINTS = 20       # steps per batch
RUN_BATCHES = 40      # batches per run before the next run
LOG_LINES = 5
NET_ERRORS = (OSError, http.client.HTTPException)


class Options:
    def __init__(self, kills=20, seed=None, min_delay=0.2, max_delay=2.0, startup_kill_fraction=0.1,
                 full_check_every=10, ready_timeout=60.0, pace=0.02, silence_pace=0.25, writers=2, workdir=None,
                 keep=False, progress_every=0, extra_args=(), out=None, max_minutes=0, allow_startup_errors=False):
        self.kills = kills
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1, 2 ** 31)
        self.min_delay = min_delay
        self.max_delay = max_delay
        self.startup_kill_fraction = startup_kill_fraction
        self.full_check_every = full_check_every
        self.ready_timeout = ready_timeout
        self.pace = pace
        self.silence_pace = silence_pace
        self.writers = writers
        self.max_minutes = max_minutes  # > 0: no new kill after this long; the end checks still run
        # A start that logs level=error (e.g. a block dir it cannot read and skips) left something
        # on disk that a person has to clean up: a failure unless this is set (then only reported).
        self.allow_startup_errors = allow_startup_errors
        self.workdir = workdir
        self.keep = keep
        self.progress_every = progress_every
        self.extra_args = list(extra_args)
        self.out = out or sys.stderr


def call(port, method, path, body=None, headers=None, timeout=30):
    return twtest.request(port, method, path, body, headers, timeout)


def now_ms():
    return int(time.time() * 1000)


def rfc3339(dt):
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Problems:
    """What verification found wrong, by kind; the first lines kept verbatim."""

    KINDS = ("lost", "duplicated", "wrong value", "never sent", "start-up error", "error")

    def __init__(self):
        self.counts = {}
        self.lines = []
        self.lock = threading.Lock()  # writers report from their threads

    def add(self, kind, text):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if len(self.lines) < 60:
                self.lines.append("%s: %s" % (kind, text))

    def __bool__(self):
        return bool(self.counts)


class Stats:
    def __init__(self):
        self.req_acked = 0
        self.req_unanswered = 0
        self.items_acked = 0
        self.items_unanswered = 0
        self.retried = 0           # requests resent after getting no answer (runs, native logs)
        self.retry_duplicate = 0   # ... whose retry answered "already stored"
        self.found_acked = 0       # at the last full check
        self.found_unanswered = 0
        self.partial_unanswered = 0

    def as_dict(self):
        return dict(self.__dict__)


# --------------------------------------------------------------------------- the server

class ServerProcess:
    """`trainwatch serve` on a fixed loopback port and data dir, one log file
    for every start (the offset of each start is kept to show its part)."""

    def __init__(self, binary, data_dir, port, log_path, extra_args):
        self.binary = binary
        self.data_dir = data_dir
        self.port = port
        self.log_path = log_path
        self.extra_args = extra_args
        self.proc = None
        self.log = None
        self.offset = 0

    def spawn(self):
        if self.log is None:
            self.log = open(self.log_path, "ab")
        self.log.flush()
        self.offset = os.path.getsize(self.log_path)
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--data-dir", self.data_dir, "--listen", "127.0.0.1:%d" % self.port,
             "--log.level", "info", "--web.enable-admin-api"] + self.extra_args,
            stdout=self.log, stderr=subprocess.STDOUT)
        return time.monotonic()

    def wait_ready(self, t0, timeout):
        """Seconds from t0 to the first 200 on /-/ready; None if it exited or timed out."""
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return None
            try:
                if call(self.port, "GET", "/-/ready", timeout=2)[0] == 200:
                    return time.monotonic() - t0
            except NET_ERRORS:
                pass
            time.sleep(0.02)
        return None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def terminate(self, timeout=60):
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            return None

    def close(self):
        if self.alive():
            self.kill9()
        if self.log is not None:
            self.log.close()
            self.log = None

    def log_since_start(self, limit=6000):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return text[-limit:]


# --------------------------------------------------------------------------- writers

class SampleWriter:
    """import (text exposition, old random timestamps) or rw (remote_write, in order)."""

    def __init__(self, kind, w=0):
        self.kind = kind
        self.w = str(w)
        self.metric = "cl_import" if kind == "import" else "cl_rw"
        self.stats = Stats()
        self.acked = {}      # (c, s) -> {ts: value}
        self.unanswered = {}  # (c, s) -> {ts: value}
        self.unanswered_reqs = []  # [(c, [(s, ts, v)])]
        self.counter = 0
        self.used_ts = {}    # c -> set of ts (import)
        self.last_ts = 0     # rw
        self.problems = None  # set by the harness

    def _samples(self, cycle, rng):
        c = str(cycle)
        if self.kind == "import":
            used = self.used_ts.setdefault(c, set())
            tss = []
            now = now_ms()
            while len(tss) < TS_PER_REQUEST:
                ts = now - 1000 - rng.randrange(OLD_SPAN_MS)
                if ts not in used:
                    used.add(ts)
                    tss.append(ts)
        else:
            tss = []
            for _ in range(TS_PER_REQUEST):
                self.last_ts = max(now_ms(), self.last_ts + 1)
                tss.append(self.last_ts)
        out = []
        for s in range(SERIES):
            for ts in tss:
                self.counter += 1
                v = self.counter + (0.5 if self.kind == "import" else 0.75)
                out.append((str(s), ts, v))
        return c, out

    def _request(self, c, samples):
        if self.kind == "import":
            body = "".join('%s{c="%s",w="%s",s="%s"} %r %d\n' % (self.metric, c, self.w, s, v, ts)
                           for s, ts, v in samples)
            return "/api/v1/import/prometheus", body.encode(), {"Content-Type": "text/plain"}
        by_series = {}
        for s, ts, v in samples:
            by_series.setdefault(s, []).append((ts, v))
        req = b""
        for s, pts in sorted(by_series.items()):
            lbl = b"".join(ld(1, ld(1, k.encode()) + ld(2, val.encode()))
                           for k, val in (("__name__", self.metric), ("c", c), ("s", s), ("w", self.w)))
            body = b"".join(ld(2, b"\x09" + _f64(v) + b"\x10" + uvarint(ts)) for ts, v in pts)
            req += ld(1, lbl + body)
        return "/api/v1/write", snappy_literal(req), {
            "Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
            "X-Prometheus-Remote-Write-Version": "0.1.0"}

    def run_cycle(self, port, cycle, rng, stop, pace):
        while not stop.is_set():
            c, samples = self._samples(cycle, rng)
            path, body, headers = self._request(c, samples)
            try:
                status, resp = call(port, "POST", path, body, headers, timeout=15)
            except NET_ERRORS:
                status, resp = None, b""
            if status is not None and 200 <= status < 300:
                self.stats.req_acked += 1
                self.stats.items_acked += len(samples)
                for s, ts, v in samples:
                    self.acked.setdefault((c, s), {})[ts] = v
            else:
                if status is not None and 400 <= status < 500:
                    self.problems.add("error", "%s: kill #%d: answered %d: %r" % (self.kind, cycle, status, resp[:300]))
                self.stats.req_unanswered += 1
                self.stats.items_unanswered += len(samples)
                for s, ts, v in samples:
                    self.unanswered.setdefault((c, s), {})[ts] = v
                self.unanswered_reqs.append((c, samples))
                time.sleep(0.05)
            stop.wait(pace)

    def verify(self, port, cycles, problems, count=False):
        """cycles: list of cycle labels, or None for everything."""
        if cycles is None:
            sel = '{__name__="%s",w="%s"}' % (self.metric, self.w)
        else:
            if not cycles:
                return
            sel = '{__name__="%s",w="%s",c=~"%s"}' % (self.metric, self.w, "|".join(cycles))
        try:
            status, body = call(port, "GET", "/api/v1/export?match[]=" + urllib.parse.quote(sel), timeout=600)
        except NET_ERRORS as e:
            problems.add("error", "%s: export failed: %r" % (self.kind, e))
            return
        if status != 200:
            problems.add("error", "%s: export answered %d: %r" % (self.kind, status, body[:300]))
            return
        seen_series = set()
        got = {}
        for line in body.decode().splitlines():
            if not line:
                continue
            obj = json.loads(line)
            m = obj["metric"]
            key = (m.get("c"), m.get("s"))
            if key in seen_series:
                problems.add("duplicated", "%s: series %r exported twice" % (self.kind, m))
            seen_series.add(key)
            pts = got.setdefault(key, {})
            for ts, v in zip(obj["timestamps"], obj["values"]):
                if ts in pts:
                    problems.add("duplicated", "%s: %s{c=%s,w=%s,s=%s} ts=%d exported twice (%r, %r)" % (
                        self.kind, self.metric, key[0], self.w, key[1], ts, pts[ts], v))
                pts[ts] = v
        wanted = set(cycles) if cycles is not None else None
        keys = [k for k in set(self.acked) | set(self.unanswered) if wanted is None or k[0] in wanted]
        for key in got:
            if key not in self.acked and key not in self.unanswered:
                problems.add("never sent", "%s: series c=%s w=%s s=%s" % (self.kind, key[0], self.w, key[1]))
        for key in keys:
            pts = got.get(key, {})
            acked = self.acked.get(key, {})
            maybe = self.unanswered.get(key, {})
            for ts, v in acked.items():
                if ts not in pts:
                    problems.add("lost", "%s: %s{c=%s,w=%s,s=%s} ts=%d value=%r acknowledged in kill #%s's cycle" % (
                        self.kind, self.metric, key[0], self.w, key[1], ts, v, key[0]))
                elif pts[ts] != v:
                    problems.add("wrong value", "%s: %s{c=%s,w=%s,s=%s} ts=%d: %r, sent %r" % (
                        self.kind, self.metric, key[0], self.w, key[1], ts, pts[ts], v))
                elif count:
                    self.stats.found_acked += 1
            for ts, v in pts.items():
                if ts in acked:
                    continue
                if ts not in maybe:
                    problems.add("never sent", "%s: %s{c=%s,w=%s,s=%s} ts=%d value=%r" % (
                        self.kind, self.metric, key[0], self.w, key[1], ts, v))
                elif maybe[ts] != v:
                    problems.add("wrong value", "%s: unanswered %s{c=%s,w=%s,s=%s} ts=%d: %r, sent %r" % (
                        self.kind, self.metric, key[0], self.w, key[1], ts, v, maybe[ts]))
                elif count:
                    self.stats.found_unanswered += 1
        if count:
            partial = 0
            for c, samples in self.unanswered_reqs:
                present = sum(ts in got.get((c, s), {}) for s, ts, _ in samples)
                if 0 < present < len(samples):
                    partial += 1
            self.stats.partial_unanswered = partial


def _f64(v):
    return struct.pack("<d", v)


class RunsWriter:
    """Runs and batches, retried like the real client until answered."""

    def __init__(self, seed, w=0):
        self.prefix = "cl%dw%d" % (seed, w)
        self.stats = Stats()
        self.run_stats = {"runs_acked": 0, "run_creates_retried": 0}
        self.runs = []            # acknowledged run ids
        self.current = None
        self.batches_in_run = 0
        self.next_step = {}       # run id -> next step
        self.steps = {}           # run id -> {step: (loss, acc)} acknowledged
        self.pending = None       # op without an answer yet
        self.touched = set()      # runs acknowledged into since the last check
        self.problems = None

    def _next_op(self, cycle):
        if self.current is None or self.batches_in_run >= RUN_BATCHES:
            rid = "%s-r%d" % (self.prefix, len(self.runs) + 1)
            return {"kind": "create", "run": rid, "tries": 0, "cycle": cycle,
                    "body": json.dumps({"id": rid, "project": "crashloop", "name": rid,
                                        "config": {"seed": self.prefix}, "total_steps": RUN_BATCHES * RUN_POINTS})}
        rid = self.current
        first = self.next_step.get(rid, 0)
        self.next_step[rid] = first + RUN_POINTS
        self.batches_in_run += 1
        ts = now_ms()
        pts = [{"step": st, "ts": ts + i, "values": {"loss": st + 0.5, "acc": st * 2 + 0.25}}
               for i, st in enumerate(range(first, first + RUN_POINTS))]
        bid = "%s.%d" % (rid, first // RUN_POINTS)
        return {"kind": "batch", "run": rid, "tries": 0, "cycle": cycle, "batch_id": bid,
                "steps": list(range(first, first + RUN_POINTS)),
                "body": json.dumps({"batch_id": bid, "points": pts})}

    def _send(self, port, op, cycle):
        """True when answered (2xx, or a 4xx reported as a problem); False: resend later."""
        path = "/api/v1/runs" if op["kind"] == "create" else "/api/v1/runs/%s/batches" % op["run"]
        op["tries"] += 1
        try:
            status, resp = call(port, "POST", path, op["body"].encode(), {"Content-Type": "application/json"},
                                timeout=15)
        except NET_ERRORS:
            return False
        if status >= 500:
            return False
        if status != 200:
            self.problems.add("error", "runs: kill #%d: %s %s answered %d: %r" % (
                cycle, op["kind"], op["run"], status, resp[:300]))
            return True
        retried = op["tries"] > 1
        if op["kind"] == "create":
            data = json.loads(resp)["data"]
            if data.get("id") != op["run"] or data.get("project") != "crashloop":
                self.problems.add("wrong value", "runs: create %s answered %r" % (op["run"], data))
            self.runs.append(op["run"])
            self.run_stats["runs_acked"] += 1
            if retried:
                self.run_stats["run_creates_retried"] += 1
            self.current = op["run"]
            self.batches_in_run = 0
            self.touched.add(op["run"])
            return True
        data = json.loads(resp)["data"]
        self.stats.req_acked += 1
        self.stats.items_acked += len(op["steps"]) * 2
        if retried:
            self.stats.retried += 1
            self.stats.req_unanswered += 1
            self.stats.items_unanswered += len(op["steps"]) * 2
        if data.get("duplicate"):
            if not retried:
                self.problems.add("duplicated", "runs: batch %s answered duplicate on its first send" % op["batch_id"])
            self.stats.retry_duplicate += 1
            if data.get("accepted") != 0:
                self.problems.add("wrong value", "runs: duplicate batch %s accepted %r" % (op["batch_id"], data))
        elif data.get("accepted") != len(op["steps"]) * 2 or data.get("rejected"):
            self.problems.add("wrong value", "runs: batch %s answered %r" % (op["batch_id"], data))
        got = self.steps.setdefault(op["run"], {})
        for st in op["steps"]:
            got[st] = (st + 0.5, st * 2 + 0.25)
        self.touched.add(op["run"])
        return True

    def run_cycle(self, port, cycle, rng, stop, pace):
        while not stop.is_set():
            op = self.pending or self._next_op(cycle)
            if self._send(port, op, cycle):
                self.pending = None
            else:
                self.pending = op
                time.sleep(0.05)
            stop.wait(pace)

    def retry_pending(self, port, cycle, timeout=30):
        deadline = time.monotonic() + timeout
        while self.pending is not None:
            if self._send(port, self.pending, cycle):
                self.pending = None
                return True
            if time.monotonic() > deadline:
                self.problems.add("error", "runs: %s %s got no answer for %ds after the restart" % (
                    self.pending["kind"], self.pending.get("batch_id", self.pending["run"]), timeout))
                return False
            time.sleep(0.2)
        return True

    def verify(self, port, run_ids, problems, count=False):
        for rid in sorted(run_ids):
            try:
                status, body = call(port, "GET", "/api/v1/runs/" + rid, timeout=60)
            except NET_ERRORS as e:
                problems.add("error", "runs: GET run %s: %r" % (rid, e))
                continue
            if status != 200:
                problems.add("lost", "runs: run %s acknowledged but GET answers %d: %r" % (rid, status, body[:200]))
                continue
            try:
                status, body = call(port, "GET", "/api/v1/runs/%s/history?keys=loss,acc" % rid, timeout=120)
            except NET_ERRORS as e:
                problems.add("error", "runs: history %s: %r" % (rid, e))
                continue
            if status != 200:
                problems.add("error", "runs: history %s answered %d: %r" % (rid, status, body[:200]))
                continue
            want = self.steps.get(rid, {})
            series = {}
            for s in json.loads(body)["data"]:
                if s["labels"]:
                    problems.add("never sent", "runs: %s has a ranked series %r" % (rid, s["labels"]))
                if s["key"] in series:
                    problems.add("duplicated", "runs: %s key %s listed twice" % (rid, s["key"]))
                series[s["key"]] = s
            for ki, key in enumerate(("loss", "acc")):
                s = series.get(key, {"steps": [], "values": []})
                seen = {}
                for st, v in zip(s["steps"], s["values"]):
                    if st in seen:
                        problems.add("duplicated", "runs: run %s key %s step %d twice" % (rid, key, st))
                    seen[st] = v
                    if st not in want:
                        problems.add("never sent", "runs: run %s key %s step %d" % (rid, key, st))
                    elif want[st][ki] != v:
                        problems.add("wrong value", "runs: run %s key %s step %d: %r, sent %r" % (
                            rid, key, st, v, want[st][ki]))
                for st, vals in want.items():
                    if st not in seen:
                        problems.add("lost", "runs: run %s key %s step %d acknowledged" % (rid, key, st))
                    elif count:
                        self.stats.found_acked += 1


class LogsWriter:
    """Loki JSON push, Elasticsearch _bulk, native push with batch_id (retried)."""

    KINDS = ("loki", "bulk", "native")

    def __init__(self, seed, w=0):
        self.seed = seed
        self.w = str(w)
        self.stats = Stats()
        self.by_kind = {k: [0, 0] for k in self.KINDS}  # acked, unanswered requests
        self.acked = {}       # line id -> cycle
        self.unanswered = {}  # line id -> cycle
        self.next_id = 0
        self.turn = 0
        self.pending = None   # native push without an answer
        self.problems = None

    def _lines(self):
        ids = list(range(self.next_id, self.next_id + LOG_LINES))
        self.next_id += LOG_LINES
        return ids

    def _build(self, cycle):
        kind = self.KINDS[self.turn % 3]
        self.turn += 1
        ids = self._lines()
        c = str(cycle)
        if kind == "loki":
            t = time.time_ns()
            body = json.dumps({"streams": [{"stream": {"job": "cl", "w": self.w, "c": c, "kind": "loki"},
                                            "values": [[str(t + i), "cl line=%d" % n] for i, n in enumerate(ids)]}]})
            return {"kind": kind, "ids": ids, "cycle": cycle, "tries": 0, "path": "/loki/api/v1/push",
                    "body": body.encode(), "ctype": "application/json"}
        if kind == "bulk":
            ts = rfc3339(datetime.now(timezone.utc))
            out = []
            for n in ids:
                out.append(json.dumps({"index": {"_index": "cl"}}))
                out.append(json.dumps({"@timestamp": ts, "message": "cl line=%d" % n, "level": "info",
                                       "labels": {"job": "cl", "w": self.w, "c": c, "kind": "bulk"}}))
            return {"kind": kind, "ids": ids, "cycle": cycle, "tries": 0, "path": "/_bulk",
                    "body": ("\n".join(out) + "\n").encode(), "ctype": "application/x-ndjson"}
        t = time.time()
        body = "".join(json.dumps({"time": t, "level": "info", "message": "cl line=%d" % n}) + "\n" for n in ids)
        bid = "cl%d.w%s.L%d" % (self.seed, self.w, ids[0])
        path = "/api/v1/logs?" + urllib.parse.urlencode({"job": "cl", "w": self.w, "c": c, "kind": "native",
                                                         "batch_id": bid})
        return {"kind": kind, "ids": ids, "cycle": cycle, "tries": 0, "path": path, "body": body.encode(),
                "ctype": "application/x-ndjson"}

    def _send(self, port, op):
        """True: answered (recorded); False: no answer (recorded as unanswered unless it is resent)."""
        op["tries"] += 1
        try:
            status, resp = call(port, "POST", op["path"], op["body"], {"Content-Type": op["ctype"]}, timeout=15)
        except NET_ERRORS:
            status, resp = None, b""
        ok = status is not None and 200 <= status < 300
        if ok and op["kind"] == "bulk":
            doc = json.loads(resp)
            items = doc.get("items", [])
            if doc.get("errors") or len(items) != len(op["ids"]) or any(
                    it.get("index", {}).get("status") not in (200, 201) for it in items):
                self.problems.add("error", "logs: _bulk item failed: %r" % resp[:300])
                ok = False
        if status is not None and 400 <= status < 500:
            self.problems.add("error", "logs: %s answered %d: %r" % (op["kind"], status, resp[:300]))
        if ok:
            self.stats.req_acked += 1
            self.stats.items_acked += len(op["ids"])
            self.by_kind[op["kind"]][0] += 1
            if op["tries"] > 1:
                self.stats.retried += 1
            for n in op["ids"]:
                self.acked[n] = op["cycle"]
                self.unanswered.pop(n, None)
            return True
        if op["kind"] == "native" and (status is None or status >= 500):
            if op["tries"] == 1:
                self.stats.req_unanswered += 1
                self.stats.items_unanswered += len(op["ids"])
                self.by_kind[op["kind"]][1] += 1
                for n in op["ids"]:
                    self.unanswered[n] = op["cycle"]
            return False
        self.stats.req_unanswered += 1
        self.stats.items_unanswered += len(op["ids"])
        self.by_kind[op["kind"]][1] += 1
        for n in op["ids"]:
            self.unanswered[n] = op["cycle"]
        return True

    def run_cycle(self, port, cycle, rng, stop, pace):
        while not stop.is_set():
            op = self.pending or self._build(cycle)
            if self._send(port, op):
                self.pending = None
            else:
                self.pending = op
                time.sleep(0.05)
            stop.wait(pace)

    def retry_pending(self, port, timeout=30):
        deadline = time.monotonic() + timeout
        while self.pending is not None:
            if self._send(port, self.pending):
                self.pending = None
                return True
            if time.monotonic() > deadline:
                self.problems.add("error", "logs: native push %s got no answer for %ds after the restart" % (
                    self.pending["path"], timeout))
                return False
            time.sleep(0.2)
        return True

    def verify(self, port, cycles, problems, count=False):
        if cycles is None:
            q = '{job="cl",w="%s"}' % self.w
        else:
            if not cycles:
                return
            q = '{job="cl",w="%s",c=~"%s"}' % (self.w, "|".join(cycles))
        seen = {}
        cursor = ""
        pages = 0
        while True:
            path = "/api/v1/logs/query?" + urllib.parse.urlencode({"query": q, "limit": 5000, "cursor": cursor})
            try:
                status, body = call(port, "GET", path, timeout=300)
            except NET_ERRORS as e:
                problems.add("error", "logs: query failed: %r" % (e,))
                return
            if status != 200:
                problems.add("error", "logs: query answered %d: %r" % (status, body[:300]))
                return
            data = json.loads(body)["data"]
            for line in data["lines"]:
                m = re.fullmatch(r"cl line=(\d+)", line["message"])
                if not m:
                    problems.add("never sent", "logs: line %r" % line)
                    continue
                n = int(m.group(1))
                seen[n] = seen.get(n, 0) + 1
            cursor = data.get("next_cursor") or ""
            pages += 1
            if not cursor or pages > 100000:
                break
        wanted = set(int(c) for c in cycles) if cycles is not None else None
        for n, k in self.acked.items():
            if wanted is not None and k not in wanted:
                continue
            got = seen.get(n, 0)
            if got == 0:
                problems.add("lost", "logs: w=%s line id %d acknowledged in kill #%d's cycle" % (self.w, n, k))
            elif got > 1:
                problems.add("duplicated", "logs: w=%s line id %d (acknowledged, kill #%d's cycle) found %d times" % (
                    self.w, n, k, got))
            elif count:
                self.stats.found_acked += 1
        for n, got in seen.items():
            if n in self.acked:
                continue
            if n not in self.unanswered:
                problems.add("never sent", "logs: w=%s line id %d" % (self.w, n))
            elif got > 1:
                problems.add("duplicated", "logs: w=%s unanswered line id %d found %d times" % (self.w, n, got))
            elif count:
                self.stats.found_unanswered += 1


class SilenceWriter:
    def __init__(self, seed):
        self.prefix = "cl%d-" % seed
        self.stats = Stats()
        self.acked = {}       # comment -> (silence id, cycle)
        self.unanswered = {}  # comment -> cycle
        self.n = 0
        self.problems = None

    def run_cycle(self, port, cycle, rng, stop, pace):
        while not stop.is_set():
            self.n += 1
            comment = "%s%d" % (self.prefix, self.n)
            start = datetime.now(timezone.utc)
            body = json.dumps({"matchers": [{"name": "alertname", "value": "Crash%d" % self.n, "isRegex": False,
                                             "isEqual": True}],
                               "startsAt": rfc3339(start), "endsAt": rfc3339(start + timedelta(days=1)),
                               "createdBy": "crashloop", "comment": comment})
            try:
                status, resp = call(port, "POST", "/api/v2/silences", body.encode(),
                                    {"Content-Type": "application/json"}, timeout=15)
            except NET_ERRORS:
                status, resp = None, b""
            if status == 200:
                sid = json.loads(resp).get("silenceID")
                self.acked[comment] = (sid, cycle)
                self.stats.req_acked += 1
                self.stats.items_acked += 1
            else:
                if status is not None and 400 <= status < 500:
                    self.problems.add("error", "silences: answered %d: %r" % (status, resp[:300]))
                self.unanswered[comment] = cycle
                self.stats.req_unanswered += 1
                self.stats.items_unanswered += 1
                time.sleep(0.05)
            stop.wait(pace)

    def verify(self, port, problems, count=False):
        try:
            status, body = call(port, "GET", "/api/v2/silences", timeout=120)
        except NET_ERRORS as e:
            problems.add("error", "silences: list failed: %r" % (e,))
            return
        if status != 200:
            problems.add("error", "silences: list answered %d: %r" % (status, body[:300]))
            return
        by_comment = {}
        for s in json.loads(body):
            by_comment.setdefault(s.get("comment"), []).append(s)
        for comment, (sid, k) in self.acked.items():
            got = by_comment.get(comment, [])
            if not got:
                problems.add("lost", "silences: %s (id %s) acknowledged in kill #%d's cycle" % (comment, sid, k))
            elif len(got) > 1:
                problems.add("duplicated", "silences: %s listed %d times" % (comment, len(got)))
            elif got[0]["id"] != sid:
                problems.add("wrong value", "silences: %s has id %s, acknowledged as %s" % (comment, got[0]["id"], sid))
            elif count:
                self.stats.found_acked += 1
        for comment, got in by_comment.items():
            if comment in self.acked:
                continue
            if comment not in self.unanswered:
                problems.add("never sent", "silences: %r" % comment)
            elif len(got) > 1:
                problems.add("duplicated", "silences: unanswered %s listed %d times" % (comment, len(got)))
            elif count:
                self.stats.found_unanswered += 1


class Flusher:
    def __init__(self):
        self.acked = 0
        self.interrupted = 0
        self.problems = None

    def run_cycle(self, port, cycle, rng, stop, window):
        # 0, 1 or 2 flushes at random moments of the cycle.
        for _ in range(rng.choice((0, 1, 1, 2))):
            if stop.wait(rng.uniform(0, window)):
                return
            try:
                status, resp = call(port, "POST", "/api/v1/admin/tsdb/flush", timeout=300)
            except NET_ERRORS:
                status, resp = None, b""
            if status is not None and 200 <= status < 300:
                self.acked += 1
            else:
                if status is not None and status < 500:
                    self.problems.add("error", "flush answered %d: %r" % (status, resp[:300]))
                self.interrupted += 1


# --------------------------------------------------------------------------- the loop

def _pick_port():
    """A free loopback port below the ephemeral range, so that no outgoing connection
    takes it while the server is down between a kill and the restart."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    if low > 12000:
        for _ in range(100):
            port = rng.randrange(10000, low)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                    return port
                except OSError:
                    continue
    return twtest.free_port()


def _listing(path):
    out = []
    for root, dirs, files in os.walk(path):
        for name in sorted(dirs):
            out.append(os.path.relpath(os.path.join(root, name), path) + "/")
        for name in sorted(files):
            f = os.path.join(root, name)
            out.append("%s (%d B)" % (os.path.relpath(f, path), os.path.getsize(f)))
    return ", ".join(sorted(out)) or "nothing"


class Failure(Exception):
    pass


class CrashLoop:
    def __init__(self, binary, opts):
        self.binary = os.path.abspath(binary)
        self.o = opts
        self.rng = random.Random(opts.seed)
        self.problems = Problems()
        n = max(1, opts.writers)
        # Writer instances per path, each with its own ledger and label w=<i>.
        self.paths = {"import": [SampleWriter("import", i) for i in range(n)],
                      "remote_write": [SampleWriter("rw", i) for i in range(n)],
                      "runs": [RunsWriter(opts.seed, i) for i in range(n)],
                      "logs": [LogsWriter(opts.seed, i) for i in range(n)],
                      "silences": [SilenceWriter(opts.seed)]}
        self.flusher = Flusher()
        for w in self.writers() + [self.flusher]:
            w.problems = self.problems
        self.kills = 0
        self.startup_kills = 0
        self.ready_s = []
        self.log_notes = {}
        self.failed_at = None
        self.stopped_reason = None
        self.wall_s = 0.0
        self.clean_exit = None
        self.interrupted = False
        self.stop_requested = False   # set from a signal handler: finish with the end checks
        self.stopped_early = None
        self.startup_errors = []      # [(kill number, [log lines])] of starts that logged level=error
        self.bind_retries = 0
        self.incomplete_seen = {}     # incomplete block dir -> kill number after which it was first seen

    def writers(self):
        return [w for ws in self.paths.values() for w in ws]

    def say(self, msg):
        self.o.out.write(msg + "\n")
        self.o.out.flush()

    # --- server start/stop
    def _start(self, k, allow_startup_kill):
        srv = self.server
        if allow_startup_kill and self.rng.random() < self.o.startup_kill_fraction:
            t0 = srv.spawn()
            typical = sorted(self.ready_s)[len(self.ready_s) // 2] if self.ready_s else 0.2
            time.sleep(self.rng.uniform(0, max(0.05, typical)))
            srv.kill9()
            self.startup_kills += 1
        for _ in range(20):
            t0 = srv.spawn()
            took = srv.wait_ready(t0, self.o.ready_timeout)
            # The port is fixed across restarts: another program may hold it for a moment
            # while the server is down (then the start fails with "cannot bind"; try again).
            if took is not None or srv.proc.poll() is None or "cannot bind" not in srv.log_since_start():
                break
            self.bind_retries += 1
            time.sleep(0.5)
        if took is None:
            exited = srv.proc.poll()
            srv.kill9()
            raise Failure("after kill #%d: the server %s; its log since this start:\n%s" % (
                k, "exited with %s" % exited if exited is not None else
                "was not ready within %.0f s" % self.o.ready_timeout, srv.log_since_start()))
        self.ready_s.append(took)
        errors = [line for line in srv.log_since_start(limit=1 << 22).splitlines() if "level=error" in line]
        # A block-named directory without meta.json or chunks/ that is still there after a
        # whole start (seen after the previous one too) is left for a person to delete.
        incomplete = self._incomplete_block_dirs()
        for d in sorted(incomplete & set(self.incomplete_seen)):
            errors.append("left on disk across a restart, not a readable block and not removed: %s (holds %s; "
                          "first seen after the start that followed kill #%d)" % (
                              d, _listing(d), self.incomplete_seen[d]))
        self.incomplete_seen = {d: self.incomplete_seen.get(d, k) for d in incomplete}
        if errors:
            self.startup_errors.append((k, errors))
        if errors and not self.o.allow_startup_errors:
            detail = []
            for line in errors[:10]:
                self.problems.add("start-up error", "after kill #%d: %s" % (k, line))
                detail.append(line)
                m = re.search(r"skip unreadable block (\S+?): ", line)
                if m and os.path.isdir(m.group(1)):
                    detail.append("  that directory holds: %s" % _listing(m.group(1)))
            raise Failure("after kill #%d (seed %d): the server became ready, but %d error(s) at this start "
                          "leave the data dir needing manual repair:\n%s" % (k, self.o.seed, len(errors),
                                                                             "\n".join(detail)))

    def _incomplete_block_dirs(self):
        out = set()
        data = self.server.data_dir
        for name in os.listdir(data):
            path = os.path.join(data, name)
            if len(name) == 26 and name.isalnum() and name.isupper() and os.path.isdir(path):
                if not os.path.isfile(os.path.join(path, "meta.json")) or not os.path.isdir(
                        os.path.join(path, "chunks")):
                    out.add(path)
        return out

    def _scan_log(self):
        """Warnings and errors the server logged over the whole loop, digits folded."""
        try:
            with open(self.server.log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return
        for line in text.splitlines():
            if "level=warn" in line or "level=error" in line:
                msg = re.sub(r"^ts=\S+ ", "", line)
                msg = re.sub(r"\d+", "N", msg)[:200]
                self.log_notes[msg] = self.log_notes.get(msg, 0) + 1

    def _check(self, k, cycles, full):
        """Retry what clients retry, then verify; raises Failure on any problem."""
        port = self.server.port
        for w in self.paths["runs"]:
            w.retry_pending(port, k)
        for w in self.paths["logs"]:
            w.retry_pending(port)
        if full:
            for w in self.writers():
                w.stats.found_acked = w.stats.found_unanswered = 0
        for w in self.paths["import"] + self.paths["remote_write"] + self.paths["logs"]:
            w.verify(port, None if full else cycles, self.problems, count=full)
        for w in self.paths["runs"]:
            w.verify(port, w.runs if full else w.touched, self.problems, count=full)
            w.touched = set()
        for w in self.paths["silences"]:
            w.verify(port, self.problems, count=full)
        if self.problems:
            raise Failure("after kill #%d (seed %d): %s" % (k, self.o.seed, "; ".join(
                "%d %s" % (n, kind) for kind, n in self.problems.counts.items())))
        if not self.server.alive():
            raise Failure("after kill #%d: the server exited during the checks:\n%s" % (
                k, self.server.log_since_start()))

    def _write_and_kill(self, k):
        port = self.server.port
        stop = threading.Event()
        delay = self.rng.uniform(self.o.min_delay, self.o.max_delay)
        threads = []
        jobs = [(w, self.o.silence_pace if isinstance(w, SilenceWriter) else self.o.pace) for w in self.writers()]
        jobs.append((self.flusher, delay))
        for w, pace in jobs:
            rng = random.Random(self.rng.randrange(1 << 30))
            t = threading.Thread(target=w.run_cycle, args=(port, k, rng, stop, pace), daemon=True)
            t.start()
            threads.append(t)
        time.sleep(delay)
        alive = self.server.alive()
        self.server.kill9()
        self.kills += 1
        stop.set()
        for t in threads:
            t.join(timeout=60)
            if t.is_alive():
                raise Failure("kill #%d: a writer did not stop within 60 s" % k)
        if not alive:
            raise Failure("kill #%d: the server had exited by itself before the kill:\n%s" % (
                k, self.server.log_since_start()))

    def run(self):
        self.t_start = t_start = time.monotonic()
        own_tmp = self.o.workdir is None
        tmp = tempfile.mkdtemp(prefix="tw-crashloop-") if own_tmp else self.o.workdir
        os.makedirs(tmp, exist_ok=True)
        am = os.path.join(tmp, "alertmanager.yml")
        with open(am, "w") as f:
            f.write(AM_CONFIG)
        args = ["--collect.host=false", "--collect.gpu=false", "--alertmanager.config.file", am] + self.o.extra_args
        self.server = ServerProcess(self.binary, os.path.join(tmp, "data"), _pick_port(),
                                    os.path.join(tmp, "server.log"), args)
        self.say("crash loop: seed %d, %d kills, %d writers per path, data %s, port %d" % (
            self.o.seed, self.o.kills, max(1, self.o.writers), self.server.data_dir, self.server.port))
        ok = False
        try:
            self._start(0, False)
            prev = None
            for k in range(1, self.o.kills + 1):
                elapsed = time.monotonic() - t_start
                if k > 1 and (self.stop_requested or (self.o.max_minutes and elapsed > self.o.max_minutes * 60)):
                    self.stopped_early = "stop requested" if self.stop_requested else \
                        "time limit of %g min reached" % self.o.max_minutes
                    break
                if k > 1:
                    self._start(k - 1, True)
                    full = self.o.full_check_every > 0 and (k - 1) % self.o.full_check_every == 0
                    self._check(k - 1, [str(prev)], full)
                self._write_and_kill(k)
                prev = k
                if self.o.progress_every and k % self.o.progress_every == 0:
                    self.say(self.progress_line())
            # After the last kill: restart, retry, full check; then a clean stop and restart.
            self._start(self.kills, True)
            self._check(self.kills, [str(prev)] if prev else [], False)
            self._check(self.kills, None, True)
            rc = self.server.terminate()
            self.clean_exit = rc
            if rc != 0:
                raise Failure("SIGTERM after the loop: exit status %r:\n%s" % (rc, self.server.log_since_start()))
            self._start(self.kills, False)
            self._check(self.kills, None, True)
            rc = self.server.terminate()
            if rc != 0:
                raise Failure("SIGTERM after the clean restart: exit status %r:\n%s" % (
                    rc, self.server.log_since_start()))
            ok = True
        except Failure as e:
            self.failed_at = self.kills
            self.stopped_reason = str(e)
        finally:
            self.server.close()
            self._scan_log()
            self.wall_s = time.monotonic() - t_start
            if own_tmp and (not self.o.keep):
                shutil.rmtree(tmp, ignore_errors=True)
            elif not ok or self.o.keep:
                self.say("data dir kept: %s" % tmp)
        return ok

    # --- reporting
    def progress_line(self):
        acked = {name: sum(w.stats.items_acked for w in ws) for name, ws in self.paths.items()}
        return "kill %d/%d (+%d at start-up), %.0f s: acked items %s; flushes %d" % (
            self.kills, self.o.kills, self.startup_kills, time.monotonic() - self.t_start,
            " ".join("%s %d" % kv for kv in acked.items()), self.flusher.acked)

    def summary(self):
        paths = {}
        for name, ws in self.paths.items():
            d = {}
            for w in ws:
                for key, v in w.stats.as_dict().items():
                    d[key] = d.get(key, 0) + v
            paths[name] = d
        paths["runs"]["runs_acked"] = sum(w.run_stats["runs_acked"] for w in self.paths["runs"])
        paths["runs"]["run_creates_retried"] = sum(w.run_stats["run_creates_retried"] for w in self.paths["runs"])
        paths["logs"]["by_kind_acked_unanswered"] = {
            k: [sum(w.by_kind[k][i] for w in self.paths["logs"]) for i in (0, 1)] for k in LogsWriter.KINDS}
        r = sorted(self.ready_s)
        return {
            "seed": self.o.seed, "kills": self.kills, "kills_asked": self.o.kills,
            "startup_kills": self.startup_kills, "starts": len(self.ready_s), "bind_retries": self.bind_retries,
            "ready_s": {"median": r[len(r) // 2] if r else None, "max": r[-1] if r else None},
            "flushes": {"acked": self.flusher.acked, "interrupted": self.flusher.interrupted},
            "paths": paths, "problems": dict(self.problems.counts), "problem_lines": self.problems.lines,
            "server_log_warnings": self.log_notes,
            "startup_errors": [{"after_kill": k, "lines": lines[:10]} for k, lines in self.startup_errors[:50]],
            "failed_at_kill": self.failed_at, "stopped": self.stopped_reason, "interrupted": self.interrupted,
            "stopped_early": self.stopped_early, "wall_s": round(self.wall_s, 1),
        }

    def report(self):
        s = self.summary()
        lines = ["crash loop: seed %d, %d kills while writing + %d during start-up, %d starts, %.0f s" % (
            s["seed"], s["kills"], s["startup_kills"], s["starts"], s["wall_s"])]
        if s["stopped_early"]:
            lines.append("stopped before --kills %d: %s (the end checks ran)" % (s["kills_asked"], s["stopped_early"]))
        if s["ready_s"]["median"] is not None:
            lines.append("ready after a start: median %.2f s, max %.2f s; flushes: %d done, %d cut by a kill%s" % (
                s["ready_s"]["median"], s["ready_s"]["max"], s["flushes"]["acked"], s["flushes"]["interrupted"],
                "; %d starts retried: port briefly taken" % s["bind_retries"] if s["bind_retries"] else ""))
        lines.append("%-13s %9s %10s %11s %12s %13s %8s %8s" % (
            "path", "acked req", "acked item", "found acked", "unanswd item", "unanswd found", "retried", "dup-retry"))
        for name, p in s["paths"].items():
            lines.append("%-13s %9d %10d %11d %12d %13d %8d %8d" % (
                name, p["req_acked"], p["items_acked"], p["found_acked"], p["items_unanswered"],
                p["found_unanswered"], p["retried"], p["retry_duplicate"]))
        lines.append("(items: samples, run steps x keys, log lines, silences; found: at the last full check)")
        part = {k: s["paths"][k]["partial_unanswered"] for k in ("import", "remote_write")}
        lines.append("unanswered requests stored partially: %r; runs acked: %d (creates retried %d); "
                     "log requests acked/unanswered by kind: %r" % (
                         part, s["paths"]["runs"]["runs_acked"], s["paths"]["runs"]["run_creates_retried"],
                         s["paths"]["logs"]["by_kind_acked_unanswered"]))
        if s["startup_errors"]:
            lines.append("starts that logged level=error: %d, the first after kill #%d: %s" % (
                len(self.startup_errors), self.startup_errors[0][0], self.startup_errors[0][1][0][:300]))
        if s["server_log_warnings"]:
            lines.append("warnings/errors logged by the server (digits as N):")
            for msg, n in sorted(s["server_log_warnings"].items(), key=lambda x: -x[1])[:20]:
                lines.append("  %5d x %s" % (n, msg))
        if self.interrupted and not s["problems"]:
            lines.append("INTERRUPTED after kill #%d (seed %d): nothing wrong found until then" % (
                s["kills"], s["seed"]))
        elif s["problems"] or s["stopped"]:
            lines.append("FAILED at kill #%s (seed %d): %s" % (s["failed_at_kill"], s["seed"], s["stopped"]))
            lines.extend("  " + x for x in s["problem_lines"])
        else:
            lines.append("OK: every acknowledged write found exactly once; no loss, no duplicate")
        return "\n".join(lines)
