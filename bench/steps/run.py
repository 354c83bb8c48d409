#!/usr/bin/env python3
"""Run metrics by step (issue 23): fast logging loops against a real server.

Starts `trainwatch serve --listen 127.0.0.1:<free port> --data-dir <tmp>` as a
user starts it (collectors, rule pack and self-scrape on: no other flags) and
runs, with the real Python client (imported from --client in the logging
processes), one fresh server per scenario:

  A  one rank logging --rate-a steps/s (default 10,000) for --seconds (60);
  B  --ranks-b processes (RANK=0..7, WORLD_SIZE=8, one run id through
     TRAINWATCH_RUN_ID) each at --rate-b steps/s (1,000) for --seconds.

Every step logs 4 keys (loss, lr, grad_norm, acc), in bursts every
--burst-ms (10 ms) so the average rate is the one asked for. The values are a
deterministic function of (rank, step) that the harness can invert, so a TSDB
sample found later is traced back to the step (and the wall time) it came from.

Per scenario it measures:
  - steps returned: per rank and key, is every logged step returned exactly
    once by step, and with the value logged? From GET /api/v1/runs/{id}/history
    when the server has it, and from GET /api/v1/runs/metrics?x=step with
    points >= the steps in each window (one bucket per step) on every server;
  - samples ahead of the clock: every sample of the run's series from
    GET /api/v1/export?match[]={run="<name>"} (after the run), against
    (a) the wall time of the export and (b) the client-side wall time at which
    the sample's step was logged; and, polled every ~2 s during the run,
    the TSDB head's maxTime (status/tsdb) minus the wall clock;
  - log() cost: wall time inside log() calls per call, and the logging
    process's CPU (os.times: every thread, the sender's included) per logged
    value, both over the logging loop only (finish() is measured apart);
  - server CPU per logged value: utime+stime of the server from
    /proc/<pid>/stat, from the loop's start until every client has returned
    from finish(); beside it the same server's idle CPU rate, measured for
    --idle-seconds just before on the same server with the same polling, and
    the figure net of idle (idle rate x the scenario's wall time taken off);
  - bytes on disk per logged value: growth of the data dir (apparent sizes of
    all files) from before the scenario to after the clients' finish() and
    POST /api/v1/admin/tsdb/flush (both ends flushed), split runs.db(-wal,
    -shm) vs the rest; the idle window's growth is given too.

--baseline BINARY with --baseline-client DIR runs everything first against
that server and client ("today"), then against --binary/--client ("new"):
one server at a time, never two. The JSON of all figures goes to --out.

Usage:
  python3 bench/steps/run.py [--binary build/release/src/app/trainwatch]
      [--client clients/python] [--baseline /tmp/tw-baseline
      --baseline-client /tmp/tw-baseline-client/clients/python]
      [--seconds 60] [--scenarios A,B] [--out steps.json]
Python 3 standard library only.
"""
import argparse
import bisect
import collections
import json
import math
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from array import array

KEYS = ("loss", "lr", "grad_norm", "acc")
PROJECT = "bench-steps"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- the logged values: a deterministic, invertible function of (rank, step) ----
def _hash(step, rank, mult):
    # Knuth's multiplicative hash: a bijection on step mod 2^32 for a fixed rank.
    return (((step + rank * 1000003) * mult) & 0xFFFFFFFF) / 4294967296.0


def values_of(rank, total):
    """Four array('d') of length `total`: loss, lr, grad_norm, acc at each step."""
    loss, lr, gn, acc = array("d"), array("d"), array("d"), array("d")
    exp, cos, pi = math.exp, math.cos, math.pi
    for s in range(total):
        loss.append(2.5 * exp(-s / 200000.0) + 0.3 * _hash(s, rank, 2654435761) + 0.01 * rank)
        warm = min(1.0, (s + 1) / 2000.0)
        lr.append(3e-4 * warm * (0.5 + 0.5 * cos(pi * s / max(total, 1))) + 1e-9 * rank)
        gn.append(0.8 + 0.6 * _hash(s, rank, 2246822519) + 0.2 * exp(-s / 50000.0))
        acc.append(0.95 * (1.0 - exp(-s / 100000.0)) + 0.02 * _hash(s, rank, 3266489917))
    return {"loss": loss, "lr": lr, "grad_norm": gn, "acc": acc}


