"""The background sender: batches logged points, sends them with idempotent
batch ids, spools to disk while the server is unreachable and replays in
order. Standard library only.

Ordering: every outgoing request (batch, alert, finish) gets a sequence
number when it is formed. It is sent at once only while the server answers
and nothing is spooled; otherwise it goes to `<spool dir>/op-<seq>.json`,
and the spool is replayed oldest first. Log-line requests that meet an
unreachable server are spooled the same way (under their batch id, so a
replay stores them once). Only this object writes or removes files in its
spool dir, always under `_lock`, so nothing removes a dir another thread is
writing into; and only one process uses a spool dir at a time (an flock on
`<spool dir>/lock`; a second process with the same run id and rank spools
into `<spool dir>.<pid>-<nonce>` instead).

Disk faults: every spool file is written to a temporary name, fsynced,
renamed, and the dir fsynced. A write that fails (a full disk) never
raises: what it held is counted as dropped (points_dropped, logs_dropped,
dropped) and a warning is printed at most once a minute.
"""
import errno
import json
import math
import os
import secrets
import sys
import threading
import time
import urllib.parse
from collections import deque

try:
    import fcntl
except ImportError:  # no flock (Windows): every process spools into a dir of its own
    fcntl = None

from ._http import Http, Unreachable, error_text, redact, without_userinfo
from .media import Media

OK, RETRY = "ok", "retry"
LOGS_PATH = "/api/v1/logs"
MAX_DEPTH = 64  # config / summary values nested deeper are sent as "..." (the server refuses deep JSON)
SPOOL_WARN_EVERY = 60.0  # seconds between warnings about a spool that cannot be written
# Rich values (images, tables, ...) per batch: a batch stops growing past this many
# bytes of them (one value larger than that goes alone), far below the server's 256 MiB
# body limit, so that one request stays short and a retry resends little.
BATCH_MEDIA_BYTES = 16 << 20


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


