"""The background sender: batches logged points, sends them with idempotent
batch ids, spools to disk while the server is unreachable and replays in
order. Standard library only.

Ordering: every outgoing request (batch, alert, finish) gets a sequence
number when it is formed. It is sent at once only while the server answers
and nothing is spooled; otherwise it goes to `<spool dir>/op-<seq>.json`,
and the spool is replayed oldest first. Only this object writes or removes
files in its spool dir, always under `_lock`, so nothing removes a dir
another thread is writing into.
"""
import json
import math
import os
import secrets
import sys
import threading
import time
import urllib.parse
from collections import deque

from ._http import Http, Unreachable, error_text

OK, RETRY = "ok", "retry"


def _num(v):
    """A logged value as JSON: a number, "NaN", "Inf" or "-Inf"; None if not numeric."""
    t = type(v)
    if t is not float and t is not int:
        if hasattr(v, "item"):  # torch / numpy scalars
            try:
                v = v.item()
            except (ValueError, RuntimeError):
                return None
        try:
            v = float(v)
        except (TypeError, ValueError):
            return None
    if t is int:
        return v
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Inf" if v > 0 else "-Inf"
    return v


def _json_value(v):
    """A summary value as JSON (numbers as in _num, containers kept, the rest as str)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    n = _num(v)
    return n if n is not None else str(v)


class Sender:
    def __init__(self, url, run_id, rank, host, spool_dir, register_body,
                 flush_interval=0.5, heartbeat_interval=30.0, batch_points=1000,
                 max_queue_points=20000, max_log_lines=10000, timeout=10.0, warn=None):
        self.url = url
        self.run_id = run_id
        self.rank = rank
        self.host = host
        self.spool_dir = spool_dir
        self.register_body = register_body
        self.flush_interval = flush_interval
        self.heartbeat_interval = heartbeat_interval
        self.batch_points = batch_points
        self.max_queue_points = max_queue_points
        self.max_log_lines = max_log_lines
        self.http = Http(url, timeout=timeout)
        self._warn = warn or (lambda msg: sys.__stderr__.write("trainwatch: " + msg + "\n"))
        self.nonce = secrets.token_hex(4)

        # Filled by the training thread(s), drained here.
        self.points = deque()   # (step, ts_ms, {key: value})
        self.ops = deque()      # control requests: (path, body)
        self.lines = deque()    # (time_s, level, message, source)
        self.summary = {}       # pending summary updates
        self.logs_stuck = False  # the last logs request failed (5xx): finish does not wait for them
        self.logs_dropped = 0   # lines not stored (endpoint missing, outage longer than the buffer)
        self.dropped = 0        # requests the server refused for good (4xx)
        self.sent_batches = 0
        self.cpu_seconds = 0.0  # CPU time of the sender thread (benchmarks)

        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = None
        self._deadline = float("inf")
        self._seq = 0
        self._spooled = 0
        self.registered = False
        self.disabled = False
        self.online = True
        self.name = register_body.get("name")
        self._backoff = 0.0
        self._next_retry = 0.0
        self._last_contact = 0.0
        self._logs_absent_until = 0.0
        self.log_batches = deque()  # formed requests not yet acknowledged: (query, body, lines)
        self._log_seq = 0
        self._warned = set()
        self._open_spool()

    # ---- spool ----------------------------------------------------------
    def _open_spool(self):
        os.makedirs(self.spool_dir, exist_ok=True)
        seqs = self._spool_files()
        self._spooled = len(seqs)
        if seqs:
            self._seq = seqs[-1][0] + 1
            self.online = False  # replay what an earlier process left first
        with open(os.path.join(self.spool_dir, "meta.json.tmp"), "w") as f:
            json.dump({"url": self.url, "run_id": self.run_id, "rank": self.rank,
                       "register": self.register_body}, f)
        os.replace(os.path.join(self.spool_dir, "meta.json.tmp"), os.path.join(self.spool_dir, "meta.json"))

    def _spool_files(self):
        out = []
        for n in os.listdir(self.spool_dir):
            if n.startswith("op-") and n.endswith(".json"):
                try:
                    out.append((int(n[3:-5]), n))
                except ValueError:
                    pass
        out.sort()
        return out

    def _spool(self, seq, path, body):
        with self._lock:
            fn = os.path.join(self.spool_dir, "op-%016d.json" % seq)
            with open(fn + ".tmp", "w") as f:
                json.dump({"path": path, "body": body}, f, separators=(",", ":"))
            os.replace(fn + ".tmp", fn)
            self._spooled += 1

    @property
    def spooled(self):
        return self._spooled

    # ---- forming requests ----------------------------------------------
    def _form(self, max_points, quota=None):
        """Takes the next request off the queues: (seq, path, body) or None.

        quota, when given, is [points, ops] still to take this cycle (see
        _cycle) and is decremented; None takes whatever is queued.
        Called with _lock held so that sequence numbers follow queue order.
        """
        pts = []
        q = self.points
        if quota is not None:
            max_points = min(max_points, quota[0])
        while q and len(pts) < max_points:
            step, ts, vals = q.popleft()
            values = {}
            for k, v in vals.items():
                n = _num(v)
                if n is None:
                    self._warn_once("value:" + k, "key %r: value %r is not a number; not sent" % (k, v))
                    continue
                values[k] = n
            pts.append({"step": step, "ts": ts, "values": values})
        if quota is not None:
            quota[0] -= len(pts)
        summary = None
        if self.summary:
            summary, self.summary = self.summary, {}
        if pts or summary:
            seq = self._seq
            self._seq += 1
            body = {"batch_id": "%s.%d.%s.%d" % (self.run_id, self.rank, self.nonce, seq),
                    "rank": self.rank, "host": self.host, "points": pts}
            if summary:
                body["summary"] = {k: _json_value(v) for k, v in summary.items()}
            return seq, "/api/v1/runs/%s/batches" % self.run_id, body
        if self.ops and (quota is None or quota[1] > 0 and (quota[0] <= 0 or not q)):
            if quota is not None:
                quota[1] -= 1
            path, body = self.ops.popleft()
            seq = self._seq
            self._seq += 1
            return seq, path, body
        return None

    def spill(self):
        """Writes every queued point to the spool (log() calls this when the
        queue is over its bound, so memory stays bounded whatever the outage)."""
        with self._lock:
            while self.points:
                seq, path, body = self._form(self.batch_points)
                self._spool(seq, path, body)

    # ---- sending ----------------------------------------------------------
    def _send(self, path, body):
        """OK (stored, or refused for good and counted), or RETRY."""
        if self.disabled:
            self.dropped += 1
            return OK
        if not self.registered and not self._register():
            return RETRY
        try:
            status, doc = self.http.request("POST", path, body)
        except Unreachable as e:
            self._went_offline(str(e))
            return RETRY
        if 200 <= status < 300:
            self._last_contact = time.monotonic()
            if isinstance(doc, dict) and isinstance(doc.get("data"), dict):
                for r in doc["data"].get("rejected") or []:
                    self._warn_once("rej:%s" % r.get("key"), "server rejected key %r: %s" % (r.get("key"), r.get("error")))
            if path.endswith("/batches"):
                self.sent_batches += 1
            return OK
        if status == 404:
            self.registered = False  # the server does not know the run (yet): register, then retry
            self._went_offline("run unknown to the server; registering again")
            return RETRY
        if status in (408, 425, 429) or status >= 500:
            self._went_offline(error_text(status, doc))
            return RETRY
        self.dropped += 1
        self._warn("%s refused: %s" % (path, error_text(status, doc)))
        return OK

    def _register(self):
        try:
            status, doc = self.http.request("POST", "/api/v1/runs", self.register_body)
        except Unreachable as e:
            self._went_offline(str(e))
            return False
        if status == 200 and isinstance(doc, dict):
            self.registered = True
            self._last_contact = time.monotonic()
            self.name = (doc.get("data") or {}).get("name", self.name)
            return True
        if status in (404, 408, 425, 429) or status >= 500:
            self._went_offline(error_text(status, doc))
            return False
        self.disabled = True
        self._warn("registering run %s refused: %s; nothing of this run is sent" % (self.run_id, error_text(status, doc)))
        return False

    def register_now(self):
        """The first registration, from init(): the server's answer (data) or None if unreachable.
        Raises ValueError when the server refuses the run."""
        ok = self._register()
        if self.disabled:
            raise ValueError("trainwatch: the server refused run %s" % self.run_id)
        return ok

    def _went_offline(self, why):
        if self.online:
            self._warn("server %s unreachable (%s); spooling to %s" % (self.url, why, self.spool_dir))
        self.online = False
        self._backoff = min(5.0, max(0.2, self._backoff * 2))
        self._next_retry = time.monotonic() + self._backoff

    def _warn_once(self, key, msg):
        if key not in self._warned:
            self._warned.add(key)
            self._warn(msg)

    def _replay(self):
        """Sends the spool oldest first; stops at the first failure."""
        while True:
            with self._lock:
                files = self._spool_files()
            if not files:
                break
            for _, name in files:
                fn = os.path.join(self.spool_dir, name)
                try:
                    with open(fn) as f:
                        op = json.load(f)
                except (OSError, ValueError) as e:
                    self._warn("spool file %s unreadable (%s); skipped" % (fn, e))
                    op = None
                if op is not None and self._send(op["path"], op["body"]) == RETRY:
                    return False
                with self._lock:
                    os.remove(fn)
                    self._spooled -= 1
        if not self.online:
            self._warn("server %s reachable again; spool replayed" % self.url)
        self.online = True
        self._backoff = 0.0
        return True

    def _cycle(self):
        now = time.monotonic()
        if not self.online and now < self._next_retry:
            # Offline: keep draining the queues to disk so memory stays bounded.
            with self._lock:
                while True:
                    item = self._form(self.batch_points)
                    if item is None:
                        break
                    self._spool(*item)
            return
        if self._spooled and not self._replay():
            return self._cycle_offline_drain()
        # Only what was queued when the cycle began: points logged while a
        # request is in flight wait for the next cycle instead of going out
        # as a stream of tiny batches, one per round trip (each costs this
        # thread ~0.5 ms of CPU and the training thread GIL hand-offs).
        # Ops are counted first: every point logged before an op is then in
        # the points counted, so an op still goes after them.
        n_ops = len(self.ops)
        quota = [len(self.points), n_ops]  # points, ops
        while True:
            with self._lock:
                item = self._form(self.batch_points, quota)
                if item is None:
                    break
                if self._spooled or not self.online:
                    self._spool(*item)
                    continue
            seq, path, body = item
            if self._send(path, body) == RETRY:
                self._spool(seq, path, body)
                return self._cycle_offline_drain()
        if self._spooled and self.online:
            self._replay()
        self._send_logs()
        if self.online and not self.disabled and time.monotonic() - self._last_contact >= self.heartbeat_interval:
            self._heartbeat()

    def _cycle_offline_drain(self):
        with self._lock:
            while True:
                item = self._form(self.batch_points)
                if item is None:
                    break
                self._spool(*item)

    def _heartbeat(self):
        if not self.registered and not self._register():
            return
        try:
            status, doc = self.http.request("POST", "/api/v1/runs/%s/heartbeat" % self.run_id, {})
        except Unreachable as e:
            self._went_offline(str(e))
            return
        if 200 <= status < 300:
            self._last_contact = time.monotonic()
        elif status == 404:
            self.registered = False

    def _send_logs(self):
        if (not self.lines and not self.log_batches) or self.disabled:
            return
        if time.monotonic() < self._logs_absent_until:
            n = len(self.lines) + sum(b[2] for b in self.log_batches)
            self.lines.clear()  # no logs endpoint: drop (counted) rather than hold them
            self.log_batches.clear()
            self.logs_dropped += n
            return
        if not self.log_batches:
            # Form the requests once, each with its batch id, so that a retry
            # (a timeout after the server stored it) is recognized and stored once.
            chunk = [self.lines.popleft() for _ in range(min(2000, len(self.lines)))]
            by_source = {}
            for t, level, msg, source in chunk:
                by_source.setdefault(source, []).append(
                    json.dumps({"time": t, "level": level, "message": msg}, separators=(",", ":")))
            for source, rows in by_source.items():
                self._log_seq += 1
                q = urllib.parse.urlencode({
                    "project": self.register_body.get("project", ""), "run": self.name or self.run_id,
                    "rank": self.rank, "host": self.host, "source": source,
                    "batch_id": "%s.%d.%s.L%d" % (self.run_id, self.rank, self.nonce, self._log_seq)})
                self.log_batches.append((q, "\n".join(rows) + "\n", len(rows)))
        while self.log_batches:
            q, body, n = self.log_batches[0]
            try:
                status, doc = self.http.request("POST", "/api/v1/logs?" + q, body, content_type="application/x-ndjson")
            except Unreachable as e:
                self._went_offline(str(e))
                return  # kept in memory (bounded) and sent later under the same batch id
            if status >= 500 and status != 503 or status in (408, 429):
                self.logs_stuck = True
                return  # try again later
            if not 200 <= status < 300:
                # 404/503: no logs endpoint on this server; 4xx: refused. Dropped, counted.
                self.logs_dropped += n
                self._warn_once("logs%d" % status, "log lines not stored (%s); dropping them (counted in run.logs_dropped)"
                                % error_text(status, doc))
                if status in (404, 503):
                    self._logs_absent_until = time.monotonic() + 30
            self.log_batches.popleft()
        self.logs_stuck = False

    def add_line(self, t, level, message, source):
        if len(self.lines) >= self.max_log_lines:
            self.logs_dropped += 1
            return
        self.lines.append((t, level, message, source))

    # ---- thread -------------------------------------------------------------
    def start(self):
        self._thread = threading.Thread(target=self._loop, name="trainwatch-sender", daemon=True)
        self._thread.start()

    def wake(self):
        self._wake.set()

    def _idle(self):
        return not self.points and not self.ops and not self.summary and not self._spooled

    def _loop(self):
        while True:
            stopping = self._stop.is_set()
            t0 = time.thread_time()
            try:
                self._cycle()
            except Exception as e:  # never let the sender die: training goes on
                self._warn_once("exc:" + repr(e), "sender error: %r" % (e,))
            self.cpu_seconds += time.thread_time() - t0
            if stopping and self._idle() and (not (self.lines or self.log_batches) or not self.online or self.disabled or self.logs_stuck):
                break
            if stopping and time.monotonic() >= self._deadline:
                break
            if len(self.points) >= self.batch_points and self.online:
                continue
            wait = self.flush_interval
            if not self.online:
                wait = max(0.05, min(wait, self._next_retry - time.monotonic()))
            self._wake.wait(wait)
            self._wake.clear()
        self.http.close()

    def stop(self, timeout):
        """Sends everything queued (waiting up to `timeout` seconds for the
        server), then ends the thread. Returns True when nothing is left."""
        self._deadline = time.monotonic() + timeout
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout + 15)
        with self._lock:
            if self.points or self.ops or self.summary:
                self.spill_all()
            left = self._spooled
        if left == 0:
            self.remove_spool_dir()
        return left == 0

    def spill_all(self):
        with self._lock:
            while True:
                item = self._form(self.batch_points)
                if item is None:
                    break
                self._spool(*item)

    def remove_spool_dir(self):
        """Called only once the thread has ended: removes meta.json and the dir if empty."""
        with self._lock:
            if self._spool_files():
                return
            try:
                os.remove(os.path.join(self.spool_dir, "meta.json"))
                os.rmdir(self.spool_dir)
            except OSError:
                pass
