"""The read API for analysis, shaped like W&B's public API (standard library only).

    import trainwatch
    api = trainwatch.Api()                          # $TRAINWATCH_URL or http://127.0.0.1:9800
    for run in api.runs('config.lr > 1e-4', project="llama"):
        print(run.name, run.state, run.config["lr"], run.summary.get("loss"))
    rows = api.run("3f9c2a7e41d0b5c8").history(keys=["loss", "lr"], pandas=False)
    # [{"_step": 0, "_timestamp": 1796218600.123, "loss": 2.5, "lr": 0.0003}, ...]

    run = api.run("3f9c2a7e41d0b5c8")
    run.histograms("gradients/fc.weight")   # [{"step", "buckets": [[lower, upper, count], ...]}, ...]
    run.media("samples", step=1200)         # images, text, tables at (or before) a step
    api.artifacts("llama", name="model")    # every version, newest first

Reads GET /api/v1/runs, /api/v1/runs/{id} and /api/v1/runs/{id}/history
(docs/runs-api.md, "Reading"), the rich values' routes ("Rich values") and
the artifacts' ("Artifacts"). pandas is used only where it is importable.
"""
import math
import os
import threading
import urllib.parse

from ._http import Http, Unreachable, redact

__all__ = ["Api", "ApiError", "RunInfo", "filter_quote"]

_SPECIAL = {"NaN": math.nan, "Inf": math.inf, "+Inf": math.inf, "-Inf": -math.inf}


