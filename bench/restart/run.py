#!/usr/bin/env python3
"""Restart after a crash (issue 17): time to ready and peak RSS of a server
killed with SIGKILL while its head holds N series x D seconds, beside
Prometheus on the same data.

For each server in turn (--peers, default prometheus,trainwatch; one at a
time, never two):

  1. start it on a fresh data dir on a free loopback port: Debian's Prometheus
     (--prometheus) with a config without scrape jobs and its remote_write
     receiver on; `trainwatch serve --listen 127.0.0.1:<port> --data-dir <dir>`
     with default flags (collectors, rule pack and self-scrape on);
  2. feed it N series (--series, rounded to whole targets of 405 series) x
     --duration s at --interval s through remote_write: the shared peers
     harness's generator and encoder (workload.py, wire.py, imported from
     --peers-dir), streamed by --shards sender processes without a payload
     cache (each owns a fixed set of targets and sends them in time order;
     the senders meet at a barrier every ~5 min of data), with timestamps
     ending at the ingest's start (rounded down to the interval), so all of it
     sits in the head;
  3. once every request is acknowledged (2xx), check that it is queryable;
  4. SIGKILL it (a crash), measure the data dir, start it again on the same
     data dir and port and measure the wall time from exec to the first 2xx of
     /-/ready (polled every 50 ms), the peak RSS of the start (VmHWM right
     after ready, and the max VmRSS sampled every 0.1 s), and the CPU seconds
     it used until ready (utime+stime); then check that every series and the
     samples of a sample of series are still there. --repeats crashes and
     restarts per server (median reported);
  5. stop it by pid (SIGTERM, SIGKILL after 60 s) and remove the data dir
     unless --keep.

Output: a table on stdout and every figure as JSON (--out).
See bench/restart/README.md.

Usage:
  python3 bench/restart/run.py [--series 1000000] [--duration 7200] [--interval 15]
      [--shards 4] [--peers prometheus,trainwatch] [--repeats 1]
      [--binary build/release/src/app/trainwatch] [--prometheus /usr/bin/prometheus]
      [--peers-dir ../shared/bench/peers] [--workdir DIR] [--out restart.json] [--keep]
Smoke run: --series 20000 --duration 1800 --interval 15 (1-2 minutes on 2 cores).
Python 3 standard library only (plus the shared harness's workload.py and wire.py).
"""
import argparse
import http.client
import json
import multiprocessing
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
GPUS, CPUS = 8, 8  # per target, as in the peers harness (405 series)
WORKLOAD_JOBS = ("dcgm-exporter", "node-exporter", "trainer")
CLUSTER = "train-a"  # the cluster label every workload series carries
WRITE_HEADERS = {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
                 "X-Prometheus-Remote-Write-Version": "0.1.0", "User-Agent": "tw-restart-bench/1"}

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def log(msg):
    sys.stderr.write(time.strftime("%H:%M:%S ") + msg + "\n")
    sys.stderr.flush()


def import_peers(peers_dir):
    """workload.py and wire.py of the shared peers harness (never copied)."""
    if not os.path.isfile(os.path.join(peers_dir, "workload.py")):
        raise SystemExit("no workload.py in %s (--peers-dir)" % peers_dir)
    if peers_dir not in sys.path:
        sys.path.insert(0, peers_dir)
    import wire  # noqa: E402
    import workload  # noqa: E402
    return workload, wire


