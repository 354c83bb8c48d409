"""trainwatch.init() and Run: the user-facing side of the client."""
import atexit
import hashlib
import logging
import os
import queue
import re
import secrets
import socket
import subprocess
import sys
import threading
import time

from . import media as _media
from ._capture import Tee
from ._http import Http, Unreachable, error_text, redact, without_userinfo
from ._sender import Sender, _json_value
from .api import ApiError
from .artifacts import directory_manifest, file_digest, manifest_digest
from .media import Media

_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_LEVELS = ("info", "warning", "error")

# Logged value types that are never rich values: log() skips its media accounting for them.
_PLAIN = frozenset((float, int, bool))
MAX_UPLOAD_BYTES = 256 << 20  # the server's body limit: larger artifacts stay referenced

_active = []          # runs not yet finished, for the exit hooks
_hooks_installed = False
_hooks_lock = threading.Lock()
current = None        # the run of the last init(), for trainwatch.log()/finish()


def _env_int(*names):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            try:
                return int(v)
            except ValueError:
                pass
    return None


# Batch schedulers' job ids: the same on every node of one job, different between jobs.
_JOB_ID_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID", "COBALT_JOBID")


def _process_start(pid):
    """The boot id and start time of process `pid` (Linux), so that a pid the
    kernel reuses later names another process; "" where /proc is missing."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            start = f.read().rsplit(")", 1)[1].split()[19]  # field 22, starttime
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() + "/" + start
    except (OSError, IndexError):
        return ""


def _job_key():
    """What every rank of one distributed launch sees alike and two launches
    do not (see README.md, "Distributed"): (kind, parts)."""
    env = os.environ.get
    master = [env("MASTER_ADDR", ""), env("MASTER_PORT", "")]
    rdzv = env("TORCHELASTIC_RUN_ID", "")
    if rdzv and rdzv != "none":  # torchrun --rdzv-id (or --standalone, a fresh uuid per launch)
        return "rdzv", [rdzv]
    for name in _JOB_ID_VARS:
        if env(name):
            return "job", ["%s=%s" % (name, env(name)), env("SLURM_STEP_ID", "")] + master
    if env("JOB_ID") and env("SGE_ROOT"):  # Grid Engine
        return "job", ["SGE=" + env("JOB_ID")] + master
    if env("LOCAL_WORLD_SIZE") == env("WORLD_SIZE"):
        # One node: the ranks are children of one launcher (torchrun's agent).
        ppid = os.getppid()
        return "local", [socket.gethostname(), str(ppid), _process_start(ppid)] + master
    return "master", master


def _distributed_id(project, name):
    """A run id every rank of one torchrun launch computes alike (no
    communication), and two launches do not: from the rendezvous id, else
    the scheduler's job id, else (one node) the launcher process."""
    kind, parts = _job_key()
    if kind == "master" and (_env_int("RANK") or 0) == 0:
        sys.__stderr__.write(
            "trainwatch: no rendezvous id (TORCHELASTIC_RUN_ID is %r) and no scheduler job id: the run id "
            "comes from MASTER_ADDR/MASTER_PORT only, so a later job with the same ones resumes this run; "
            "pass torchrun --rdzv-id, TRAINWATCH_RUN_ID or init(id=...) to tell jobs apart\n"
            % os.environ.get("TORCHELASTIC_RUN_ID", ""))
    return hashlib.sha256("\0".join([project, name or "", kind] + parts).encode()).hexdigest()[:16]