# ---- the logging process ----------------------------------------------------------
def worker(cfg):
    """One rank: init, wait for the start time on stdin, log, finish; the
    figures as JSON to cfg["out"]."""
    client = os.path.abspath(cfg["client"])
    sys.path.insert(0, client)
    import trainwatch
    where = os.path.dirname(os.path.dirname(os.path.abspath(trainwatch.__file__)))
    if where != client:
        sys.exit("trainwatch imported from %s, not %s" % (where, client))
    rank = int(os.environ.get("RANK", "0"))
    n = int(cfg["steps"])
    vals = values_of(rank, n)
    loss, lr, gn, acc = vals["loss"], vals["lr"], vals["grad_norm"], vals["acc"]
    run = trainwatch.init(project=PROJECT, name=cfg["name"], url=cfg["url"], spool_dir=cfg["spool"],
                          capture_output=False, total_steps=n)
    sys.stdout.write("ready %s\n" % run.id)
    sys.stdout.flush()
    start_at = float(sys.stdin.readline())
    while True:
        d = start_at - time.time()
        if d <= 0:
            break
        time.sleep(d)
    burst = max(1, int(cfg["burst"]))
    period = burst / float(cfg["rate"])
    log = run.log
    pc, pcn = time.perf_counter, time.perf_counter_ns
    firsts, walls, log_ns = array("q"), array("d"), array("q")
    late = 0
    cpu0, th0 = os.times(), time.thread_time()
    t0 = pc()
    s = b = 0
    while s < n:
        d = t0 + b * period - pc()
        if d > 0:
            time.sleep(d)
        elif d < -period:
            late += 1
        k = min(burst, n - s)
        batch = [{"loss": loss[i], "lr": lr[i], "grad_norm": gn[i], "acc": acc[i]} for i in range(s, s + k)]
        w = time.time_ns() / 1e6
        c0 = pcn()
        i = s
        for v in batch:
            log(v, step=i)
            i += 1
        c1 = pcn()
        firsts.append(s)
        walls.append(w)
        log_ns.append(c1 - c0)
        s += k
        b += 1
    loop_wall = pc() - t0
    cpu1, th1 = os.times(), time.thread_time()
    f0 = pc()
    run.finish()
    finish_wall = pc() - f0
    cpu2 = os.times()
    snd = getattr(run, "_sender", None)
    res = {
        "rank": rank, "run_id": run.id, "name": run.name, "steps": n, "bursts": len(firsts),
        "late_bursts": late, "loop_wall_s": loop_wall, "rate": n / loop_wall if loop_wall > 0 else None,
        "log_calls": n, "log_wall_s": sum(log_ns) / 1e9,
        "log_burst_us_per_call": sorted(log_ns[j] / 1e3 / min(burst, n - firsts[j]) for j in range(len(firsts))),
        "loop_cpu_s": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
        "loop_main_thread_cpu_s": th1 - th0,
        "finish_wall_s": finish_wall,
        "finish_cpu_s": (cpu2.user - cpu1.user) + (cpu2.system - cpu1.system),
        "points_dropped": getattr(run, "points_dropped", None), "spooled": getattr(run, "spooled", None),
        "sent_batches": getattr(snd, "sent_batches", None),
        "sender_cpu_s": getattr(snd, "cpu_seconds", None),
        "firsts": list(firsts), "walls_ms": list(walls),
        "client": where,
    }
    with open(cfg["out"], "w") as f:
        json.dump(res, f)