class ApiError(Exception):
    """The server refused a read (its message is in the text and in `.message`),
    or could not be reached (`.status` is None then)."""

    def __init__(self, message, status=None, error_type=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type


def _number(v):
    """A value of the API as a Python number: "NaN", "Inf", "-Inf" become floats."""
    if isinstance(v, str):
        return _SPECIAL.get(v, v)
    return v


def _decode(obj):
    """config / summary from the API: the strings "NaN", "Inf", "-Inf" (what the
    clients send for NaN and infinities) back to floats, at any depth."""
    if isinstance(obj, dict):
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return _number(obj)


def filter_quote(value):
    """`value` as a literal of the run filter language (docs/runs-api.md):
    a quoted string, a number, true, false or null."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("trainwatch.Api: %r cannot be compared in a run filter" % value)
        return repr(value) if isinstance(value, float) else str(int(value))
    s = str(value)
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _filter_expr(filter, project):
    """The filter expression: a string as given, or a dict {field: value} of
    `=` comparisons; `project` adds `project = "..."`; all joined by `and`."""
    clauses = []
    if isinstance(filter, dict):
        for field, value in filter.items():
            clauses.append("%s = %s" % (field, filter_quote(value)))
    elif filter is not None and str(filter).strip():
        clauses.append("(%s)" % filter)
    if project is not None:
        clauses.append("project = " + filter_quote(project))
    return " and ".join(clauses)


class Api:
    """A connection to a trainwatch server for reading runs back.

    url defaults to $TRAINWATCH_URL, then http://127.0.0.1:9800 (as init()).
    Thread-safe (one request at a time on one kept-alive connection).
    `http_options` go to the client's HTTP layer (trainwatch._http.Http).
    """

    def __init__(self, url=None, timeout=60.0, **http_options):
        self.url = (url or os.environ.get("TRAINWATCH_URL") or "http://127.0.0.1:9800").rstrip("/")
        self._http = Http(self.url, timeout=timeout, **http_options)
        self._lock = threading.Lock()

    def close(self):
        with self._lock:
            self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "<trainwatch.Api %s>" % redact(self.url)

    # ---- requests ---------------------------------------------------------------
    def _get(self, path, params=None):
        """GET path?params: the envelope's data. Raises ApiError with the server's message."""
        if params:
            query = urllib.parse.urlencode([(k, v) for k, v in params.items() if v is not None])
            if query:
                path += "?" + query
        with self._lock:
            try:
                status, doc = self._http.request("GET", path)
            except Unreachable as e:
                raise ApiError("trainwatch server %s unreachable: %s" % (redact(self.url), e)) from None
        if status == 200 and isinstance(doc, dict) and doc.get("status") == "success":
            return doc.get("data")
        if isinstance(doc, dict) and doc.get("error"):
            raise ApiError("trainwatch: GET %s: %d %s" % (path, status, doc["error"]),
                           status=status, error_type=doc.get("errorType"))
        text = doc[:300].decode("utf-8", "replace").strip() if isinstance(doc, bytes) else str(doc)[:300]
        raise ApiError("trainwatch: GET %s: %d %s" % (path, status, text or "unexpected answer"), status=status)

    def _get_bytes(self, path, params=None):
        """GET path?params: the answer's bytes (images, artifact content). Raises ApiError."""
        if params:
            path += "?" + urllib.parse.urlencode([(k, v) for k, v in params.items() if v is not None])
        with self._lock:
            try:
                status, body = self._http.request("GET", path)
            except Unreachable as e:
                raise ApiError("trainwatch server %s unreachable: %s" % (redact(self.url), e)) from None
        if status == 200 and isinstance(body, bytes):
            return body
        if isinstance(body, dict) and body.get("error"):
            raise ApiError("trainwatch: GET %s: %d %s" % (path, status, body["error"]),
                           status=status, error_type=body.get("errorType"))
        text = body[:300].decode("utf-8", "replace").strip() if isinstance(body, bytes) else str(body)[:300]
        raise ApiError("trainwatch: GET %s: %d %s" % (path, status, text or "unexpected answer"), status=status)

    @staticmethod
    def _run_path(run_id):
        return "/api/v1/runs/" + urllib.parse.quote(str(run_id), safe="")

    # ---- runs -------------------------------------------------------------------
    def runs(self, filter=None, project=None, sort="start_time", order="desc", limit=1000, offset=0):
        """The runs matching `filter`, as RunInfo objects (newest first by default).

        filter: an expression of the run filter language, e.g.
        'config.lr > 1e-4 and tags contains "sweep"', or a dict {field: value}
        of equality tests ({"config.optimizer": "adam", "status": "finished"}).
        project: only that project's runs (added to the filter with `and`).
        sort: any filter field; order "asc" or "desc"; limit 1-100000; offset to page.
        """
        params = {"sort": sort, "order": order, "limit": int(limit), "offset": int(offset) or None}
        expr = _filter_expr(filter, project)
        if expr:
            params["filter"] = expr
        return [RunInfo(self, d) for d in self._get("/api/v1/runs", params) or []]

    def run(self, run_id):
        """One run by id, with its alerts (`run.alerts`). Unknown: ApiError (status 404)."""
        return RunInfo(self, self._get(self._run_path(run_id)))

    # ---- history ----------------------------------------------------------------
    def history_series(self, run_id, keys=None, rank=None, start=None, end=None):
        """The raw answer of GET /api/v1/runs/{id}/history: one entry per key and
        rank ({"key", "metric", "labels", "steps", "timestamps" (unix ms), "values"}),
        values as floats (NaN and infinities included)."""
        if isinstance(keys, str):
            keys = [keys]
        params = {"keys": ",".join(keys) if keys else None,
                  "rank": None if rank is None else int(rank),
                  "start": None if start is None else int(start),
                  "end": None if end is None else int(end)}
        series = self._get(self._run_path(run_id) + "/history", params) or []
        for s in series:
            s["values"] = [_number(v) for v in s.get("values", [])]
        return series

    def history(self, run_id, keys=None, x="step", rank=None, start=None, end=None, pandas=None):
        """Every logged point of run `run_id` at full resolution, one row per step:
        [{"_step": s, "_timestamp": unix seconds, "loss": v, ...}] (a key not
        logged at a step is absent from its row). With `rank` given, or when the
        answer holds several ranks or a rank other than 0, one row per rank and
        step, with "_rank" (an int; None for a rankless series).

        keys: a key or list of keys (default: all). x="step" orders rows by
        step (then rank); x="time" by the time they were logged. start/end
        (inclusive): steps for x="step", times (unix seconds, or datetimes) for
        x="time". pandas: None gives a pandas DataFrame where pandas is
        importable and the list otherwise; True always a DataFrame; False
        always the list.
        """
        if x not in ("step", "time"):
            raise ValueError('trainwatch: history x=%r: expected "step" or "time"' % (x,))
        if x == "step":
            series = self.history_series(run_id, keys=keys, rank=rank, start=start, end=end)
        else:
            series = self.history_series(run_id, keys=keys, rank=rank)
        ranks = {s.get("labels", {}).get("rank") for s in series}
        # "_rank" where it tells something: rank asked for, several ranks, or not rank 0 alone
        with_rank = rank is not None or len(ranks) > 1 or not ranks <= {None, "", "0"}
        rows = {}
        for s in series:
            r = s.get("labels", {}).get("rank") or None
            r = int(r) if r is not None and r.lstrip("-").isdigit() else r
            key = s["key"]
            for step, ts, v in zip(s["steps"], s["timestamps"], s["values"]):
                row = rows.get((r, step))
                if row is None:
                    row = rows[(r, step)] = {"_step": step, "_timestamp": ts / 1000.0}
                    if with_rank:
                        row["_rank"] = r
                elif ts / 1000.0 > row["_timestamp"]:
                    row["_timestamp"] = ts / 1000.0  # the step's latest write
                row[key] = v
        out = list(rows.values())
        rank_order = (lambda row: (row.get("_rank") is not None, row.get("_rank") or 0))
        if x == "step":
            out.sort(key=lambda row: (row["_step"], rank_order(row)))
        else:
            lo, hi = _seconds(start), _seconds(end)
            if lo is not None or hi is not None:
                out = [row for row in out if (lo is None or row["_timestamp"] >= lo)
                       and (hi is None or row["_timestamp"] <= hi)]
            out.sort(key=lambda row: (row["_timestamp"], row["_step"], rank_order(row)))
        return _maybe_frame(out, with_rank, pandas)

    def scan_history(self, run_id, keys=None, x="step", rank=None, start=None, end=None):
        """history() as a list of dicts, whether or not pandas is importable (W&B's scan_history)."""
        return self.history(run_id, keys=keys, x=x, rank=rank, start=start, end=end, pandas=False)

    # ---- rich values (histograms, images, text, tables) --------------------------------
    def media_keys(self, ids):
        """The rich keys of runs `ids` (an id or a list): [{"run", "key", "kind",
        "steps", "first_step", "last_step"}], sorted by run, then key."""
        return self._get("/api/v1/runs/media/keys", {"ids": _ids(ids)}) or []

    def histograms(self, ids, key, rank=None, start=None, end=None, points=None):
        """The histograms of `key` in runs `ids`: [{"run", "rank", "step",
        "timestamp", "buckets": [[lower, upper, count], ...]}] by run, rank and
        step; at most `points` steps per run and rank (server default 200),
        spread evenly over [start, end] (steps, inclusive). rank=-1: only
        rankless values."""
        return self._get("/api/v1/runs/histograms", {
            "ids": _ids(ids), "key": key, "rank": _opt_int(rank), "start": _opt_int(start),
            "end": _opt_int(end), "points": _opt_int(points)}) or []

    def media(self, ids, key, rank=None, step=None, start=None, end=None, limit=None):
        """The images, text and tables of `key` in runs `ids`: [{"run", "rank",
        "step", "timestamp", "kind", ...}] (images: format, width, height,
        bytes, caption, url; text: text; tables: columns, rows). step=S: per
        run and rank the last entry at or before step S. media_content()
        reads an image's bytes."""
        return self._get("/api/v1/runs/media", {
            "ids": _ids(ids), "key": key, "rank": _opt_int(rank), "step": _opt_int(step),
            "start": _opt_int(start), "end": _opt_int(end), "limit": _opt_int(limit)}) or []

    def media_content(self, run_id, key, step, rank=None):
        """The bytes of the image of `key` at `step` (PNG or JPEG, as logged).
        rank=None: the rankless image, else that of the lowest rank (what
        the Python client logs is rank 0's)."""
        path = self._run_path(run_id) + "/media/content"
        try:
            return self._get_bytes(path, {"key": key, "step": int(step), "rank": _opt_int(rank)})
        except ApiError as e:
            if rank is not None or e.status != 404:
                raise
            ranks = sorted(m["rank"] for m in self.media(run_id, key, start=int(step), end=int(step))
                           if m.get("step") == int(step) and m.get("rank") is not None)
            if not ranks:
                raise
            return self._get_bytes(path, {"key": key, "step": int(step), "rank": ranks[0]})

    # ---- artifacts ------------------------------------------------------------------
    def artifacts(self, project, name=None):
        """Every version of the artifacts of `project` (of artifact `name` only
        when given), newest first: [{"id", "project", "name", "type",
        "version", "sha256", "size", "uri", "metadata", "stored", "deleted",
        "created_time", "producer", "consumers"}]."""
        return self._get("/api/v1/artifacts", {"project": project, "name": name}) or []

    def run_artifacts(self, run_id):
        """The artifact versions run `run_id` logged and used: {"logged": [...], "used": [...]}."""
        return self._get(self._run_path(run_id) + "/artifacts") or {"logged": [], "used": []}

    def artifact_content(self, artifact_id):
        """The stored bytes of artifact version `artifact_id` (its "id");
        ApiError (404) when it is only referenced or its content was deleted."""
        return self._get_bytes("/api/v1/artifacts/%d/content" % int(artifact_id))

    def download_artifact(self, artifact_id, path):
        """Writes the stored bytes of artifact version `artifact_id` to `path`
        (under a temporary name, renamed when complete); returns path."""
        data = self.artifact_content(artifact_id)
        tmp = "%s.tmp%d" % (path, os.getpid())
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return path


def _ids(ids):
    if isinstance(ids, str):
        return ids
    return ",".join(str(i) for i in ids)


def _opt_int(v):
    return None if v is None else int(v)


def _seconds(t):
    if t is None:
        return None
    if hasattr(t, "timestamp"):  # datetime
        return t.timestamp()
    return float(t)


def _maybe_frame(rows, with_rank, pandas):
    if pandas is False:
        return rows
    try:
        import pandas as pd
    except ImportError:
        if pandas:
            raise ImportError("trainwatch: history(pandas=True) needs pandas; pass pandas=False for a list of dicts") \
                from None
        return rows
    keys = sorted({k for row in rows for k in row if k not in ("_step", "_timestamp", "_rank")})
    columns = ["_step"] + (["_rank"] if with_rank else []) + ["_timestamp"] + keys
    return pd.DataFrame.from_records(rows, columns=columns)


class RunInfo:
    """One run as the server describes it (docs/runs-api.md, "A run").

    Attributes: id, name, project, state (= status: running, finished,
    failed, crashed), config, summary, tags, and every other field of the
    run (start_time, end_time, step, host, world_size, ...); alerts on a run
    read by Api.run(). to_dict() gives the server's fields.
    """

    def __init__(self, api, doc):
        self._api = api
        self._doc = dict(doc or {})
        self.id = self._doc.get("id")
        self.name = self._doc.get("name")
        self.project = self._doc.get("project")
        self.state = self.status = self._doc.get("status")
        self.config = _decode(self._doc.get("config") or {})
        self.summary = _decode(self._doc.get("summary") or {})
        self.tags = list(self._doc.get("tags") or [])
        self.alerts = list(self._doc.get("alerts") or [])

    def __getattr__(self, name):
        doc = self.__dict__.get("_doc")
        if doc is not None and name in doc:
            return doc[name]
        raise AttributeError("%s has no field %r" % (type(self).__name__, name))

    def to_dict(self):
        """The run as the server answered it (config and summary with NaN and infinities as floats)."""
        d = dict(self._doc)
        d["config"] = self.config
        d["summary"] = self.summary
        return d

    def refresh(self):
        """Reads the run again (status, summary, step, alerts)."""
        fresh = self._api.run(self.id)
        self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k != "_api"})
        return self

    def history(self, keys=None, x="step", rank=None, start=None, end=None, pandas=None):
        """Every point of this run at full resolution: Api.history(run.id, ...)."""
        return self._api.history(self.id, keys=keys, x=x, rank=rank, start=start, end=end, pandas=pandas)

    def scan_history(self, keys=None, x="step", rank=None, start=None, end=None):
        """history() as a list of dicts (W&B's scan_history)."""
        return self._api.scan_history(self.id, keys=keys, x=x, rank=rank, start=start, end=end)

    def media_keys(self):
        """This run's rich keys: Api.media_keys(run.id)."""
        return self._api.media_keys(self.id)

    def histograms(self, key, rank=None, start=None, end=None, points=None):
        """This run's histograms of `key`: Api.histograms(run.id, key, ...)."""
        return self._api.histograms(self.id, key, rank=rank, start=start, end=end, points=points)

    def media(self, key, rank=None, step=None, start=None, end=None, limit=None):
        """This run's images, text or tables of `key`: Api.media(run.id, key, ...)."""
        return self._api.media(self.id, key, rank=rank, step=step, start=start, end=end, limit=limit)

    def media_content(self, key, step, rank=None):
        """The bytes of this run's image of `key` at `step`."""
        return self._api.media_content(self.id, key, step, rank=rank)

    def artifacts(self):
        """The artifact versions this run logged and used: {"logged": [...], "used": [...]}."""
        return self._api.run_artifacts(self.id)

    def __repr__(self):
        return "<trainwatch.RunInfo %s/%s id=%s %s>" % (self.project, self.name, self.id, self.state)