# ---- HTTP ---------------------------------------------------------------------------
def http_req(method, url, body=None, timeout=900):
    """(status, bytes); never raises for an HTTP status."""
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with _opener.open(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def get_json(url, timeout=900):
    st, b = http_req("GET", url, timeout=timeout)
    if st != 200:
        raise RuntimeError("GET %s: HTTP %d %s" % (url, st, b[:300].decode(errors="replace")))
    return json.loads(b)


def query(base_url, q, at_s, timeout=900):
    """Instant query; (result list, seconds)."""
    t = time.monotonic()
    j = get_json(base_url + "/api/v1/query?" + urllib.parse.urlencode({"query": q, "time": "%.3f" % at_s}),
                 timeout=timeout)
    return j["data"]["result"], time.monotonic() - t


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# ---- /proc --------------------------------------------------------------------------
def _status_kib(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def cpu_s(pid):
    """utime + stime of the process (all threads), seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return None


class RssSampler(threading.Thread):
    """Max VmRSS of one pid, sampled every `period` s."""

    def __init__(self, pid, period=0.1):
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.max_kib = 0
        self.samples = 0
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            v = _status_kib(self.pid, "VmRSS:")
            if v is not None:
                self.samples += 1
                self.max_kib = max(self.max_kib, v)
            self._halt.wait(self.period)

    def stop(self):
        self._halt.set()
        self.join(timeout=5)
        return self.max_kib


def dir_size(path):
    """Apparent and allocated bytes and files under path, per top-level entry,
    and the block directories (those with a meta.json) found at the top."""
    out = {"bytes": 0, "allocated": 0, "files": 0, "by_entry": {}, "blocks": []}
    if not os.path.isdir(path):
        return out
    for entry in sorted(os.listdir(path)):
        full = os.path.join(path, entry)
        size = 0
        if os.path.isdir(full) and not os.path.islink(full):
            if os.path.exists(os.path.join(full, "meta.json")):
                out["blocks"].append(entry)
            walk = ((dp, fns) for dp, _, fns in os.walk(full))
        else:
            walk = [(path, [entry])]
        for dp, fns in walk:
            for fn in fns:
                try:
                    st = os.lstat(os.path.join(dp, fn))
                except OSError:
                    continue
                size += st.st_size
                out["allocated"] += st.st_blocks * 512
                out["files"] += 1
        out["by_entry"][entry] = size
        out["bytes"] += size
    return out


# ---- servers ------------------------------------------------------------------------
class Server:
    """One server under test on a fixed port and data dir; started again on
    both after a crash. Stopped and killed by its pid only."""

    name = "server"

    def __init__(self, base, port, extra_args):
        self.base = base
        self.data = os.path.join(base, "data")
        self.port = port
        self.url = "http://%s:%d" % (HOST, port)
        self.extra = extra_args
        self.log_path = os.path.join(base, "server.log")
        self.proc = None
        self.pid = None
        self.starts = 0
        self._log_off = 0
        os.makedirs(self.data, exist_ok=True)

    def argv(self):
        raise NotImplementedError

    def version(self):
        return "?"

    def start(self):
        """exec the server; returns the monotonic time just before the exec."""
        self.starts += 1
        with open(self.log_path, "ab") as f:
            f.write(("==== bench: start %d at %s\n" % (self.starts, time.strftime("%H:%M:%S"))).encode())
            self._log_off = f.tell()
        logf = open(self.log_path, "ab")
        try:
            t0 = time.monotonic()
            self.proc = subprocess.Popen(self.argv(), stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.base, start_new_session=True)
        finally:
            logf.close()
        self.pid = self.proc.pid
        return t0

    def wait_ready(self, t0, timeout, poll=0.05):
        """Seconds from t0 to the first 2xx of /-/ready, polled every `poll` s."""
        deadline = t0 + timeout
        url = self.url + "/-/ready"
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s before it was ready; log:\n%s"
                                   % (self.name, self.proc.returncode, self.log_tail()))
            try:
                st, _ = http_req("GET", url, timeout=2)
                if 200 <= st < 300:
                    return time.monotonic() - t0
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("%s not ready %.0f s after exec; log:\n%s" % (self.name, timeout, self.log_tail()))
            time.sleep(poll)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def crash(self):
        """SIGKILL by pid: no clean shutdown."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        """SIGTERM by pid, SIGKILL after 60 s; (exit status, seconds)."""
        if self.proc is None:
            return None, 0.0
        t = time.monotonic()
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                log("%s: no exit 60 s after SIGTERM, SIGKILL to pid %d" % (self.name, self.pid))
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                self.proc.wait()
        return self.proc.returncode, time.monotonic() - t

    def log_since_start(self, max_bytes=1 << 20):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_off)
                return f.read(max_bytes).decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n=20):
        try:
            with open(self.log_path, "rb") as f:
                return b"".join(f.readlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def replay_lines(self):
        """The log lines of the latest start about WAL replay / head loading."""
        keys = ("replay", "wal", "head", "checkpoint", "loaded", "opened", "ready", "error")
        lines = [ln for ln in self.log_since_start().splitlines() if any(k in ln.lower() for k in keys)]
        return lines[:12]


_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration_s(text):
    """Seconds of a Go duration string such as 1m2.5s or 162.57ms; None if not one."""
    parts = re.findall(r"([0-9.]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        return None
    return sum(float(a) * _GO_UNITS[b] for a, b in parts)


def reported_open_s(name, lines):
    """The server's own figure for opening its TSDB at the latest start:
    Prometheus's total_replay_duration, trainwatch's `tsdb opened ... in N ms`."""
    for ln in lines:
        if name == "prometheus":
            m = re.search(r"total_replay_duration=(\S+)", ln)
            if m:
                return go_duration_s(m.group(1))
        else:
            m = re.search(r"tsdb opened dir=.* in (\d+) ms", ln)
            if m:
                return int(m.group(1)) / 1000.0
    return None


class Prometheus(Server):
    name = "prometheus"

    def __init__(self, base, port, extra_args, binary):
        super().__init__(base, port, extra_args)
        self.binary = binary
        self.config = os.path.join(base, "prometheus.yml")
        with open(self.config, "w") as f:
            f.write("global:\n  scrape_interval: 15s\n  evaluation_interval: 15s\nscrape_configs: []\n")

    def argv(self):
        return [self.binary, "--config.file=" + self.config, "--storage.tsdb.path=" + self.data,
                "--web.listen-address=%s:%d" % (HOST, self.port), "--web.enable-remote-write-receiver",
                "--storage.tsdb.retention.time=30d",
                # query limits only (the verification counts up to N series at once)
                "--query.max-samples=1000000000", "--query.timeout=10m"] + self.extra

    def version(self):
        try:
            out = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=30)
            return ((out.stdout or out.stderr).splitlines() or ["?"])[0].strip()
        except (OSError, subprocess.SubprocessError):
            return "?"


class Trainwatch(Server):
    name = "trainwatch"

    def __init__(self, base, port, extra_args, binary):
        super().__init__(base, port, extra_args)
        self.binary = binary

    def argv(self):
        # default flags: "defaults are what we measure"
        return [self.binary, "serve", "--listen", "%s:%d" % (HOST, self.port), "--data-dir", self.data] + self.extra

    def version(self):
        try:
            out = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=30)
            return (out.stdout.splitlines() or ["?"])[0].strip()
        except (OSError, subprocess.SubprocessError):
            return "?"


# ---- the workload -------------------------------------------------------------------
def make_plan(args, nper):
    targets = max(1, int(round(args.series / float(nper))))
    steps = args.duration // args.interval
    shards = min(args.shards, targets)
    sync_steps = args.sync_steps or max(1, 300 // args.interval)
    return {"targets": targets, "series_per_target": nper, "series": targets * nper, "steps": steps,
            "interval_s": args.interval, "duration_s": steps * args.interval, "samples": targets * nper * steps,
            "shards": shards, "batch": args.batch, "sync_steps": sync_steps, "seed": args.seed,
            "gpus": GPUS, "cpus": CPUS}


def _sender(cfg, shard, start_b, sync_b, abort, acked, resq):
    """One sender process: generates its targets' samples step by step (a
    generator thread) and POSTs them in order on one connection (this thread),
    retrying 429/503 (Retry-After) and dropped connections."""
    res = {"shard": shard, "requests": 0, "samples": 0, "bytes": 0, "retries": 0, "errors": 0, "messages": [],
           "lat": [], "t_last": None, "setup_s": None, "setup_cpu_s": None, "cpu_s": None}
    q = queue.Queue(maxsize=4)
    gen_err = []

    def fail(msg):
        res["messages"].append(msg)
        abort.set()
        for b in (start_b, sync_b):
            try:
                b.abort()
            except Exception:  # noqa: BLE001 - best effort
                pass

    try:
        t = time.monotonic()
        sys.path.insert(0, cfg["peers_dir"])
        import wire  # noqa: E402
        import workload  # noqa: E402
        targets = [workload.Target(i, cfg["seed"], cfg["gpus"], cfg["cpus"], cfg["interval_s"])
                   for i in range(shard, cfg["targets"], cfg["shards"])]
        prefixes = [[wire.proto_series_prefix(lb) for lb in tg.labels] for tg in targets]
        res["setup_s"] = time.monotonic() - t
        res["setup_cpu_s"] = sum(os.times()[:2])
        start_b.wait(timeout=cfg["setup_timeout"])
    except BaseException as e:  # noqa: BLE001 - reported
        fail("sender %d setup: %r" % (shard, e))
        resq.put(res)
        return

    def put(item):
        while True:
            try:
                q.put(item, timeout=1)
                return True
            except queue.Full:
                if abort.is_set():
                    return False

    def generate():
        try:
            pack_d = struct.Struct("<d").pack
            iv_ms = cfg["interval_s"] * 1000
            batch = cfg["batch"]
            for k in range(cfg["steps"]):
                if abort.is_set():
                    return
                base = cfg["t_start_ms"] + k * iv_ms
                parts, n = [], 0
                for tg, pre in zip(targets, prefixes):
                    tail = b"\x10" + wire.ts_varint(base + tg.offset_ms)
                    vals = tg.step()
                    parts.extend([x + pack_d(v) + tail for x, v in zip(pre, vals)])
                    n += len(vals)
                    if n >= batch:
                        if not put((k, wire.snappy_block_literal(b"".join(parts)), n)):
                            return
                        parts, n = [], 0
                if n and not put((k, wire.snappy_block_literal(b"".join(parts)), n)):
                    return
        except BaseException as e:  # noqa: BLE001 - reported
            gen_err.append("sender %d generator: %r" % (shard, e))
            abort.set()
        finally:
            put(None)

    gen = threading.Thread(target=generate, daemon=True)
    gen.start()
    conn = http.client.HTTPConnection(HOST, cfg["port"], timeout=900)
    epoch = 0
    try:
        while True:
            try:
                item = q.get(timeout=1)
            except queue.Empty:
                if abort.is_set():
                    break
                continue
            if item is None or abort.is_set():
                break
            k, body, n = item
            while epoch < k // cfg["sync_steps"]:
                sync_b.wait(timeout=1800)
                epoch += 1
            attempt = 0
            while not abort.is_set():
                t = time.monotonic()
                try:
                    conn.request("POST", "/api/v1/write", body=body, headers=WRITE_HEADERS)
                    r = conn.getresponse()
                    data = r.read()
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    conn = http.client.HTTPConnection(HOST, cfg["port"], timeout=900)
                    attempt += 1
                    res["retries"] += 1
                    if attempt > 5:
                        raise RuntimeError("request failed %d times, last: %r" % (attempt, e))
                    time.sleep(1)
                    continue
                res["lat"].append(time.monotonic() - t)
                res["requests"] += 1
                if 200 <= r.status < 300:
                    res["samples"] += n
                    res["bytes"] += len(body)
                    acked[shard] += n
                    res["t_last"] = time.monotonic()
                    break
                if r.status in (429, 503) and attempt < cfg["max_retries"]:
                    attempt += 1
                    res["retries"] += 1
                    try:
                        wait = float(r.getheader("Retry-After") or 0.5)
                    except ValueError:
                        wait = 0.5
                    time.sleep(min(max(wait, 0.05), 5.0))
                    continue
                res["errors"] += 1
                if len(res["messages"]) < 5:
                    res["messages"].append("HTTP %d: %s" % (r.status, data[:300].decode(errors="replace")))
                if res["errors"] > cfg["max_errors"]:
                    fail("sender %d: more than %d errors" % (shard, cfg["max_errors"]))
                break
    except BaseException as e:  # noqa: BLE001 - reported
        fail("sender %d: %r" % (shard, e))
    finally:
        conn.close()
        gen.join(timeout=10)
        res["messages"].extend(gen_err)
        res["cpu_s"] = sum(os.times()[:2]) - (res["setup_cpu_s"] or 0.0)
        resq.put(res)


def ingest(srv, plan, args):
    """Streams the workload into srv; returns the ingest figures."""
    ctx = multiprocessing.get_context("spawn")
    k = plan["shards"]
    start_b, sync_b = ctx.Barrier(k + 1), ctx.Barrier(k)
    abort = ctx.Event()
    acked = ctx.Array("q", k, lock=False)
    resq = ctx.Queue()
    iv_ms = plan["interval_s"] * 1000
    t_end_ms = int(time.time() * 1000) // iv_ms * iv_ms  # no sample at or after "now"
    t_start_ms = t_end_ms - plan["steps"] * iv_ms
    cfg = dict(plan, peers_dir=args.peers_dir, port=srv.port, t_start_ms=t_start_ms, setup_timeout=1800,
               max_retries=1000, max_errors=20)
    procs = [ctx.Process(target=_sender, args=(cfg, i, start_b, sync_b, abort, acked, resq), daemon=True)
             for i in range(k)]
    out = {"t_start_ms": t_start_ms, "t_end_ms": t_end_ms, "expected_samples": plan["samples"]}
    results = {}
    try:
        t_setup = time.monotonic()
        for p in procs:
            p.start()
        try:
            start_b.wait(timeout=1800)
        except threading.BrokenBarrierError:
            abort.set()
        out["sender_setup_s"] = round(time.monotonic() - t_setup, 2)
        c0 = cpu_s(srv.pid)
        t0 = time.monotonic()
        last_log = t0
        while len(results) < k:
            try:
                r = resq.get(timeout=1)
                results[r["shard"]] = r
                continue
            except queue.Empty:
                pass
            if not srv.alive():
                abort.set()
                out["server_died"] = "exit %s" % srv.proc.returncode
                sync_b.abort()
            if not any(p.is_alive() for p in procs) and resq.empty():
                break
            now = time.monotonic()
            if now - last_log >= args.progress_every:
                done = sum(acked)
                log("%s: %s / %s samples acknowledged (%.0f %%), %.0f samples/s, RSS %.0f MiB"
                    % (srv.name, fmt_int(done), fmt_int(plan["samples"]), 100.0 * done / plan["samples"],
                       done / (now - t0), (_status_kib(srv.pid, "VmRSS:") or 0) / 1024.0))
                last_log = now
        t_last = max([r["t_last"] for r in results.values() if r["t_last"]] or [time.monotonic()])
        c1 = cpu_s(srv.pid)
    finally:
        if len(results) < k:
            abort.set()
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
                p.join(timeout=10)
    rs = list(results.values())
    lat = sorted(x for r in rs for x in r["lat"])
    wall = t_last - t0
    acked_n = sum(r["samples"] for r in rs)
    out.update({
        "wall_s": round(wall, 2), "samples_acknowledged": acked_n,
        "samples_per_s": round(acked_n / wall) if wall > 0 else None,
        "requests": sum(r["requests"] for r in rs), "retries": sum(r["retries"] for r in rs),
        "errors": sum(r["errors"] for r in rs), "error_messages": [m for r in rs for m in r["messages"]][:10],
        "bytes_sent": sum(r["bytes"] for r in rs),
        "server_cpu_s": round(c1 - c0, 2) if c0 is not None and c1 is not None else None,
        "client_cpu_s": round(sum(r["cpu_s"] or 0 for r in rs), 2),
        "client_setup_s_max": round(max([r["setup_s"] or 0 for r in rs] or [0]), 2),
        "request_p50_ms": round(1000 * lat[len(lat) // 2], 1) if lat else None,
        "request_p99_ms": round(1000 * lat[int(len(lat) * 0.99)], 1) if lat else None,
        "senders_reported": len(rs),
    })
    if out["server_cpu_s"]:
        out["samples_per_server_cpu_s"] = round(acked_n / out["server_cpu_s"])
    return out


def verify(srv, plan, t_end_ms):
    """What the server answers about the workload: the head's series count,
    workload series by job at the end of the data, and samples per series of
    node_load1 (one series per target) and of DCGM_FI_DEV_GPU_TEMP (8 per
    target) over the whole range."""
    at = t_end_ms / 1000.0
    rng = "%ds" % (plan["duration_s"] + plan["interval_s"])
    out = {"ok": False}
    t = time.monotonic()
    head = get_json(srv.url + "/api/v1/status/tsdb")["data"]["headStats"]
    out["status_s"] = round(time.monotonic() - t, 3)
    out["head_num_series"] = head.get("numSeries")
    out["head_min_time"], out["head_max_time"] = head.get("minTime"), head.get("maxTime")
    res, secs = query(srv.url, 'count by (job) ({cluster="%s"})' % CLUSTER, at)
    by_job = {r["metric"].get("job", ""): int(float(r["value"][1])) for r in res}
    out["workload_series"] = sum(by_job.values())
    out["workload_series_by_job"] = by_job
    out["count_query_s"] = round(secs, 3)
    res, secs = query(srv.url, 'count_over_time(node_load1{job="node-exporter"}[%s])' % rng, at)
    counts = [int(float(r["value"][1])) for r in res]
    out["node_load1"] = {"series": len(counts), "expected_series": plan["targets"],
                         "samples_min": min(counts) if counts else None, "samples_max": max(counts) if counts else None,
                         "expected_per_series": plan["steps"], "query_s": round(secs, 3)}
    res, secs = query(srv.url, 'sum(count_over_time(DCGM_FI_DEV_GPU_TEMP{job="dcgm-exporter"}[%s]))' % rng, at)
    got = int(float(res[0]["value"][1])) if res else 0
    out["gpu_temp_samples"] = {"got": got, "expected": GPUS * plan["targets"] * plan["steps"],
                               "query_s": round(secs, 3)}
    nl = out["node_load1"]
    out["ok"] = (out["workload_series"] == plan["series"]
                 and nl["series"] == plan["targets"] and nl["samples_min"] == nl["samples_max"] == plan["steps"]
                 and got == out["gpu_temp_samples"]["expected"])
    return out


def restart_once(srv, plan, t_end_ms, args, i):
    """Crash srv (SIGKILL), measure its data dir, start it again and measure
    the start; then verify what it has."""
    r = {"restart": i}
    try:
        st = get_json(srv.url + "/api/v1/status/tsdb", timeout=120)["data"]["headStats"]
        r["head_before_kill"] = {k: st.get(k) for k in ("numSeries", "minTime", "maxTime", "chunkCount")}
    except Exception as e:  # noqa: BLE001 - diagnostics only
        r["head_before_kill"] = {"error": repr(e)}
    r["rss_before_kill_mib"] = round((_status_kib(srv.pid, "VmRSS:") or 0) / 1024.0, 1)
    srv.crash()
    r["data_at_kill"] = dir_size(srv.data)
    if r["data_at_kill"]["blocks"]:
        log("%s: note: %d persistent block(s) in the data dir at the kill (%s): not all of it is head"
            % (srv.name, len(r["data_at_kill"]["blocks"]), ", ".join(r["data_at_kill"]["blocks"][:4])))
    t0 = srv.start()
    sampler = RssSampler(srv.pid, 0.1)
    sampler.start()
    try:
        ready = srv.wait_ready(t0, args.ready_timeout)
        hwm = _status_kib(srv.pid, "VmHWM:")
        cpu = cpu_s(srv.pid)
        rss_now = _status_kib(srv.pid, "VmRSS:")
    finally:
        rss_max = sampler.stop()
    r.update({"ready_s": round(ready, 3), "cpu_s_until_ready": cpu,
              "vm_hwm_mib": round((hwm or 0) / 1024.0, 1), "rss_sampled_max_mib": round(rss_max / 1024.0, 1),
              "rss_at_ready_mib": round((rss_now or 0) / 1024.0, 1), "rss_samples": sampler.samples})
    r["peak_rss_mib"] = max(r["vm_hwm_mib"], r["rss_sampled_max_mib"])
    r["replay_log"] = srv.replay_lines()
    r["server_reported_open_s"] = reported_open_s(srv.name, r["replay_log"])
    log("%s: restart %d ready in %.2f s, peak RSS %.0f MiB, CPU %.1f s until ready"
        % (srv.name, i, ready, r["peak_rss_mib"], cpu or 0))
    r["verify"] = verify(srv, plan, t_end_ms)
    r["rss_after_verify_mib"] = round((_status_kib(srv.pid, "VmRSS:") or 0) / 1024.0, 1)
    v = r["verify"]
    log("%s: after restart %d: %s workload series (expected %s), head %s series, samples check %s"
        % (srv.name, i, fmt_int(v["workload_series"]), fmt_int(plan["series"]), fmt_int(v["head_num_series"]),
           "ok" if v["ok"] else "FAILED"))
    return r


def bench_server(name, plan, args, workdir):
    base = os.path.join(workdir, name)
    if os.path.exists(base):
        shutil.rmtree(base)
    os.makedirs(base)
    port = free_port()
    if name == "prometheus":
        srv = Prometheus(base, port, shlex.split(args.prometheus_args), args.prometheus)
    else:
        srv = Trainwatch(base, port, shlex.split(args.trainwatch_args), args.binary)
    res = {"server": name, "version": srv.version(), "argv": srv.argv(), "port": port, "base": base,
           "series": plan["series"], "samples": plan["samples"], "restarts": []}
    try:
        log("%s: starting %s" % (name, " ".join(shlex.quote(a) for a in srv.argv())))
        t0 = srv.start()
        res["first_ready_s"] = round(srv.wait_ready(t0, 300), 3)
        res["rss_idle_mib"] = round((_status_kib(srv.pid, "VmRSS:") or 0) / 1024.0, 1)
        log("%s: ready in %.2f s; ingesting %s series x %d steps = %s samples with %d senders"
            % (name, res["first_ready_s"], fmt_int(plan["series"]), plan["steps"], fmt_int(plan["samples"]),
               plan["shards"]))
        ing = ingest(srv, plan, args)
        res["ingest"] = ing
        log("%s: ingest: %s samples acknowledged in %.1f s (%s samples/s, server CPU %s s, client CPU %.1f s), "
            "%d errors, %d retries"
            % (name, fmt_int(ing["samples_acknowledged"]), ing["wall_s"], fmt_int(ing["samples_per_s"]),
               ing["server_cpu_s"], ing["client_cpu_s"], ing["errors"], ing["retries"]))
        for m in ing["error_messages"]:
            log("  " + m)
        if ing["samples_acknowledged"] != plan["samples"] or not srv.alive():
            raise RuntimeError("ingest incomplete: %d of %d samples acknowledged%s"
                               % (ing["samples_acknowledged"], plan["samples"],
                                  "" if srv.alive() else "; the server exited (%s)" % srv.proc.returncode))
        res["rss_after_ingest_mib"] = round((_status_kib(srv.pid, "VmRSS:") or 0) / 1024.0, 1)
        res["vm_hwm_ingest_mib"] = round((_status_kib(srv.pid, "VmHWM:") or 0) / 1024.0, 1)
        res["verify_before_kill"] = verify(srv, plan, ing["t_end_ms"])
        v = res["verify_before_kill"]
        log("%s: before the kill: %s workload series, head %s series, samples check %s"
            % (name, fmt_int(v["workload_series"]), fmt_int(v["head_num_series"]), "ok" if v["ok"] else "FAILED"))
        for i in range(1, args.repeats + 1):
            res["restarts"].append(restart_once(srv, plan, ing["t_end_ms"], args, i))
        rc, secs = srv.stop()
        res["stop"] = {"exit": rc, "seconds": round(secs, 2)}
        res["data_after_stop"] = dir_size(srv.data)
        summarize(res)
    except Exception as e:  # noqa: BLE001 - reported; the next server runs
        res["error"] = "%s: %s" % (type(e).__name__, e)
        res["server_log_tail"] = srv.log_tail(30)
        log("%s: FAILED: %s" % (name, res["error"]))
        summarize(res)
    finally:
        if srv.alive():
            rc, secs = srv.stop()
            res.setdefault("stop", {"exit": rc, "seconds": round(secs, 2)})
        if args.keep:
            log("%s: kept %s" % (name, base))
        else:
            shutil.rmtree(srv.data, ignore_errors=True)
    return res


def summarize(res):
    rs = res["restarts"]
    if not rs:
        return
    med = {}
    for k in ("ready_s", "peak_rss_mib", "vm_hwm_mib", "rss_sampled_max_mib", "cpu_s_until_ready",
              "server_reported_open_s"):
        xs = [r[k] for r in rs if r.get(k) is not None]
        med[k] = round(statistics.median(xs), 3) if xs else None
    med["all_series_after_restart"] = all(r["verify"]["workload_series"] == res["series"] for r in rs)
    med["all_checks_ok"] = all(r["verify"]["ok"] for r in rs)
    res["median"] = med


# ---- report -------------------------------------------------------------------------
def fmt_int(n):
    return "{:,}".format(int(n)) if isinstance(n, (int, float)) else str(n)


def _f(x, fmt="%.2f"):
    return "—" if x is None else fmt % x


def table(results):
    hdr = ("server", "restart", "series", "samples", "ingest s", "data@kill MiB", "ready s", "peak RSS MiB",
           "CPU s to ready", "open s (log)", "series after", "check")
    rows = []
    for res in results:
        ing = res.get("ingest", {})
        common = (res["server"], fmt_int(res["series"]), fmt_int(res["samples"]), _f(ing.get("wall_s"), "%.1f"))
        for r in res["restarts"]:
            rows.append((common[0], str(r["restart"])) + common[1:] + (
                _f(r["data_at_kill"]["bytes"] / 2**20, "%.1f"), _f(r.get("ready_s"), "%.3f"),
                _f(r.get("peak_rss_mib"), "%.1f"), _f(r.get("cpu_s_until_ready"), "%.2f"),
                _f(r.get("server_reported_open_s"), "%.3f"),
                fmt_int(r["verify"]["workload_series"]), "ok" if r["verify"]["ok"] else "FAILED"))
        if len(res["restarts"]) > 1 and "median" in res:
            m = res["median"]
            rows.append((common[0], "median") + common[1:] + (
                "", _f(m["ready_s"], "%.3f"), _f(m["peak_rss_mib"], "%.1f"), _f(m["cpu_s_until_ready"], "%.2f"),
                _f(m["server_reported_open_s"], "%.3f"), "", "ok" if m["all_checks_ok"] else "FAILED"))
        if not res["restarts"]:
            rows.append((common[0], "—") + common[1:] + ("", "", "", "", "", "", "error"))
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(hdr)]
    lines = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(hdr, widths)))]
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


def ratios(results):
    by = {r["server"]: r.get("median") for r in results}
    tw, pr = by.get("trainwatch"), by.get("prometheus")
    if not tw or not pr:
        return None
    out = {}
    for k in ("ready_s", "peak_rss_mib", "cpu_s_until_ready"):
        if tw.get(k) is not None and pr.get(k):
            out[k] = round(tw[k] / pr[k], 3)
    out["ready_goal"] = 0.25
    out["ready_goal_met"] = out.get("ready_s") is not None and out["ready_s"] <= 0.25
    return out


def machine():
    info = {"cpus": os.cpu_count(), "loadavg": list(os.getloadavg()), "python": sys.version.split()[0]}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                k, v = line.split(":", 1)
                if k in ("MemTotal", "MemAvailable"):
                    info[k + "_mib"] = int(v.split()[0]) // 1024
    except OSError:
        pass
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See bench/restart/README.md.")
    ap.add_argument("--series", type=int, default=1_000_000,
                    help="series, rounded to whole targets of 405 (default 1M)")
    ap.add_argument("--duration", type=int, default=7200, help="seconds of data, at most 7200 (default 7200)")
    ap.add_argument("--interval", type=int, default=15, help="seconds between a series' samples, < 300 (default 15)")
    ap.add_argument("--shards", type=int, default=4, help="sender processes (default 4)")
    ap.add_argument("--batch", type=int, default=5000, help="samples per remote_write request (default 5000)")
    ap.add_argument("--sync-steps", type=int, default=0,
                    help="senders meet at a barrier every N steps (default: ~5 min of data)")
    ap.add_argument("--seed", default="trainwatch", help="workload seed (the peers harness's default)")
    ap.add_argument("--peers", default="prometheus,trainwatch", help="servers, in order (prometheus, trainwatch)")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "release", "src", "app", "trainwatch"))
    ap.add_argument("--no-copy-binary", action="store_true",
                    help="run --binary in place (default: a copy in the workdir, safe from rebuilds during the run)")
    ap.add_argument("--prometheus", default="/usr/bin/prometheus", help="Prometheus binary (Debian's 2.42)")
    ap.add_argument("--trainwatch-args", default="", help="extra `serve` flags (shell-quoted; default none)")
    ap.add_argument("--prometheus-args", default="", help="extra Prometheus flags (shell-quoted; default none)")
    ap.add_argument("--peers-dir", default=os.path.normpath(os.path.join(ROOT, "..", "shared", "bench", "peers")),
                    help="the shared peers harness (workload.py, wire.py); default <repo>/../shared/bench/peers")
    ap.add_argument("--repeats", type=int, default=1, help="crash + restart cycles per server (default 1)")
    ap.add_argument("--ready-timeout", type=float, default=3600.0, help="a restart not ready by then fails, s")
    ap.add_argument("--progress-every", type=float, default=30.0, help="ingest progress line every N s")
    ap.add_argument("--workdir", default=None,
                    help="where to make the run's temp dir (data dirs, logs, binary copy; removed unless --keep)")
    ap.add_argument("--out", default=None, help="JSON of every figure (default /tmp/tw-restart-<time>.json)")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs and server logs")
    args = ap.parse_args()

    if not 1 <= args.interval < 300:
        ap.error("--interval must be 1..299 s (the series count is taken at the data's end with the 5 m lookback)")
    if not args.interval <= args.duration <= 7200:
        ap.error("--duration must be between --interval and 7200 s (all of it must sit in the head, which holds ~3 h)")
    if args.shards < 1 or args.batch < 1 or args.repeats < 1:
        ap.error("--shards, --batch and --repeats must be >= 1")
    args.peers_dir = os.path.abspath(args.peers_dir)
    workload, _ = import_peers(args.peers_dir)
    names = [n.strip() for n in args.peers.split(",") if n.strip()]
    for n in names:
        if n not in ("prometheus", "trainwatch"):
            ap.error("unknown server %r in --peers" % n)
    if "trainwatch" in names and not os.access(args.binary, os.X_OK):
        sys.exit("no trainwatch binary at %s (--binary)" % args.binary)
    if "prometheus" in names and not os.access(args.prometheus, os.X_OK):
        sys.exit("no prometheus binary at %s (--prometheus; apt-get install prometheus)" % args.prometheus)
    plan = make_plan(args, workload.series_per_target(GPUS, CPUS))

    def on_term(sig, frame):
        raise SystemExit("signal %d" % sig)
    signal.signal(signal.SIGTERM, on_term)

    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="tw-restart-", dir=os.path.abspath(args.workdir) if args.workdir else None)
    out_path = args.out or os.path.join(tempfile.gettempdir(), "tw-restart-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    free = shutil.disk_usage(workdir).free
    # ~20 B/sample covers both servers' WAL (+ Prometheus's chunks_head) with room to spare
    need = plan["samples"] * 20
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "argv": sys.argv, "plan": plan, "machine": machine(),
            "workdir": workdir, "peers_dir": args.peers_dir, "free_bytes_at_start": free}
    log("plan: %d targets x %d = %s series x %d steps (%d s @ %d s) = %s samples; %d senders; workdir %s"
        % (plan["targets"], plan["series_per_target"], fmt_int(plan["series"]), plan["steps"], plan["duration_s"],
           plan["interval_s"], fmt_int(plan["samples"]), plan["shards"], workdir))
    if free < need:
        log("warning: %.1f GiB free under %s, a data dir may need up to ~%.1f GiB"
            % (free / 2**30, workdir, need / 2**30))
    results = []
    try:
        if "trainwatch" in names and not args.no_copy_binary:
            # a copy: the binary may be relinked by a build during a long run
            copy = os.path.join(workdir, "trainwatch.bin")
            shutil.copy2(args.binary, copy)
            meta["binary"] = {"path": os.path.abspath(args.binary), "copied_to": copy}
            args.binary = copy
        for n in names:
            results.append(bench_server(n, plan, args, workdir))
            with open(out_path, "w") as f:
                json.dump({"meta": meta, "results": results, "ratio_trainwatch_over_prometheus": ratios(results)},
                          f, indent=1)
    finally:
        if not args.keep:  # our temp dir (inside --workdir when given): data dirs, logs, the binary's copy
            shutil.rmtree(workdir, ignore_errors=True)
    meta["ended"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    rat = ratios(results)
    with open(out_path, "w") as f:
        json.dump({"meta": meta, "results": results, "ratio_trainwatch_over_prometheus": rat}, f, indent=1)
    print(table(results))
    if rat:
        print("trainwatch / prometheus (medians): time to ready %s (goal <= 0.25: %s), peak RSS %s, CPU to ready %s"
              % (_f(rat.get("ready_s"), "%.3fx"), "met" if rat["ready_goal_met"] else "NOT met",
                 _f(rat.get("peak_rss_mib"), "%.3fx"), _f(rat.get("cpu_s_until_ready"), "%.3fx")))
    for r in results:
        if "error" in r:
            print("%s: error: %s" % (r["server"], r["error"]))
    print("JSON: %s" % out_path)
    ok = all("error" not in r and r.get("median", {}).get("all_checks_ok") for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