def _git_commit():
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, timeout=2,
                             cwd=os.path.dirname(os.path.abspath(sys.argv[0] or ".")) or ".")
        if out.returncode == 0:
            return out.stdout.decode().strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def _jsonable(obj):
    """config as JSON: dicts, argparse.Namespace, dataclasses; anything else as str."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        if hasattr(obj, "__dataclass_fields__"):
            import dataclasses
            obj = dataclasses.asdict(obj)
        elif hasattr(obj, "__dict__"):
            obj = vars(obj)
        else:
            raise TypeError("trainwatch.init: config must be a dict (or an object with attributes), not %s"
                            % type(obj).__name__)
    return _json_value(obj)  # NaN and infinities as "NaN", "Inf", "-Inf", the rest as str


class Summary(dict):
    """run.summary: a dict whose updates are sent with the next batch."""

    def __init__(self, run):
        super().__init__()
        self._run = run

    def __setitem__(self, key, value):
        if isinstance(value, Media):
            raise TypeError("trainwatch: run.summary[%r]: a %s is not kept in the summary; log it with run.log()"
                            % (key, type(value).__name__))
        super().__setitem__(key, value)
        with self._run._sender._lock:
            self._run._sender.summary[str(key)] = value

    def update(self, *args, **kw):
        for k, v in dict(*args, **kw).items():
            self[k] = v


PHASE_PREFIX = "step_phase/"  # the key of a timed phase of the step


class _PhaseTimer:
    """What Run.timer() returns: a context manager that adds its wall time to the phase."""

    __slots__ = ("_run", "_key", "_t0")

    def __init__(self, run, key):
        self._run = run
        self._key = key
        self._t0 = None

    def __enter__(self):
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._run._add_phase(self._key, time.perf_counter() - self._t0)
        return False


class Run:
    """One training run (one rank of it). Create with trainwatch.init()."""

    def __init__(self, project, name=None, config=None, tags=None, total_steps=None, url=None, id=None,
                 capture_output=True, spool_dir=None, heartbeat_interval=30.0, flush_interval=0.5,
                 rank=None, world_size=None, host=None, finish_timeout=60.0, install_hooks=True,
                 max_queue_points=20000, timeout=10.0, token=None, max_queue_bytes=256 << 20):
        self.project = project or os.environ.get("TRAINWATCH_PROJECT") or "default"
        self.url = (url or os.environ.get("TRAINWATCH_URL") or "http://127.0.0.1:9800").rstrip("/")
        env_rank = _env_int("RANK")
        self.rank = rank if rank is not None else (env_rank if env_rank is not None else 0)
        ws = world_size if world_size is not None else _env_int("WORLD_SIZE")
        self.world_size = ws or 1
        self.local_rank = _env_int("LOCAL_RANK")
        self.host = host or socket.gethostname()
        if id is None:
            id = os.environ.get("TRAINWATCH_RUN_ID")
        if id is None:
            id = _distributed_id(self.project, name) if self.world_size > 1 else secrets.token_hex(8)
        if not _ID_RE.match(id) or id == "metrics":
            raise ValueError("trainwatch.init: id %r: expected 1-64 characters of [A-Za-z0-9_.-], not \"metrics\"" % id)
        self.id = id
        if name is None and self.world_size > 1:
            script = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.splitext(os.path.basename(sys.argv[0] or ""))[0])
            name = "%s-%s" % (script.strip("-_.") or "run", self.id[:8])  # the same on every rank
        elif name is None:
            script = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.splitext(os.path.basename(sys.argv[0] or ""))[0])
            name = "%s-%s" % (script.strip("-_.") or "run", time.strftime("%Y%m%d-%H%M%S"))
        self.name = name
        self.config = _jsonable(config)
        self.total_steps = total_steps
        self.finish_timeout = finish_timeout
        self.status = "running"
        self._lock = threading.Lock()
        self._step = -1
        self._phases = {}  # step_phase/<phase> -> seconds since the last log() of a later step
        self._action_handlers = {}  # action name (or "*") -> fn(action)
        self._actions_seen = set()  # ids of actions taken (answers repeat them until acknowledged)
        self._action_queue = None   # queue.Queue for the action thread, started on the first action
        self.actions = []           # every action received: {"id", "action", "alert", "labels", "status", "result"}
        self._finished = False
        self._capture = None
        self._max_queue = max_queue_points
        self._max_queue_bytes = max_queue_bytes
        self._timeout = timeout
        self._token = token
        self._http = None  # the artifact calls' connection (the sender's is its thread's own)
        self._http_lock = threading.Lock()
        self._finish_hooks = []  # fn(timeout) called first by finish() (watch(): its last histogram)

        body = {"id": self.id, "project": self.project, "rank": self.rank, "host": self.host, "pid": os.getpid(),
                "world_size": self.world_size, "name": name}  # the name: whichever rank creates the run
        if self.rank == 0:
            body.update({"config": self.config, "tags": list(tags or []),
                         "command": " ".join([os.path.basename(sys.executable)] + sys.argv)})
            if total_steps is not None:
                body["total_steps"] = int(total_steps)
            commit = _git_commit()
            if commit:
                body["git_commit"] = commit
        root = spool_dir or os.environ.get("TRAINWATCH_SPOOL") or os.path.join(
            os.path.expanduser("~"), ".cache", "trainwatch", "spool")
        self._sender = Sender(self.url, self.id, self.rank, self.host,
                              os.path.join(root, "%s.r%d" % (self.id, self.rank)), body,
                              flush_interval=flush_interval, heartbeat_interval=heartbeat_interval,
                              max_queue_points=max_queue_points, timeout=timeout, token=token)
        # <id>.r<rank>, or <id>.r<rank>.<pid>-<nonce> while another process holds that one
        self.spool_dir = self._sender.spool_dir
        self._points = self._sender.points
        self._sender.on_actions = self._receive_actions
        self.summary = Summary(self)
        self._sender.register_now()  # raises on a refused run; unreachable: registers later
        if self._sender.name:
            self.name = self._sender.name
        self._sender.start()
        if capture_output:
            self._capture = Tee.install(self._sender.add_line)
        with _hooks_lock:
            _active.append(self)
        if install_hooks:
            _install_hooks()

    # ---- logging --------------------------------------------------------------
    def log(self, values, step=None):
        """Queues {key: number} at `step` (default: the previous step + 1) and
        returns at once; a background thread sends it. The point carries
        the wall-clock time of this call (unix ms; points may share one).
        A value may also be a rich value: trainwatch.Histogram, Image, Text
        or Table (trainwatch.media), kept by step like a number."""
        t = time.time_ns() // 1000000
        values = dict(values)
        media = 0
        if _media.created and not _PLAIN.issuperset(map(type, values.values())):
            for v in values.values():
                if isinstance(v, Media):
                    media += v.nbytes
            if media:
                with self._sender._lock:
                    self._sender.media_bytes += media
        with self._lock:
            if step is None:
                step = self._step + 1
            elif type(step) is not int:
                step = int(step)
            if self._phases and step > self._step:
                # Phase time since the previous log(), per step since it.
                n = step - self._step if self._step >= 0 else 1
                for key, seconds in self._phases.items():
                    values.setdefault(key, seconds / n)
                self._phases.clear()
            self._step = step
            self._points.append((step, t, values))
        if len(self._points) > self._max_queue or (media and self._sender.media_bytes > self._max_queue_bytes):
            self._sender.spill()

    # ---- actions on alerts ------------------------------------------------------
    def on_action(self, name, fn):
        """Registers fn(action) for the action `name` ("checkpoint", "stop", any
        name a rule's `action` annotation gives; "*" for any other). When an
        alert about this run fires and its rule names an action, the server
        sends it with its answers to this run's batches and heartbeats; fn runs
        on the client's action thread (not the training thread: set a flag the
        loop checks, or do thread-safe work) with the action as a dict (id,
        action, alert, labels). What fn returns is recorded as the result (an
        exception: status "failed"); an action with no handler is
        acknowledged as "unhandled". See docs/runs-api.md, "Actions"."""
        if not callable(fn):
            raise TypeError("trainwatch: on_action: fn must be callable")
        self._action_handlers[str(name)] = fn

    def _receive_actions(self, actions):
        for a in actions:
            aid = a.get("id")
            if not isinstance(aid, int) or aid in self._actions_seen:
                continue
            self._actions_seen.add(aid)
            if self._action_queue is None:
                self._action_queue = queue.Queue()
                threading.Thread(target=self._action_loop, name="trainwatch-actions", daemon=True).start()
            self._action_queue.put(a)

    def _action_loop(self):
        while True:
            a = self._action_queue.get()
            name = str(a.get("action", ""))
            fn = self._action_handlers.get(name) or self._action_handlers.get("*")
            info = {k: a.get(k) for k in ("id", "action", "alert", "labels")}
            if fn is None:
                status, result = "unhandled", "no handler for action %r" % name
            else:
                try:
                    out = fn(info)
                    status, result = "done", "" if out is None else str(out)
                except Exception as e:  # the handler's failure is the action's result
                    status, result = "failed", "%s: %s" % (type(e).__name__, e)
            info.update(status=status, result=result[:65536])
            self.actions.append(info)
            self._sender.ops.append(("/api/v1/runs/%s/actions/%d" % (self.id, a["id"]),
                                     {"rank": self.rank, "status": status, "result": result[:65536]}))
            self._sender.wake()

    def timer(self, phase):
        """Times one phase of the training step; any name (data, forward,
        backward, optimizer, comm, ...):

            with run.timer("data"):
                batch = next(loader)

        A phase's seconds are summed until the next log() of a later step,
        which sends them as step_phase/<phase> = seconds per step over the
        steps since the previous log() (the first log() of a run counts one
        step). The server keeps them by step and as the series
        trainwatch_step_phase_seconds{phase="<phase>"} with the run's and
        rank's labels (docs/training-metrics.md)."""
        phase = str(phase)
        if not phase:
            raise ValueError("trainwatch: timer: expected a phase name")
        return _PhaseTimer(self, PHASE_PREFIX + phase)

    def add_phase_time(self, phase, seconds):
        """Adds seconds measured elsewhere (CUDA events, a profiler) to a
        phase, as a timer() of that phase would."""
        self._add_phase(PHASE_PREFIX + str(phase), float(seconds))

    def _add_phase(self, key, seconds):
        with self._lock:
            self._phases[key] = self._phases.get(key, 0.0) + seconds

    @property
    def step(self):
        """The last logged step (-1 before the first log)."""
        return self._step

    def alert(self, title, text="", level="info"):
        """Records an alert with the run (kept with it on the server)."""
        if level not in _LEVELS:
            raise ValueError("trainwatch: alert level %r: expected one of %s" % (level, ", ".join(_LEVELS)))
        # alert_id: a retry (a lost answer, a replay from the spool) is stored and routed once.
        self._sender.ops.append(("/api/v1/runs/%s/alerts" % self.id,
                                 {"title": str(title), "text": str(text), "level": level,
                                  "alert_id": self._sender.new_alert_id()}))
        self._sender.wake()

    def log_line(self, message, level="info", source="app", t=None):
        """Sends one log line with the run (what the stdout capture and LogHandler use)."""
        self._sender.add_line(time.time() if t is None else t, level, message, source)

    # ---- artifacts ----------------------------------------------------------------
    def log_artifact(self, path, name=None, type="model", upload=False, metadata=None):
        """Records the file or directory at `path` as a version of the artifact
        `name` (default: its base name) of this run's project, produced by
        this run, and returns the version (a dict: id, name, type, version,
        sha256, size, uri, metadata, stored, ...; docs/runs-api.md,
        "Artifacts"). The content is hashed here (SHA-256; a directory as a
        manifest of its files, see trainwatch.artifacts); content the
        artifact already has answers that version. `uri` is file://<absolute
        path>: the server never reads it. upload=True (files only, at most
        256 MiB) also sends the bytes, streamed, to be stored by the server
        (skipped when that version is stored already); the version then has
        a `download_url`. Synchronous (not through the batch sender): raises
        trainwatch.ApiError when the server refuses or cannot be reached,
        ValueError for what cannot be sent."""
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileNotFoundError("trainwatch: log_artifact: %s does not exist" % path)
        is_dir = os.path.isdir(path)
        if upload and is_dir:
            raise ValueError("trainwatch: log_artifact: %s is a directory: upload=True takes a file (pack the "
                             "directory into one, or log it with upload=False to reference it in place)" % path)
        if name is None:
            name = os.path.basename(os.path.normpath(os.path.abspath(path)))
        name = str(name)
        if not name or "/" in name or len(name.encode("utf-8")) > 256:
            raise ValueError("trainwatch: log_artifact: name %r: expected 1-256 bytes without \"/\"" % name)
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError("trainwatch: log_artifact: metadata must be a dict")
        if is_dir:
            sha, size = manifest_digest(directory_manifest(path))
        else:
            sha, size = file_digest(path)
        if upload and size > MAX_UPLOAD_BYTES:
            raise ValueError("trainwatch: log_artifact: %s is %d bytes, over the server's %d MiB upload limit; log it "
                             "with upload=False to reference it in place" % (path, size, MAX_UPLOAD_BYTES >> 20))
        body = {"name": name, "type": str(type), "sha256": sha, "size": size,
                "uri": "file://" + os.path.abspath(path)}
        if metadata is not None:
            body["metadata"] = _json_value(metadata)
        version = self._call("POST", "/api/v1/runs/%s/artifacts" % self.id, body)
        if upload and not (version.get("stored") and not version.get("deleted")):
            with open(path, "rb") as f:
                version = self._call("PUT", "/api/v1/artifacts/%d/content" % int(version["id"]), f,
                                     content_type="application/octet-stream")
        return self._artifact_urls(version)

    def use_artifact(self, name, version="latest", sha256=None):
        """Records that this run uses version `version` (an int n, "v<n>", or
        "latest") of artifact `name` of its project (lineage), and returns
        that version: its `uri` and, when the server stores its content, a
        `download_url`. sha256= picks the version by content instead.
        Synchronous; an unknown artifact or version raises
        trainwatch.ApiError (status 404)."""
        body = {"name": str(name)}
        if version not in (None, "latest"):
            if isinstance(version, str) and version[:1] in ("v", "V") and version[1:].isdigit():
                version = int(version[1:])
            if isinstance(version, bool) or not isinstance(version, int):
                raise ValueError("trainwatch: use_artifact: version %r: expected an int, \"v<n>\" or \"latest\""
                                 % (version,))
            body["version"] = version
        if sha256 is not None:
            body["sha256"] = str(sha256)
        return self._artifact_urls(self._call("POST", "/api/v1/runs/%s/artifacts/use" % self.id, body))

    def _artifact_urls(self, version):
        if isinstance(version, dict) and version.get("stored") and not version.get("deleted") \
                and "download_url" not in version and "id" in version:
            version["download_url"] = "%s/api/v1/artifacts/%s/content" % (without_userinfo(self.url), version["id"])
        return version

    def _call(self, method, path, body, content_type="application/json"):
        """One synchronous request on the run's own connection: the answer's
        data. A run the server does not know yet (it was unreachable at
        init) is registered first. Raises ApiError."""
        with self._http_lock:
            if self._http is None:
                self._http = Http(self.url, timeout=max(self._timeout, 60.0), token=self._token)
            for attempt in (0, 1):
                try:
                    status, doc = self._http.request(method, path, body, content_type=content_type)
                except Unreachable as e:
                    raise ApiError("trainwatch: %s %s: server %s unreachable: %s"
                                   % (method, path, redact(self.url), e)) from None
                if status == 404 and attempt == 0 and path.startswith("/api/v1/runs/") \
                        and not self._sender.registered and self._register_sync():
                    continue
                break
        if 200 <= status < 300 and isinstance(doc, dict) and isinstance(doc.get("data"), dict):
            return doc["data"]
        raise ApiError("trainwatch: %s %s: %s" % (method, path, error_text(status, doc)), status=status,
                       error_type=doc.get("errorType") if isinstance(doc, dict) else None)

    def _register_sync(self):
        try:
            status, _ = self._http.request("POST", "/api/v1/runs", self._sender.register_body)
        except Unreachable:
            return False
        return status == 200

    @property
    def logs_dropped(self):
        """Log lines not stored: no logs endpoint on the server, or the buffer overflowed."""
        return self._sender.logs_dropped + (self._capture.dropped if self._capture else 0)

    @property
    def points_dropped(self):
        """Logged points lost because the spool could not be written (a full disk during an outage)."""
        return self._sender.points_dropped

    @property
    def spooled(self):
        """Requests waiting in the spool dir for the server."""
        return self._sender.spooled

    # ---- end --------------------------------------------------------------------
    def finish(self, status="finished", timeout=None):
        """Sends everything queued and, on rank 0, the final status
        ("finished" or "failed"). Waits up to `timeout` (default
        finish_timeout) for the server; what is left stays spooled on disk
        and is sent by the next run with this id or `python -m trainwatch sync`."""
        if status not in ("finished", "failed"):
            raise ValueError("trainwatch: finish status %r: expected \"finished\" or \"failed\"" % status)
        with self._lock:
            if self._finished:
                return
            self._finished = True
        self.status = status
        for hook in list(self._finish_hooks):
            try:
                hook(min(self.finish_timeout if timeout is None else timeout, 10.0))
            except Exception as e:  # a hook's failure never keeps the run from finishing
                sys.__stderr__.write("trainwatch: at finish: %s: %s\n" % (type(e).__name__, e))
        if self._capture is not None:
            self._capture.uninstall()
        if self.rank == 0:
            with self._sender._lock:
                summary = dict(self._sender.summary)
            body = {"status": status}
            if summary:
                body["summary"] = _json_value(summary)  # NaN and infinities as "NaN", "Inf", "-Inf"
            # Queued points and summary form batches before this op (see Sender._form).
            self._sender.ops.append(("/api/v1/runs/%s/finish" % self.id, body))
        done = self._sender.stop(self.finish_timeout if timeout is None else timeout)
        with self._http_lock:
            if self._http is not None:
                self._http.close()
        with _hooks_lock:
            if self in _active:
                _active.remove(self)
        if not done:
            sys.__stderr__.write("trainwatch: server %s unreachable; %d requests of run %s kept in %s: they are "
                                 "sent when this run resumes, or by `python -m trainwatch sync`\n"
                                 % (redact(self.url), self._sender.spooled, self.id, self.spool_dir))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        failed = exc_type is not None and not (exc_type is SystemExit and exc.code in (None, 0))
        self.finish("failed" if failed else "finished")
        return False

    def __repr__(self):
        return "<trainwatch.Run %s/%s id=%s rank=%d>" % (self.project, self.name, self.id, self.rank)