def _json_value(v, depth=0):
    """A config or summary value as JSON the API accepts: numbers as in _num
    (NaN and infinities as "NaN", "Inf", "-Inf", never a bare NaN token the
    server would refuse), containers kept, anything else as str."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if depth >= MAX_DEPTH:
        return "..."
    if isinstance(v, dict):
        return {str(k): _json_value(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x, depth + 1) for x in v]
    n = _num(v)
    if n is not None:
        return n
    try:
        return str(v)
    except Exception:  # a str() that fails (or recurses without end)
        return "<%s>" % type(v).__name__


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class Sender:
    def __init__(self, url, run_id, rank, host, spool_dir, register_body,
                 flush_interval=0.5, heartbeat_interval=30.0, batch_points=1000,
                 max_queue_points=20000, max_log_lines=10000, timeout=10.0, warn=None, fallback=True, token=None,
                 batch_media_bytes=BATCH_MEDIA_BYTES):
        self.url = url
        self.run_id = run_id
        self.rank = rank
        self.host = host
        self.spool_dir = spool_dir
        self.register_body = _json_value(register_body)  # an old meta.json may hold a bare NaN
        self.flush_interval = flush_interval
        self.heartbeat_interval = heartbeat_interval
        self.batch_points = batch_points
        self.max_queue_points = max_queue_points
        self.max_log_lines = max_log_lines
        self.batch_media_bytes = batch_media_bytes
        self.media_bytes = 0  # about the JSON size of the rich values queued in points (Run.log bounds it)
        self.http = Http(url, timeout=timeout, token=token)
        self._warn = warn or (lambda msg: sys.__stderr__.write("trainwatch: " + msg + "\n"))
        self.nonce = secrets.token_hex(4)

        # Filled by the training thread(s), drained here.
        self.points = deque()   # (step, ts_ms, {key: value})
        self.ops = deque()      # control requests: (path, body)
        self.lines = deque()    # (time_s, level, message, source)
        self.summary = {}       # pending summary updates
        self.logs_stuck = False  # the last logs request failed (5xx): finish does not wait for them
        self.logs_dropped = 0   # lines not stored (endpoint missing, outage longer than the buffer)
        self.dropped = 0        # requests the server refused for good (4xx), or lost to a full disk
        self.points_dropped = 0  # points lost because the spool could not be written (full disk)
        self.spool_failures = 0  # spool writes that failed
        self.sent_batches = 0
        self.cpu_seconds = 0.0  # CPU time of the sender thread (benchmarks)
        self.on_actions = None  # called with the actions an answer carries (docs/runs-api.md "Actions")

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
        self._alert_seq = 0
        self._warned = set()
        self._spool_warn_next = 0.0
        self._lock_fd = None
        self.locked_out = False  # the spool dir is in use by another process (fallback=False)
        self._open_spool(fallback)

    # ---- spool ----------------------------------------------------------
    def _take_lock(self, d):
        """flock on <d>/lock: the open fd, True without flock, or None when
        another process holds it. Retries when the lock file was replaced
        (removed by its last holder) between open and lock."""
        if fcntl is None:
            return True
        for _ in range(10):
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, "lock")
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    return None
                raise
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except OSError:
                same = False
            if same:
                return fd
            os.close(fd)
        return None

    def _open_spool(self, fallback=True):
        try:
            lock = None if fcntl is None else self._take_lock(self.spool_dir)
            if lock is None and not fallback:
                self.locked_out = True
                return
            if lock is None:
                # Another process spools for this run id and rank (or no flock
                # here): a dir of this process's own, sent by `trainwatch sync`.
                self.spool_dir = "%s.%d-%s" % (self.spool_dir, os.getpid(), self.nonce)
                lock = self._take_lock(self.spool_dir)
                if lock is None:
                    raise OSError("spool dir %s is locked" % self.spool_dir)
            self._lock_fd = None if lock is True else lock
            for n in os.listdir(self.spool_dir):
                if n.endswith(".tmp"):  # a write an earlier process did not finish
                    try:
                        os.remove(os.path.join(self.spool_dir, n))
                    except OSError:
                        pass
            seqs = self._spool_files()
            self._spooled = len(seqs)
            if seqs:
                self._seq = seqs[-1][0] + 1
                self.online = False  # replay what an earlier process left first
            meta = {"url": without_userinfo(self.url), "run_id": self.run_id, "rank": self.rank, "register": self.register_body}
            self._write_file(os.path.join(self.spool_dir, "meta.json"),
                             json.dumps(meta, allow_nan=False).encode())
            self._sync_dir()
        except (OSError, ValueError) as e:  # a full or read-only disk: training goes on unspooled
            self.spool_failures += 1
            self._spool_warn("cannot set up the spool dir %s (%s)" % (self.spool_dir, e))

    def _write_file(self, fn, data):
        """data to fn, durably: a temporary file, fsynced, renamed (the dir is fsynced by the caller)."""
        tmp = fn + ".tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, fn)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise

    def _sync_dir(self):
        """fsync of the spool dir, so that renames into it survive a power loss."""
        fd = os.open(self.spool_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _spool_files(self):
        out = []
        try:
            names = os.listdir(self.spool_dir)
        except OSError:
            return out
        for n in names:
            if n.startswith("op-") and n.endswith(".json"):
                try:
                    out.append((int(n[3:-5]), n))
                except ValueError:
                    pass
        out.sort()
        return out

    def _spool_warn(self, msg):
        now = time.monotonic()
        if now < self._spool_warn_next:
            return
        self._spool_warn_next = now + SPOOL_WARN_EVERY
        self._warn("%s; dropped so far: %d points, %d log lines, %d requests (warned at most once a minute)"
                   % (msg, self.points_dropped, self.logs_dropped, self.dropped))

    def _spool(self, seq, path, body, lines=0, sync=True):
        """Writes one request to the spool; never raises. False when it could
        not be written (it is then counted as dropped)."""
        op = {"path": path, "body": body}
        if lines:
            op["lines"] = lines
        with self._lock:
            fn = os.path.join(self.spool_dir, "op-%016d.json" % seq)
            try:
                data = json.dumps(op, separators=(",", ":"), allow_nan=False).encode()
                self._write_file(fn, data)
                if sync:
                    self._sync_dir()
            except (OSError, ValueError, TypeError) as e:
                if os.path.exists(fn):  # written and renamed; only the dir fsync failed
                    self._spooled += 1
                    self.spool_failures += 1
                    self._spool_warn("spool dir %s: fsync failed (%s)" % (self.spool_dir, e))
                    return True
                self.spool_failures += 1
                if path.startswith(LOGS_PATH):
                    self.logs_dropped += lines
                elif isinstance(body, dict) and path.endswith("/batches"):
                    self.points_dropped += len(body.get("points") or ())
                else:
                    self.dropped += 1
                self._spool_warn("cannot write the spool (%s): %s" % (fn, e))
                return False
            self._spooled += 1
            return True

    def _spool_many(self, items):
        """Spools (seq, path, body[, lines]) items with one dir fsync at the end."""
        if not items:
            return
        with self._lock:
            wrote = False
            for it in items:
                wrote = self._spool(*it[:3], lines=it[3] if len(it) > 3 else 0, sync=False) or wrote
            if wrote:
                try:
                    self._sync_dir()
                except OSError as e:
                    self.spool_failures += 1
                    self._spool_warn("spool dir %s: fsync failed (%s)" % (self.spool_dir, e))

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
        taken = 0  # points taken whole (the last one may be split: see below)
        media = 0  # bytes of rich values in this batch
        while q and len(pts) < max_points:
            step, ts, vals = q[0]
            values = {}
            rest = None
            for k, v in vals.items():
                n = _num(v)
                if n is None and isinstance(v, Media):
                    if media and media + v.nbytes > self.batch_media_bytes:
                        # The batch is full of media: the rest of this point (same step and
                        # ts) is the head of the queue for the next batch.
                        keys = list(vals)
                        rest = {kk: vals[kk] for kk in keys[keys.index(k):]}
                        break
                    media += v.nbytes
                    self.media_bytes -= v.nbytes
                    values[k] = v.to_json()
                    continue
                if n is None:
                    self._warn_once("value:" + k, "key %r: value %r is not a number; not sent" % (k, v))
                    continue
                values[k] = n
            if rest is not None:
                q[0] = (step, ts, rest)
                if values:
                    pts.append({"step": step, "ts": ts, "values": values})
                break
            q.popleft()
            taken += 1
            pts.append({"step": step, "ts": ts, "values": values})
        if quota is not None:
            quota[0] -= taken
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
        queue is over its bound, so memory stays bounded whatever the outage;
        on a full disk they are dropped and counted). Never raises."""
        with self._lock:
            items = []
            while self.points:
                items.append(self._form(self.batch_points))
            self._spool_many(items)

    def _drain_to_spool(self):
        """Everything queued (points, summary, ops, log lines) to the spool."""
        with self._lock:
            items = []
            while True:
                item = self._form(self.batch_points)
                if item is None:
                    break
                items.append(item)
            items.extend(self._form_log_ops())
            self._spool_many(items)

    def new_alert_id(self):
        with self._lock:
            self._alert_seq += 1
            return "%s.%d.%s.A%d" % (self.run_id, self.rank, self.nonce, self._alert_seq)

    # ---- sending ----------------------------------------------------------
    def _send(self, path, body, lines=0):
        """OK (stored, or refused for good and counted), or RETRY."""
        if path.startswith(LOGS_PATH):
            return self._send_log_request(path, body, lines, spooled=True)
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
        except (ValueError, TypeError) as e:  # a body JSON cannot hold: refused for good, never retried
            self.dropped += 1
            self._warn("%s not sent: %s" % (path, e))
            return OK
        if 200 <= status < 300:
            self._last_contact = time.monotonic()
            if isinstance(doc, dict) and isinstance(doc.get("data"), dict):
                for r in doc["data"].get("rejected") or []:
                    self._warn_once("rej:%s" % r.get("key"), "server rejected key %r: %s" % (r.get("key"), r.get("error")))
                self._actions(doc["data"])
            if path.endswith("/batches"):
                self.sent_batches += 1
            return OK
        if status == 404:
            self.registered = False  # the server does not know the run (yet): register, then retry
            self._went_offline("run unknown to the server; registering again")
            return RETRY
        # 401: credentials changed on the server mid-run; kept until they work again.
        if status in (401, 408, 425, 429) or status >= 500:
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
            self._warn("server %s unreachable (%s); spooling to %s" % (redact(self.url), why, self.spool_dir))
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
                if isinstance(op, dict) and isinstance(op.get("path"), str):
                    body = op.get("body")
                    if isinstance(body, (dict, list)):
                        body = _json_value(body)  # a bare NaN from an older client: as "NaN"
                    if self._send(op["path"], body, op.get("lines") or 0) == RETRY:
                        return False
                elif op is not None:
                    self._warn("spool file %s is not a request; skipped" % fn)
                with self._lock:
                    try:
                        os.remove(fn)
                    except FileNotFoundError:
                        pass
                    self._spooled -= 1
        if not self.online:
            self._warn("server %s reachable again; spool replayed" % redact(self.url))
        self.online = True
        self._backoff = 0.0
        return True

    def _cycle(self):
        now = time.monotonic()
        if not self.online and now < self._next_retry:
            # Offline: keep draining the queues to disk so memory stays bounded.
            self._drain_to_spool()
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
        self._drain_to_spool()

    def _heartbeat(self):
        if not self.registered and not self._register():
            return
        try:
            status, doc = self.http.request("POST", "/api/v1/runs/%s/heartbeat" % self.run_id, {"rank": self.rank})
        except Unreachable as e:
            self._went_offline(str(e))
            return
        if 200 <= status < 300:
            self._last_contact = time.monotonic()
            if isinstance(doc, dict) and isinstance(doc.get("data"), dict):
                self._actions(doc["data"])
        elif status == 404:
            self.registered = False

    def _actions(self, data):
        actions = data.get("actions")
        if actions and self.on_actions is not None:
            self.on_actions([a for a in actions if isinstance(a, dict)])

    def _logs_absent(self):
        """True (and the queued lines dropped, counted) while the server has no logs endpoint."""
        if time.monotonic() >= self._logs_absent_until:
            return False
        n = len(self.lines) + sum(b[2] for b in self.log_batches)
        self.lines.clear()  # no logs endpoint: drop (counted) rather than hold them
        self.log_batches.clear()
        self.logs_dropped += n
        return True

    def _form_log_batches(self, max_lines=2000):
        """Forms requests from up to max_lines queued lines, each with its batch
        id, once: a retry (a timeout after the server stored it, or a replay
        from the spool) is recognized and stored once."""
        chunk = [self.lines.popleft() for _ in range(min(max_lines, len(self.lines)))]
        by_source = {}
        for t, level, msg, source in chunk:
            line = {"time": t, "message": msg}
            if level is not None:  # none: the server infers it from the message
                line["level"] = level
            by_source.setdefault(source, []).append(json.dumps(line, separators=(",", ":")))
        for source, rows in by_source.items():
            self._log_seq += 1
            q = urllib.parse.urlencode({
                "project": self.register_body.get("project", ""), "run": self.name or self.run_id,
                "rank": self.rank, "host": self.host, "source": source,
                "batch_id": "%s.%d.%s.L%d" % (self.run_id, self.rank, self.nonce, self._log_seq)})
            self.log_batches.append((q, "\n".join(rows) + "\n", len(rows)))

    def _form_log_ops(self):
        """Every queued line and formed log request as spool items (seq, path, body, lines)."""
        if self.disabled or (not self.lines and not self.log_batches) or self._logs_absent():
            return []
        while self.lines:
            self._form_log_batches()
        out = []
        while self.log_batches:
            q, body, n = self.log_batches.popleft()
            seq = self._seq
            self._seq += 1
            out.append((seq, LOGS_PATH + "?" + q, body, n))
        return out

    def _send_log_request(self, path, body, n, spooled=False):
        """POST of one formed log request: OK (stored, or dropped and counted), or RETRY.
        Sets logs_stuck on a 5xx."""
        if self.disabled:
            self.logs_dropped += n
            return OK
        try:
            status, doc = self.http.request("POST", path, body, content_type="application/x-ndjson")
        except Unreachable as e:
            self._went_offline(str(e))
            return RETRY
        if status >= 500 or status in (408, 429):
            self.logs_stuck = True
            if spooled:
                self._went_offline(error_text(status, doc))  # back off as for any spooled request
            return RETRY
        if not 200 <= status < 300:
            # 404: no log store on this server; other 4xx: refused. Dropped, counted.
            # (503, over the server's memory bound, is retried above.)
            self.logs_dropped += n
            self._warn_once("logs%d" % status, "log lines not stored (%s); dropping them (counted in run.logs_dropped)"
                            % error_text(status, doc))
            if status == 404:
                self._logs_absent_until = time.monotonic() + 30
        else:
            self._last_contact = time.monotonic()
        self.logs_stuck = False
        return OK

    def _send_logs(self):
        if (not self.lines and not self.log_batches) or self.disabled or self._logs_absent():
            return
        if not self.online:
            with self._lock:
                self._spool_many(self._form_log_ops())
            return
        if not self.log_batches:
            self._form_log_batches()
        while self.log_batches:
            q, body, n = self.log_batches[0]
            if self._send_log_request(LOGS_PATH + "?" + q, body, n) == RETRY:
                if not self.online:
                    # Unreachable: to the spool, replayed in order under the same batch ids.
                    with self._lock:
                        self._spool_many(self._form_log_ops())
                return  # 5xx: kept in memory (bounded) and sent later under the same batch id
            self.log_batches.popleft()

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
            if self.points or self.ops or self.summary or self.lines or self.log_batches:
                self.spill_all()
            left = self._spooled
        if left == 0:
            self.remove_spool_dir()
        else:
            self._release_lock()  # what is left is for the next process (or `sync`)
        return left == 0

    def spill_all(self):
        """Everything still queued (log lines too) to the spool; never raises."""
        self._drain_to_spool()

    def remove_spool_dir(self):
        """Called only once the thread has ended: removes meta.json, the lock
        and the dir if empty, then releases the lock."""
        if self.locked_out:
            return  # another process's dir
        with self._lock:
            if self._spool_files():
                self._release_lock()
                return
            for name in ("meta.json", "lock"):  # the lock file while still held (see _take_lock)
                try:
                    os.remove(os.path.join(self.spool_dir, name))
                except OSError:
                    pass
            try:
                os.rmdir(self.spool_dir)
            except OSError:
                pass
            self._release_lock()

    def _release_lock(self):
        if self._lock_fd is not None:
            try:
                os.close(self._lock_fd)
            except OSError:
                pass
            self._lock_fd = None