# ---- HTTP (loopback only, no proxies) -------------------------------------------------
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http(method, url, body=None, timeout=600):
    """(status, bytes); never raises for an HTTP status."""
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with _opener.open(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def get_json(url, timeout=600):
    st, b = http("GET", url, timeout=timeout)
    if st != 200:
        raise RuntimeError("GET %s: HTTP %d %s" % (url, st, b[:300].decode(errors="replace")))
    return json.loads(b)


# ---- the server -------------------------------------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, data_dir, log_path):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.data_dir = data_dir
        self.log_path = log_path
        self.argv = [binary, "serve", "--listen", "127.0.0.1:%d" % self.port, "--data-dir", data_dir,
                     "--web.enable-admin-api"]
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited with %s; log: %s" % (self.proc.returncode, self.log_tail()))
            try:
                st, _ = http("GET", self.url + "/-/ready", timeout=2)
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("server not ready after 120 s; log: %s" % self.log_tail())

    def cpu(self):
        """utime + stime of the server process (all threads), seconds."""
        with open("/proc/%d/stat" % self.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss_peak_kib(self):
        try:
            with open("/proc/%d/status" % self.pid) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def flush(self):
        t = time.monotonic()
        st, b = http("POST", self.url + "/api/v1/admin/tsdb/flush", body=b"", timeout=600)
        return {"status": st, "ok": 200 <= st < 300, "seconds": time.monotonic() - t,
                "error": None if 200 <= st < 300 else b[:300].decode(errors="replace")}

    def log_tail(self, n=20):
        try:
            with open(self.log_path, "rb") as f:
                return b"".join(f.readlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        """SIGTERM by pid, then SIGKILL after 60 s."""
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        if not self._log.closed:
            self._log.close()
        return self.proc.returncode


def dir_size(path):
    """{'runs_db': bytes, 'rest': bytes, 'allocated': bytes}: apparent sizes
    of all files; runs.db, runs.db-wal, runs.db-shm count as runs_db."""
    out = {"runs_db": 0, "rest": 0, "allocated": 0, "files": 0}
    for dp, _, fns in os.walk(path):
        for fn in fns:
            try:
                st = os.lstat(os.path.join(dp, fn))
            except OSError:
                continue
            out["runs_db" if fn.startswith("runs.db") else "rest"] += st.st_size
            out["allocated"] += st.st_blocks * 512
            out["files"] += 1
    out["total"] = out["runs_db"] + out["rest"]
    return out


class HeadPoller:
    """Every ~2 s: the TSDB head's maxTime minus the wall clock (ms)."""

    def __init__(self, url, every=2.0):
        self.url = url + "/api/v1/status/tsdb"
        self.every = every
        self.max_ahead_ms = None
        self.polls = 0
        self.errors = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self):
        while not self._stop.wait(self.every):
            try:
                d = get_json(self.url, timeout=10)
                now = time.time() * 1000.0
                mt = d["data"]["headStats"]["maxTime"]
                ahead = mt - now
                self.polls += 1
                if self.max_ahead_ms is None or ahead > self.max_ahead_ms:
                    self.max_ahead_ms = ahead
            except Exception:
                self.errors += 1

    def stop(self):
        self._stop.set()
        self._t.join()
        return {"max_head_ahead_ms": self.max_ahead_ms, "polls": self.polls, "errors": self.errors}


# ---- one scenario against one server ------------------------------------------------
def run_workers(srv, client, tmp, label, scen, ranks, rate, seconds, burst_ms, run_id, name):
    steps = int(round(rate * seconds))
    burst = max(1, int(round(rate * burst_ms / 1000.0)))
    procs = []
    try:
        for r in range(ranks):
            cfg = {"client": client, "url": srv.url, "spool": os.path.join(tmp, "spool"), "name": name,
                   "steps": steps, "rate": rate, "burst": burst, "out": os.path.join(tmp, "w%d.json" % r)}
            env = dict(os.environ)
            for k in ("TRAINWATCH_URL", "TRAINWATCH_SPOOL", "TRAINWATCH_PROJECT", "TORCHELASTIC_RUN_ID",
                      "LOCAL_RANK", "LOCAL_WORLD_SIZE", "PYTHONPATH"):
                env.pop(k, None)
            env.update({"RANK": str(r), "WORLD_SIZE": str(ranks), "TRAINWATCH_RUN_ID": run_id,
                        "PYTHONDONTWRITEBYTECODE": "1"})
            err = open(os.path.join(tmp, "w%d.err" % r), "wb")
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(cfg)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env)
            p.err = err
            procs.append(p)
        deadline = time.monotonic() + 300
        for r, p in enumerate(procs):
            while True:
                ready, _, _ = select.select([p.stdout], [], [], 1.0)
                if ready:
                    line = p.stdout.readline()
                    break
                if time.monotonic() > deadline or p.poll() is not None:
                    line = b""
                    break
            if not line.startswith(b"ready"):
                raise RuntimeError("worker %d did not start: %s" % (r, _tail(os.path.join(tmp, "w%d.err" % r))))
        start_at = time.time() + 1.0
        for p in procs:
            p.stdin.write(("%.6f\n" % start_at).encode())
            p.stdin.flush()
        load0 = os.getloadavg()
        while time.time() < start_at:
            time.sleep(max(0.0, start_at - time.time()))
        cpu0, w0 = srv.cpu(), time.monotonic()
        poll = HeadPoller(srv.url)
        deadline = time.monotonic() + seconds * 5 + 600
        for p in procs:
            left = deadline - time.monotonic()
            try:
                p.wait(max(1.0, left))
            except subprocess.TimeoutExpired:
                raise RuntimeError("a logging process did not end in time")
        cpu1, w1 = srv.cpu(), time.monotonic()
        polled = poll.stop()
        load1 = os.getloadavg()
        results = []
        for r, p in enumerate(procs):
            if p.returncode != 0:
                raise RuntimeError("worker %d exited %d: %s" % (r, p.returncode, _tail(os.path.join(tmp, "w%d.err" % r))))
            with open(os.path.join(tmp, "w%d.json" % r)) as f:
                results.append(json.load(f))
        return {"start_at": start_at, "server_cpu_s": cpu1 - cpu0, "wall_s": w1 - w0, "polled": polled,
                "load_before": load0, "load_after": load1, "workers": results, "steps_per_rank": steps,
                "burst": burst}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.err.close()


def _tail(path, n=15):
    try:
        with open(path, "rb") as f:
            return b"".join(f.readlines()[-n:]).decode(errors="replace")
    except OSError:
        return ""


def check_ahead(srv, name, workers, values):
    """Every exported sample of the run's series: ahead of the export time,
    and ahead of the wall time its step was logged (traced back by value, or
    by value for trainwatch_run_step)."""
    t_export = time.time() * 1000.0
    q = urllib.parse.urlencode({"match[]": '{run="%s"}' % name, "start": "0",
                                "end": "%d" % int(time.time() + 30 * 86400)})
    st, body = http("GET", srv.url + "/api/v1/export?" + q)
    if st != 200:
        return {"error": "export: HTTP %d %s" % (st, body[:300].decode(errors="replace"))}
    by_rank = {w["rank"]: w for w in workers}
    inv = {}  # (rank, key) -> {value: step}
    collisions = 0
    for r, vals in values.items():
        for k in KEYS:
            d = {}
            for s, v in enumerate(vals[k]):
                if v in d:
                    collisions += 1
                    continue
                d[v] = s
            inv[(r, k)] = d
    walls = {r: (w["firsts"], w["walls_ms"]) for r, w in by_rank.items()}

    def logged_at(rank, step):
        firsts, ws = walls[rank]
        i = bisect.bisect_right(firsts, step) - 1
        return ws[i] if i >= 0 else None

    out = {"series": 0, "samples": 0, "samples_by_metric": collections.Counter(), "t_export_ms": t_export,
           "max_ahead_of_export_ms": None, "max_ahead_of_log_ms": None, "traced": 0, "untraced": 0,
           "ahead_of_log_over_1s": 0, "ahead_of_export_over_0": 0, "value_collisions": collisions,
           "max_samples_per_series_second": 0}
    worst_log = None
    for line in body.splitlines():
        if not line.strip():
            continue
        e = json.loads(line)
        m = e["metric"]
        metric = m.get("__name__", "")
        rank = int(m["rank"]) if "rank" in m else None
        ts, vs = e["timestamps"], e["values"]
        out["series"] += 1
        out["samples"] += len(ts)
        out["samples_by_metric"][metric] += len(ts)
        per_sec = collections.Counter(t // 1000 for t in ts)
        if per_sec:
            out["max_samples_per_series_second"] = max(out["max_samples_per_series_second"], max(per_sec.values()))
            if metric in KEYS:
                out["max_key_samples_per_series_second"] = max(out.get("max_key_samples_per_series_second", 0),
                                                               max(per_sec.values()))
        if ts:
            a = max(ts) - t_export
            if out["max_ahead_of_export_ms"] is None or a > out["max_ahead_of_export_ms"]:
                out["max_ahead_of_export_ms"] = a
            out["ahead_of_export_over_0"] += sum(1 for t in ts if t > t_export)
        step_rank = rank if rank is not None else 0
        traceable = metric in KEYS or metric == "trainwatch_run_step"
        if not traceable or step_rank not in walls:
            continue
        d = inv.get((step_rank, metric))
        for t, v in zip(ts, vs):
            if metric == "trainwatch_run_step":
                s = int(v) if isinstance(v, (int, float)) else None
            else:
                s = d.get(v) if isinstance(v, (int, float)) else None
            lw = logged_at(step_rank, s) if s is not None else None
            if lw is None:
                out["untraced"] += 1
                continue
            out["traced"] += 1
            a = t - lw
            if a > 1000:
                out["ahead_of_log_over_1s"] += 1
            if worst_log is None or a > worst_log[0]:
                worst_log = (a, metric, rank, s, t)
    if worst_log:
        out["max_ahead_of_log_ms"] = worst_log[0]
        out["worst"] = {"metric": worst_log[1], "rank": worst_log[2], "step": worst_log[3], "ts": worst_log[4]}
    out["samples_by_metric"] = dict(out["samples_by_metric"])
    return out


def _counts(expected, got_steps):
    c = collections.Counter(got_steps)
    once = sum(1 for s in range(expected) if c.get(s) == 1)
    missing = [s for s in range(expected) if s not in c]
    dup = sum(n - 1 for s, n in c.items() if n > 1)
    extra = sum(n for s, n in c.items() if not (0 <= s < expected))
    return {"expected": expected, "once": once, "missing": len(missing), "missing_first": missing[:10],
            "duplicates": dup, "extra": extra}


def _close(a, b):
    if not isinstance(a, (int, float)):
        return False
    return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def check_history(srv, run_id, workers, values):
    """GET /api/v1/runs/{id}/history per rank: every step once, the value logged."""
    out = {"available": None, "series": {}}
    for w in sorted(workers, key=lambda w: w["rank"]):
        r = w["rank"]
        q = urllib.parse.urlencode({"keys": ",".join(KEYS), "rank": str(r), "format": "json"})
        st, body = http("GET", "%s/api/v1/runs/%s/history?%s" % (srv.url, urllib.parse.quote(run_id), q))
        if st != 200:
            out["available"] = False
            out["http"] = "%d %s" % (st, body[:200].decode(errors="replace"))
            return out
        out["available"] = True
        data = json.loads(body)["data"]
        seen = set()
        for e in data:
            k = e.get("key")
            lab = e.get("labels") or {}
            if str(lab.get("rank", "0")) != str(r) or k not in KEYS:
                continue
            seen.add(k)
            steps = e["steps"]
            c = _counts(w["steps"], steps)
            vals = values[r][k]
            c["wrong_values"] = sum(1 for s, v in zip(steps, e["values"]) if 0 <= s < len(vals) and not _close(v, vals[s]))
            # the stored timestamp against the client-side wall time of the log() call's burst
            firsts, ws = w["firsts"], w["walls_ms"]
            worst = 0.0
            for s, t in zip(steps, e.get("timestamps") or ()):
                i = bisect.bisect_right(firsts, s) - 1
                if i >= 0:
                    worst = max(worst, abs(t - ws[i]))
            c["max_abs_ts_minus_log_ms"] = worst
            out["series"]["%d/%s" % (r, k)] = c
        for k in KEYS:
            if k not in seen:
                out["series"]["%d/%s" % (r, k)] = dict(_counts(w["steps"], []), wrong_values=0, absent=True)
    return out


def check_metrics(srv, run_id, workers, values):
    """GET /api/v1/runs/metrics?x=step in step windows small enough that
    every bucket is one point (points=100000 >= 2 x the window's points)."""
    ranks = len(workers)
    n = max(w["steps"] for w in workers)
    window = max(1000, min(50000, 200000 // (len(KEYS) * ranks)))
    got = collections.defaultdict(list)   # "rank/key" -> steps
    wrong = collections.Counter()
    multi = 0
    total_points = collections.Counter()
    requests = 0
    t0 = time.monotonic()
    for a in range(0, n, window):
        b = min(n, a + window) - 1
        q = urllib.parse.urlencode({"ids": run_id, "keys": ",".join(KEYS), "x": "step", "points": "100000",
                                    "start": str(a), "end": str(b)})
        st, body = http("GET", srv.url + "/api/v1/runs/metrics?" + q)
        requests += 1
        if st != 200:
            return {"error": "HTTP %d %s" % (st, body[:300].decode(errors="replace"))}
        for e in json.loads(body)["data"]:
            k = e["key"]
            r = int((e.get("labels") or {}).get("rank", "0"))
            sk = "%d/%s" % (r, k)
            total_points[sk] += e.get("total_points", 0)
            vals = values.get(r, {}).get(k)
            for p in e["points"]:
                x, c = p["x"], p.get("count", 1)
                if not (a <= x <= b):
                    continue
                if c != 1:
                    multi += 1
                got[sk].extend([x] * c)
                if c == 1 and vals is not None and 0 <= x < len(vals) and not _close(p.get("last"), vals[x]):
                    wrong[sk] += 1
    out = {"window": window, "requests": requests, "seconds": time.monotonic() - t0, "multi_point_buckets": multi,
           "series": {}}
    for w in workers:
        for k in KEYS:
            sk = "%d/%s" % (w["rank"], k)
            c = _counts(w["steps"], got.get(sk, []))
            c["wrong_values"] = wrong[sk]
            c["total_points"] = total_points[sk]
            out["series"][sk] = c
    return out


def _sum_series(chk):
    tot = {"expected": 0, "once": 0, "missing": 0, "duplicates": 0, "extra": 0, "wrong_values": 0}
    for c in chk.get("series", {}).values():
        for k in tot:
            tot[k] += c.get(k, 0)
    return tot


def scenario(args, label, binary, client, scen):
    ranks, rate = (1, args.rate_a) if scen == "A" else (args.ranks_b, args.rate_b)
    tmp = tempfile.mkdtemp(prefix="tw-steps-%s-%s-" % (label, scen))
    res = {"label": label, "scenario": scen, "binary": os.path.abspath(binary), "client_dir": os.path.abspath(client),
           "ranks": ranks, "rate_per_rank": rate, "seconds": args.seconds}
    srv = None
    try:
        srv = Server(binary, os.path.join(tmp, "data"), os.path.join(tmp, "server.log"))
        res["argv"] = srv.argv
        time.sleep(args.settle)
        # Idle: the same server with no run, the same polling.
        f0 = srv.flush()
        s0 = dir_size(srv.data_dir)
        poll = HeadPoller(srv.url)
        c0, w0 = srv.cpu(), time.monotonic()
        time.sleep(args.idle_seconds)
        c1, w1 = srv.cpu(), time.monotonic()
        poll.stop()
        f1 = srv.flush()
        s1 = dir_size(srv.data_dir)
        idle_rate = (c1 - c0) / (w1 - w0)
        res["idle"] = {"cpu_s": c1 - c0, "wall_s": w1 - w0, "cpu_rate": idle_rate,
                       "disk_growth": s1["total"] - s0["total"], "flush": [f0, f1]}
        run_id = "steps-%s-%s-%d" % (label, scen.lower(), os.getpid())
        name = "steps-%s-%s" % (label, scen.lower())
        log("  %s %s: server %s, idle %.1f%% CPU; logging %d rank(s) x %d steps/s x %ss"
            % (label, scen, srv.url, idle_rate * 100, ranks, rate, args.seconds))
        wr = run_workers(srv, client, tmp, label, scen, ranks, rate, args.seconds, args.burst_ms, run_id, name)
        workers = wr.pop("workers")
        f2 = srv.flush()
        s2 = dir_size(srv.data_dir)
        steps = sum(w["steps"] for w in workers)
        nvals = steps * len(KEYS)
        calls = sum(w["log_calls"] for w in workers)
        burst_us = sorted(x for w in workers for x in w["log_burst_us_per_call"])
        res.update(wr)
        res["run_id"], res["name"] = run_id, workers[0]["name"]
        res["values_logged"] = nvals
        res["steps_logged"] = steps
        res["achieved_rate_per_rank"] = [w["rate"] for w in workers]
        res["late_bursts"] = sum(w["late_bursts"] for w in workers)
        res["client"] = {
            "log_us_per_call": sum(w["log_wall_s"] for w in workers) / calls * 1e6,
            "log_us_per_call_median_of_bursts": burst_us[len(burst_us) // 2],
            "log_us_per_call_p99_of_bursts": burst_us[int(len(burst_us) * 0.99)],
            "cpu_us_per_value": sum(w["loop_cpu_s"] for w in workers) / nvals * 1e6,
            "main_thread_cpu_us_per_value": sum(w["loop_main_thread_cpu_s"] for w in workers) / nvals * 1e6,
            "finish_wall_s_max": max(w["finish_wall_s"] for w in workers),
            "finish_cpu_s": sum(w["finish_cpu_s"] for w in workers),
            "points_dropped": sum(w["points_dropped"] or 0 for w in workers),
            "spooled_at_end": sum(w["spooled"] or 0 for w in workers),
            "sent_batches": sum(w["sent_batches"] or 0 for w in workers),
            "imported_from": sorted({w["client"] for w in workers}),
        }
        net = wr["server_cpu_s"] - idle_rate * wr["wall_s"]
        res["server"] = {"cpu_s": wr["server_cpu_s"], "cpu_us_per_value": wr["server_cpu_s"] / nvals * 1e6,
                         "idle_cpu_s_same_wall": idle_rate * wr["wall_s"],
                         "net_cpu_us_per_value": net / nvals * 1e6, "rss_peak_kib": srv.rss_peak_kib()}
        grow = {k: s2[k] - s1[k] for k in ("total", "runs_db", "rest", "allocated")}
        res["disk"] = {"before": s1, "after": s2, "growth": grow, "flush": f2,
                       "bytes_per_value": grow["total"] / nvals,
                       "runs_db_bytes_per_value": grow["runs_db"] / nvals,
                       "rest_bytes_per_value": grow["rest"] / nvals,
                       "idle_growth_same_wall": res["idle"]["disk_growth"] * wr["wall_s"] / res["idle"]["wall_s"]}
        log("  %s %s: logged %d values in %.1f s; server CPU %.1f s; checking" % (label, scen, nvals, wr["wall_s"],
                                                                                  wr["server_cpu_s"]))
        values = {w["rank"]: values_of(w["rank"], w["steps"]) for w in workers}
        res["ahead"] = check_ahead(srv, res["name"], workers, values)
        res["history"] = check_history(srv, run_id, workers, values)
        res["metrics"] = check_metrics(srv, run_id, workers, values)
        res["history_total"] = _sum_series(res["history"]) if res["history"].get("available") else None
        res["metrics_total"] = _sum_series(res["metrics"])
        res["server_log_tail"] = srv.log_tail(10)
        # The durable size: SQLite checkpoints its WAL into runs.db when the server closes it.
        res["server_exit"] = srv.stop()
        s3 = dir_size(srv.data_dir)
        # runs.db's size before the scenario was taken with its WAL beside it,
        # so after the stop runs.db counts whole (the empty store included:
        # tens of KB; the idle server has no run) and the rest as growth.
        rest3 = s3["rest"] - s1["rest"]
        res["disk"].update({"after_stop": s3,
                            "bytes_per_value_after_stop": (s3["runs_db"] + rest3) / nvals,
                            "runs_db_bytes_per_value_after_stop": s3["runs_db"] / nvals,
                            "rest_bytes_per_value_after_stop": rest3 / nvals})
    except Exception as e:  # reported as measured, and the next one runs
        res["error"] = "%s: %s" % (type(e).__name__, e)
        if srv is not None:
            res["server_log_tail"] = srv.log_tail(20)
        log("  %s %s: FAILED: %s" % (label, scen, res["error"]))
    finally:
        if srv is not None and srv.proc.poll() is None:
            res["server_exit"] = srv.stop()
        if args.keep:
            res["tmp"] = tmp
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return res


def log(msg):
    sys.stderr.write(time.strftime("%H:%M:%S ") + msg + "\n")
    sys.stderr.flush()


# ---- report -------------------------------------------------------------------------
def _f(x, fmt="%.2f"):
    return "—" if x is None else fmt % x


def rows(r):
    """(figure, text) for one scenario result."""
    if r is None:
        return {}
    if "error" in r and "server" not in r:
        return {"error": r["error"]}
    c, s, d, a = r["client"], r["server"], r["disk"], r["ahead"]
    out = collections.OrderedDict()
    rates = r["achieved_rate_per_rank"]
    out["logged (steps × 4 keys)"] = "%d × 4 = %d values; %s steps/s per rank" % (
        r["steps_logged"], r["values_logged"],
        "%.0f" % rates[0] if len(rates) == 1 else "%.0f–%.0f" % (min(rates), max(rates)))

    def steps_txt(t):
        if t is None:
            return "no endpoint"
        return "%d of %d once (missing %d, duplicated %d, extra %d, wrong values %d)" % (
            t["once"], t["expected"], t["missing"], t["duplicates"], t["extra"], t["wrong_values"])
    out["steps by history endpoint"] = steps_txt(r.get("history_total")) if r["history"].get("available") else \
        "no endpoint (HTTP %s)" % r["history"].get("http", "?").split(" ")[0]
    if r["history"].get("available"):
        out["history timestamps − log() wall time, max |diff|"] = "%.3f s" % (max(
            c.get("max_abs_ts_minus_log_ms", 0) for c in r["history"]["series"].values()) / 1000.0)
    out["steps by runs/metrics?x=step"] = ("error: " + r["metrics"]["error"]) if "error" in r["metrics"] else \
        steps_txt(r.get("metrics_total"))
    if "error" in a:
        out["TSDB sample ahead of log() wall time, max"] = a["error"]
    else:
        out["TSDB samples of the run (export) per logged value"] = "%.3f (%d samples, %d series)" % (
            a["samples"] / r["values_logged"], a["samples"], a["series"])
        out["TSDB samples per series per second, max: logged keys / all"] = "%d / %d" % (
            a.get("max_key_samples_per_series_second", 0), a["max_samples_per_series_second"])
        out["TSDB sample ahead of log() wall time, max"] = "%s s (%d samples > 1 s)" % (
            _f(None if a["max_ahead_of_log_ms"] is None else a["max_ahead_of_log_ms"] / 1000.0, "%.3f"),
            a["ahead_of_log_over_1s"])
        out["TSDB sample ahead of the export's wall time, max"] = "%s s (%d samples ahead)" % (
            _f(None if a["max_ahead_of_export_ms"] is None else a["max_ahead_of_export_ms"] / 1000.0, "%.3f"),
            a["ahead_of_export_over_0"])
    mh = r["polled"]["max_head_ahead_ms"]
    out["head maxTime − wall clock, polled every 2 s, max"] = _f(None if mh is None else mh / 1000.0, "%.3f s")
    out["log() wall per call (mean; median burst)"] = "%.2f µs; %.2f µs" % (
        c["log_us_per_call"], c["log_us_per_call_median_of_bursts"])
    out["client process CPU per logged value (loop)"] = "%.2f µs" % c["cpu_us_per_value"]
    out["finish() wall (slowest rank)"] = "%.2f s" % c["finish_wall_s_max"]
    out["server CPU per logged value, raw / net of idle"] = "%.2f / %.2f µs" % (
        s["cpu_us_per_value"], s["net_cpu_us_per_value"])
    out["server CPU, scenario / idle over the same wall"] = "%.1f / %.1f s over %.1f s" % (
        s["cpu_s"], s["idle_cpu_s_same_wall"], r["wall_s"])
    out["disk bytes per logged value after flush, server running: total (runs.db + rest)"] = "%.2f (%.2f + %.2f)" % (
        d["bytes_per_value"], d["runs_db_bytes_per_value"], d["rest_bytes_per_value"])
    if "bytes_per_value_after_stop" in d:
        out["disk bytes per logged value after the server stopped: total (whole runs.db + rest)"] = \
            "%.2f (%.2f + %.2f)" % (d["bytes_per_value_after_stop"], d["runs_db_bytes_per_value_after_stop"],
                                    d["rest_bytes_per_value_after_stop"])
    return out


def table(results, scen):
    today = next((r for r in results if r["scenario"] == scen and r["label"] == "today"), None)
    new = next((r for r in results if r["scenario"] == scen and r["label"] == "new"), None)
    a, b = rows(today), rows(new)
    first, second = (b, a) if len(b) >= len(a) else (a, b)
    keys = list(first.keys()) + [k for k in second.keys() if k not in first]
    lines = ["| figure (scenario %s) | today | new |" % scen, "| --- | --- | --- |"]
    for k in keys:
        lines.append("| %s | %s | %s |" % (k, a.get(k, "—"), b.get(k, "—")))
    return "\n".join(lines)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/release/src/app/trainwatch"))
    ap.add_argument("--client", default=os.path.join(ROOT, "clients/python"),
                    help="dir holding the trainwatch package (put on the logging processes' sys.path)")
    ap.add_argument("--baseline", help="today's server binary: run everything against it first")
    ap.add_argument("--baseline-client", help="today's client dir (with --baseline)")
    ap.add_argument("--scenarios", default="A,B")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--idle-seconds", type=float, default=None, help="idle window (default: --seconds)")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after the server is ready before measuring")
    ap.add_argument("--rate-a", type=float, default=10000.0)
    ap.add_argument("--rate-b", type=float, default=1000.0)
    ap.add_argument("--ranks-b", type=int, default=8)
    ap.add_argument("--burst-ms", type=float, default=10.0)
    ap.add_argument("--out", default=None, help="JSON of every figure")
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs (data, logs)")
    args = ap.parse_args()
    if args.idle_seconds is None:
        args.idle_seconds = args.seconds
    if bool(args.baseline) != bool(args.baseline_client):
        ap.error("--baseline and --baseline-client go together")

    def on_term(sig, frame):
        raise SystemExit("signal %d" % sig)
    signal.signal(signal.SIGTERM, on_term)

    sides = []
    if args.baseline:
        sides.append(("today", args.baseline, args.baseline_client))
    sides.append(("new", args.binary, args.client))
    scens = [s.strip().upper() for s in args.scenarios.split(",") if s.strip()]
    results = []
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "argv": sys.argv, "cpus": os.cpu_count(),
            "python": sys.version.split()[0]}
    for label, binary, client in sides:
        for scen in scens:
            log("%s, scenario %s" % (label, scen))
            results.append(scenario(args, label, binary, client, scen))
            if args.out:
                with open(args.out, "w") as f:
                    json.dump({"meta": meta, "results": results}, f, indent=1)
    meta["ended"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    for scen in scens:
        print(table(results, scen))
        print()
    for r in results:
        if "error" in r:
            print("%s %s: error: %s" % (r["label"], r["scenario"], r["error"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