class LogHandler(logging.Handler):
    """A logging.Handler that sends records as the run's log lines (source "logging")."""

    def __init__(self, run=None, level=logging.NOTSET):
        super().__init__(level)
        self.run = run

    def emit(self, record):
        run = self.run or current
        if run is None or run._finished:
            return
        try:
            lvl = "error" if record.levelno >= logging.ERROR else "warning" if record.levelno >= logging.WARNING else "info"
            run.log_line(self.format(record), level=lvl, source="logging", t=record.created)
        except Exception:
            self.handleError(record)


def _install_hooks():
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        _hooks_installed = True
    prev = sys.excepthook

    def hook(exc_type, exc, tb):
        prev(exc_type, exc, tb)  # the traceback still reaches the terminal (and the capture) first
        status = "finished" if exc_type is SystemExit and getattr(exc, "code", 1) in (None, 0) else "failed"
        for r in list(_active):
            r.finish(status)

    sys.excepthook = hook
    atexit.register(_finish_all)


def _finish_all():
    for r in list(_active):
        r.finish("finished")


def init(project=None, name=None, config=None, tags=None, total_steps=None, url=None, **kwargs):
    """Starts (or, with the id of an earlier run, resumes) a run and returns it.

    url defaults to $TRAINWATCH_URL, then http://127.0.0.1:9800. Keyword
    options: id, capture_output (default True), spool_dir (default
    $TRAINWATCH_SPOOL or ~/.cache/trainwatch/spool), heartbeat_interval,
    flush_interval, rank / world_size / host (default from RANK, WORLD_SIZE
    and the host name), finish_timeout, install_hooks, max_queue_points
    (20000) and max_queue_bytes (256 MiB of rich values) queued before log()
    spills to the spool, token (a bearer token
    of a server with --web.tokens.file; default $TRAINWATCH_TOKEN; basic auth:
    http://user:password@host:9800 or $TRAINWATCH_USERNAME/PASSWORD).
    """
    global current
    run = Run(project, name=name, config=config, tags=tags, total_steps=total_steps, url=url, **kwargs)
    current = run
    return run
