#!/usr/bin/env python3
"""Differential test: trainwatch against Debian's real Prometheus 2.42.

Usage: promql_diff_test.py /path/to/trainwatch [unittest args]

One data set -- a small peers workload (../shared/bench/peers/workload.py:
3 GPU nodes with 2 GPUs and 2 CPUs each, DCGM / node-exporter / trainer
series incl. a classic histogram) plus training metrics named as in
docs/training-metrics.md (loss, lr, grad_norm, samples_per_sec, ... per
run and rank, one run that stops halfway, a counter reset, NaN and +Inf
losses) -- 2 h at 15 s / 10 s is written once as OpenMetrics and turned into
Prometheus blocks with `promtool tsdb create-blocks-from openmetrics`, and
once imported into trainwatch through POST /api/v1/import/prometheus.

Every sample timestamp has a millisecond part (a multiple of 125 ms, exact
in binary floating point, never .000), while every evaluation time, range,
offset and subquery step is whole seconds and evaluation times are 7 s past
the minute: no sample ever sits on a window boundary, so Prometheus 2.x's
left-closed windows and 3.x's left-open ones (which trainwatch follows)
select the same samples.

Then hand-written queries (every function, aggregation and operator class)
and seeded random ones go through both HTTP APIs, as instant queries at
four times and as a range query, and must agree: same success/error, same
result type, same label sets, floats within 1e-9 relative (NaN == NaN).
Documented 2.x -> 3.x changes are handled by name (RENAMED_FOR_2X,
VALUES_DIFFER_2X; docs/compatibility.md, "Prometheus 2.x and 3.x").
"""
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import twtest  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
PEERS_DIR = os.path.join(REPO, "..", "shared", "bench", "peers")
PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"

T0 = 1795996800  # 2026-11-30T00:00:00Z, seconds
DURATION = 7200
INTERVAL = 15
SEED_RUN_END = T0 + 3600  # run "r2" stops logging here

# Evaluation times: all 7 s past a minute (see the module docstring).
INSTANT_TIMES = [T0 + 1807, T0 + 4507, T0 + 7207 + 60, T0 + 7207 + 420]
RANGE = (T0 + 607, T0 + 7507, 60)

REL_TOL = 1e-9

# Queries whose values legitimately differ between 2.42 and 3.x (listed in
# docs/compatibility.md, "Prometheus 2.x and 3.x"). They still run and must
# agree on success/error, result type and label sets; only values are exempt.
# Each was checked by hand against the raw samples.
VALUES_DIFFER_2X = {
    # rate/increase extrapolation towards zero (Prometheus PR #13725, 2.51):
    # a counter starting near 0 whose first sample is far from the window start.
    "gen-018": "extrapolation limit (item 4): rate(tokens_total[30m]) at the series' start",
    "gen-118": "extrapolation limit (item 4): increase(tokens_total[30m]) at the series' start",
    # avg: 2.42's incremental mean and 3.x's Kahan sum / count (PR #14413, 2.54)
    # differ in the last bit; rate() over that gauge takes the 1-ulp dips for
    # counter resets.
    "gen-101": "avg summation (item 5): rate() over a subquery of avg() sees 1-ulp dips as resets",
}

# Prometheus 3.0 renamed holt_winters (docs/compatibility.md, 2.x -> 3.x
# item 2); the 2.42 side gets the old name, trainwatch the new one.
RENAMED_FOR_2X = {"double_exponential_smoothing(": "holt_winters("}


# ----------------------------------------------------------------- data set

def esc(v):
    return v.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def series_text(labels):
    name = labels["__name__"]
    rest = ",".join('%s="%s"' % (k, esc(v)) for k, v in sorted(labels.items()) if k != "__name__")
    return name + ("{" + rest + "}" if rest else "")


def fmt_value(v):
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def seed_training_series():
    """The training metrics of docs/training-metrics.md, logged every 10 s:
    yields (labels, [(ts_ms, value)])."""
    rng = random.Random("promql-diff-training")
    for run, total in (("r1", DURATION), ("r2", SEED_RUN_END - T0)):
        for rank in ("0", "1"):
            base = {"project": "diff", "run": run, "rank": rank, "host": "h%s" % rank}
            jitter = (250, 375, 500, 625)[int(rank) + (2 if run == "r2" else 0)]
            pts = {k: [] for k in ("loss", "lr", "grad_norm", "samples_per_sec", "step_time_seconds",
                                   "trainwatch_run_step", "tokens_total")}
            loss, tokens = 2.6, 0.0
            for k in range(total // 10):
                ts = (T0 + k * 10) * 1000 + jitter
                step = k * 4
                loss = max(0.3, loss * 0.999 + rng.gauss(0, 0.01))
                lossv = loss
                if run == "r1" and rank == "1" and k in (300, 301):
                    lossv = float("nan") if k == 300 else float("inf")
                pts["loss"].append((ts, lossv))
                pts["lr"].append((ts, 3e-4 * 0.5 * (1 + math.cos(math.pi * step / 4000.0))))
                pts["grad_norm"].append((ts, abs(rng.gauss(1.0, 0.3))))
                sps = rng.uniform(900, 1100) if not (k % 97 < 5) else rng.uniform(100, 200)
                pts["samples_per_sec"].append((ts, sps))
                pts["step_time_seconds"].append((ts, 16.0 / sps * rng.uniform(0.9, 1.1)))
                pts["trainwatch_run_step"].append((ts, float(step)))
                tokens = 0.0 if (run == "r1" and k == 400) else tokens + rng.randint(30000, 34000)
                pts["tokens_total"].append((ts, tokens))
            for name, p in pts.items():
                yield dict(base, __name__=name), p


def generate():
    """Returns (samples sorted by time as (ts_ms, series text, value), label sets by name)."""
    sys.path.insert(0, PEERS_DIR)
    import workload  # the peers harness's generator
    samples = []
    names = {}
    for idx in range(3):
        t = workload.Target(idx, "promql-diff", gpus=2, cpus=2, interval_s=INTERVAL)
        off = t.offset_ms // 125 * 125
        if off % 1000 == 0:
            off += 125
        texts = [series_text(lab) for lab in t.labels]
        for lab in t.labels:
            names.setdefault(lab["__name__"], []).append(lab)
        for k in range(DURATION // INTERVAL):
            ts = (T0 + k * INTERVAL) * 1000 + off
            for s, v in zip(texts, t.step()):
                samples.append((ts, s, v))
    for lab, pts in seed_training_series():
        names.setdefault(lab["__name__"], []).append(lab)
        s = series_text(lab)
        samples.extend((ts, s, v) for ts, v in pts)
    samples.sort(key=lambda x: x[0])
    for ts, _, _ in samples:
        assert ts % 1000 != 0 and int(float("%d.%03d" % (ts // 1000, ts % 1000)) * 1000) == ts
    return samples, names


# ------------------------------------------------------------------ queries

def hand_written():
    """(name, query) pairs covering every function, aggregation and operator class."""
    at = T0 + 3000
    q = [
        # selectors
        "DCGM_FI_DEV_GPU_UTIL",
        'node_cpu_seconds_total{mode!="idle",cpu=~"0|1"}',
        '{__name__=~"node_load.*"}',
        '{__name__=~"training_.*",rank="3"}',
        'DCGM_FI_DEV_GPU_TEMP{gpu!~"1"} offset 10m',
        "DCGM_FI_DEV_GPU_TEMP offset -5m",
        "DCGM_FI_DEV_POWER_USAGE @ %d" % at,
        "rate(node_network_receive_bytes_total[5m] @ %d)" % at,
        "loss", "tokens_total", 'loss{run="r2"}',
        "0x1f", "1e3", "Inf", "-Inf", "NaN", "2 ^ 10", "7 % 3", "-(3)",
        # range functions
        "rate(node_cpu_seconds_total[5m])", "irate(node_cpu_seconds_total[2m])",
        "increase(training_samples_total[10m])", "rate(tokens_total[5m])", "increase(tokens_total[3m])",
        "delta(DCGM_FI_DEV_GPU_TEMP[10m])", "idelta(node_load1[1m])", "deriv(node_memory_MemAvailable_bytes[10m])",
        "predict_linear(node_filesystem_avail_bytes[30m], 3600)", "resets(tokens_total[30m])",
        "changes(DCGM_FI_DEV_GPU_UTIL[10m])", "double_exponential_smoothing(node_load5[10m], 0.3, 0.6)",
        "avg_over_time(training_loss[5m])", "min_over_time(loss[10m])", "max_over_time(grad_norm[10m])",
        "sum_over_time(samples_per_sec[2m])", "count_over_time(DCGM_FI_DEV_POWER_USAGE[7m])",
        "stddev_over_time(DCGM_FI_DEV_POWER_USAGE[10m])", "stdvar_over_time(node_load1[10m])",
        "quantile_over_time(0.9, step_time_seconds[10m])", "quantile_over_time(0, lr[5m])",
        "last_over_time(loss[1m])", "present_over_time(loss[1m])", 'absent_over_time(loss{run="r2"}[2m])',
        'absent_over_time(nonexistent_metric[5m])',
        # aggregations
        "sum(rate(node_cpu_seconds_total[5m])) by (instance)",
        'sum without (cpu) (rate(node_cpu_seconds_total{mode="user"}[5m]))',
        "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)", "min by (job) (node_load1)", "max(DCGM_FI_DEV_GPU_TEMP)",
        "group by (mode) (node_cpu_seconds_total)", "stddev by (instance) (DCGM_FI_DEV_POWER_USAGE)",
        "stdvar(training_grad_norm)", "count by (model) (training_loss)", "count_values(\"temp\", DCGM_FI_DEV_GPU_TEMP)",
        "topk(3, DCGM_FI_DEV_POWER_USAGE)", "bottomk(2, rate(node_cpu_seconds_total[5m]))",
        "topk by (instance) (1, node_load1)", "quantile(0.5, DCGM_FI_DEV_POWER_USAGE)",
        "quantile by (run_id) (0.95, training_loss)", "quantile(1.5, node_load1)",
        "sum(loss)", "avg(loss)", "count(loss)",
        # binary operators
        "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)",
        "node_load1 > 20", "node_load1 > bool 20", "node_load1 == bool node_load5",
        "DCGM_FI_DEV_GPU_TEMP - 40 < 10", "2 * node_load1 + 1", "node_load1 % 7", "node_load1 ^ 0.5",
        "atan2(node_load1, node_load5)",
        "rate(node_cpu_seconds_total[5m]) / on(instance) group_left sum by (instance) (rate(node_cpu_seconds_total[5m]))",
        "sum by (instance, cpu) (rate(node_cpu_seconds_total[5m])) / ignoring(cpu) group_left "
        "sum by (instance) (rate(node_cpu_seconds_total[5m]))",
        "sum by (instance) (node_load1) * on(instance) group_right node_filesystem_avail_bytes",
        'loss and on(run, rank) grad_norm > 1.2', 'loss or lr', 'loss unless on(run) loss{run="r2"}',
        "DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_GPU_UTIL > 95",
        "node_load1 + on(instance) node_load5", "1 - node_load1 / 100",
        "sum by (run_id, rank) (training_loss) != bool 0",
        # histogram
        "histogram_quantile(0.9, sum by (le) (rate(training_step_duration_seconds_bucket[5m])))",
        "histogram_quantile(0.5, rate(training_step_duration_seconds_bucket[10m]))",
        "histogram_quantile(0.99, sum by (le, run_id) (rate(training_step_duration_seconds_bucket[5m])))",
        "rate(training_step_duration_seconds_sum[5m]) / rate(training_step_duration_seconds_count[5m])",
        # label functions
        'label_replace(node_load1, "host", "$1", "instance", "([^:]+):.*")',
        'label_replace(node_load1, "x", "y", "nomatch", "(.+)")',
        'label_join(DCGM_FI_DEV_GPU_TEMP, "id", "/", "Hostname", "gpu")',
        # math and misc functions
        "abs(delta(node_load1[5m]))", "ceil(node_load1)", "floor(node_load1)", "round(node_load1)",
        "round(DCGM_FI_DEV_POWER_USAGE, 5)", "clamp(node_load1, 30, 60)", "clamp_min(node_load1, 50)",
        "clamp_max(node_load1, 50)", "exp(loss)", "ln(node_load1)", "log2(DCGM_FI_DEV_GPU_TEMP)",
        "log10(node_memory_MemAvailable_bytes)", "sqrt(node_load1)", "sgn(delta(node_load1[5m]))",
        "sort(node_load1)", "sort_desc(DCGM_FI_DEV_POWER_USAGE)", "scalar(sum(node_load1))", "vector(1)",
        "time()", "timestamp(loss)", "node_load1 - node_load1 offset 1h",
        "absent(nonexistent_metric)", 'absent(loss{run="zzz"})', "absent(loss)",
        "day_of_month(timestamp(loss))", "day_of_week(timestamp(loss))", "day_of_year(timestamp(loss))",
        "hour(timestamp(loss))", "minute(timestamp(loss))", "month(timestamp(loss))", "year(timestamp(loss))",
        "days_in_month(timestamp(loss))", "hour()", "minute()", "day_of_week()",
        "sin(lr * 1000)", "cos(lr * 1000)", "tan(lr * 1000)", "asin(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)",
        "acos(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)", "atan(node_load1)", "sinh(loss)", "cosh(loss)", "tanh(loss)",
        "asinh(node_load1)", "acosh(node_load1 + 1)", "atanh(DCGM_FI_PROF_DRAM_ACTIVE)", "deg(lr)", "rad(node_load1)",
        "pi()", "scalar(node_load1)",
        # subqueries and @
        "max_over_time(rate(node_cpu_seconds_total[5m])[30m:1m])",
        "avg_over_time(sum by (instance) (node_load1)[20m:30s])",
        "min_over_time(deriv(loss[5m])[10m:15s])",
        "rate(sum by (instance) (node_context_switches_total)[10m:1m])",
        "sum(node_load1 @ start())", "sum(node_load1 @ end())", "max_over_time(node_load1[10m] @ end())",
        # errors on both sides
        "sum(", "rate(node_load1)", "node_load1 + on(cluster) node_load5", "nosuchfn(node_load1)",
        'label_replace(node_load1, "instance", "same", "", "")', "histogram_quantile(0.9, node_load1)",
        "node_load1[5m]", "loss[1m]", "max_over_time(loss[2m])[10m:1m]",
    ]
    return [("hand-%03d" % i, x) for i, x in enumerate(q)]


class Gen:
    """A seeded random PromQL generator over the data set's metrics."""

    FAMILIES = {
        "dcgm": {"counters": ["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"],
                 "gauges": ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                            "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_DEV_SM_CLOCK"],
                 "by": ["instance", "Hostname", "gpu", "cluster"]},
        "node": {"counters": ["node_network_receive_bytes_total", "node_disk_read_bytes_total",
                              "node_context_switches_total", "node_intr_total"],
                 "gauges": ["node_load1", "node_load15", "node_memory_MemAvailable_bytes", "node_procs_running"],
                 "by": ["instance", "cluster", "job"]},
        "trainer": {"counters": ["training_samples_total", "training_step_duration_seconds_count"],
                    "gauges": ["training_loss", "training_grad_norm", "training_learning_rate"],
                    "by": ["run_id", "rank", "instance", "model"]},
        "seed": {"counters": ["tokens_total", "trainwatch_run_step"],
                 "gauges": ["loss", "lr", "grad_norm", "samples_per_sec", "step_time_seconds"],
                 "by": ["run", "rank", "project"]},
    }
    RANGES = ["1m", "2m", "5m", "10m", "30m"]

    def __init__(self, seed, names):
        self.r = random.Random(seed)
        self.names = names

    def selector(self, name):
        r = self.r
        if r.random() < 0.5:
            return name
        labs = self.names[name]
        lab = r.choice(labs)
        keys = [k for k in lab if k != "__name__"]
        k = r.choice(keys)
        values = sorted({x.get(k, "") for x in labs})
        op = r.choice(["=", "!=", "=~", "!~"])
        if op in ("=~", "!~"):
            v = "|".join(r.sample(values, min(len(values), r.randint(1, 2))))
            v = v.replace("\\", "\\\\").replace(".", "\\\\.").replace("+", "\\\\+")
        else:
            v = r.choice(values)
        return '%s{%s%s"%s"}' % (name, k, op, v.replace('"', '\\"'))

    def leaf(self, fam):
        r = self.r
        f = self.FAMILIES[fam]
        rng = r.choice(self.RANGES)
        if r.random() < 0.5:
            sel = self.selector(r.choice(f["counters"]))
            fn = r.choice(["rate", "irate", "increase", "resets", "changes", "rate", "increase"])
            return "%s(%s[%s])" % (fn, sel, rng)
        sel = self.selector(r.choice(f["gauges"]))
        c = r.random()
        if c < 0.3:
            return sel
        if c < 0.8:
            fn = r.choice(["avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
                           "stddev_over_time", "stdvar_over_time", "last_over_time", "delta", "idelta", "deriv"])
            return "%s(%s[%s])" % (fn, sel, rng)
        if c < 0.9:
            return "quantile_over_time(%s, %s[%s])" % (r.choice(["0.1", "0.5", "0.99"]), sel, rng)
        return "predict_linear(%s[%s], %d)" % (sel, rng, r.choice([60, 600, 3600]))

    def agg(self, fam, inner, by):
        r = self.r
        op = r.choice(["sum", "avg", "min", "max", "count", "stddev", "stdvar", "group", "sum", "avg"])
        if r.random() < 0.15:
            return "%s without (%s) (%s)" % (op, ", ".join(by) or "instance", inner)
        return "%s by (%s) (%s)" % (op, ", ".join(by), inner)

    def expr(self):
        r = self.r
        fam = r.choice(list(self.FAMILIES))
        f = self.FAMILIES[fam]
        by = sorted(r.sample(f["by"], r.randint(1, 2)))
        shape = r.random()
        if shape < 0.25:
            e = self.agg(fam, self.leaf(fam), by)
        elif shape < 0.45:
            a = self.agg(fam, self.leaf(fam), by)
            b = self.agg(fam, self.leaf(fam), by)
            op = r.choice(["+", "-", "*", "/", ">", "<", "and", "or", "unless", "> bool", "== bool"])
            e = "%s %s %s" % (a, op, b)
        elif shape < 0.6:
            e = self.leaf(fam)
            fn = r.choice(["abs", "ceil", "floor", "sqrt", "ln", "log10", "exp", "sgn", "-", "round", "clamp_min"])
            if fn == "-":
                e = "-(%s)" % e
            elif fn == "round":
                e = "round(%s, %s)" % (e, r.choice(["0.1", "5", "1"]))
            elif fn == "clamp_min":
                e = "clamp_min(%s, %s)" % (e, r.choice(["0", "10", "-1"]))
            else:
                e = "%s(%s)" % (fn, e)
        elif shape < 0.7:
            k = r.randint(1, 4)
            e = "%s(%d, %s)" % (r.choice(["topk", "bottomk"]), k, self.leaf(fam))
        elif shape < 0.78:
            e = "quantile by (%s) (%s, %s)" % (", ".join(by), r.choice(["0.25", "0.5", "0.9"]), self.leaf(fam))
        elif shape < 0.88:
            e = "%s %s %s" % (self.leaf(fam), r.choice(["*", "/", "+", "-", ">", "<=", "!="]),
                              r.choice(["2", "0.5", "100", "1e3", "scalar(sum(%s))" % self.leaf(fam)]))
        else:
            sub = r.choice(["1m", "30s", "2m", "15s"])
            fn = r.choice(["max_over_time", "min_over_time", "avg_over_time", "rate", "deriv"])
            e = "%s(%s[%s:%s])" % (fn, self.agg(fam, self.leaf(fam), by), r.choice(["10m", "30m"]), sub)
        return e


def generated(names, n=160):
    g = Gen("promql-diff-1", names)
    return [("gen-%03d" % i, g.expr()) for i in range(n)]


# --------------------------------------------------------------- comparison

def to_float(s):
    return float(s)  # "NaN", "+Inf", "-Inf" parse too


def floats_equal(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b))


def normalize(resp):
    if resp.get("status") != "success":
        return ("error", None)
    d = resp["data"]
    typ = d["resultType"]
    res = d["result"]
    if typ in ("scalar", "string"):
        return (typ, res)
    if typ == "vector":
        return (typ, [(tuple(sorted(s["metric"].items())), s["value"]) for s in res])
    return (typ, [(tuple(sorted(s["metric"].items())), s["values"]) for s in res])


def compare(ours, theirs, ordered, values=True):
    """Returns None when equal, else a description of the first difference.
    With values=False only the result type and label sets are compared."""
    (ta, a), (tb, b) = ours, theirs
    if ta != tb:
        return "result type %s vs %s" % (ta, tb)
    if ta == "error":
        return None
    if not values:
        if ta in ("vector", "matrix") and sorted(k for k, _ in a) != sorted(k for k, _ in b):
            return "series differ"
        return None
    if ta == "string":
        return None if a == b else "string %r vs %r" % (a, b)
    if ta == "scalar":
        if a[0] != b[0] or not floats_equal(to_float(a[1]), to_float(b[1])):
            return "scalar %r vs %r" % (a, b)
        return None
    if ordered:  # sort()/sort_desc(): the value order must agree too
        va = [to_float(v[1]) for _, v in a]
        vb = [to_float(v[1]) for _, v in b]
        if len(va) == len(vb) and not all(floats_equal(x, y) for x, y in zip(va, vb)):
            return "order of values differs: %r vs %r" % (va[:5], vb[:5])
    da, db = dict(a), dict(b)
    if len(da) != len(a) or len(db) != len(b):
        return "duplicate label sets in a result"
    if set(da) != set(db):
        only_a = sorted(set(da) - set(db))[:2]
        only_b = sorted(set(db) - set(da))[:2]
        return "series differ: %d vs %d; only trainwatch %r; only prometheus %r" % (len(da), len(db), only_a, only_b)
    for k in da:
        pa = [da[k]] if ta == "vector" else da[k]
        pb = [db[k]] if ta == "vector" else db[k]
        if len(pa) != len(pb):
            return "series %r: %d vs %d points" % (dict(k), len(pa), len(pb))
        for x, y in zip(pa, pb):
            if x[0] != y[0] or not floats_equal(to_float(x[1]), to_float(y[1])):
                return "series %r: point %r vs %r" % (dict(k), x, y)
    return None


class PromQLDiffTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for path in (PROMETHEUS, PROMTOOL, os.path.join(PEERS_DIR, "workload.py")):
            if not os.path.exists(path):
                raise unittest.SkipTest("%s not found" % path)
        cls.tmp = tempfile.mkdtemp(prefix="tw-promql-diff-")
        cls.procs = []
        try:
            cls._set_up()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _set_up(cls):
        samples, cls.names = generate()
        cls.n_samples = len(samples)
        om = os.path.join(cls.tmp, "data.om")
        with open(om, "w") as f:
            for ts, s, v in samples:
                f.write("%s %s %d.%03d\n" % (s, fmt_value(v), ts // 1000, ts % 1000))
            f.write("# EOF\n")
        prom_data = os.path.join(cls.tmp, "prom-data")
        out = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", om, prom_data],
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError("promtool: %s %s" % (out.stdout[-2000:], out.stderr[-2000:]))
        cfg = os.path.join(cls.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global: {evaluation_interval: 1m}\nscrape_configs: []\n")
        cls.prom_port = twtest.free_port()
        prom = twtest.Process([PROMETHEUS, "--config.file", cfg, "--storage.tsdb.path", prom_data,
                               "--web.listen-address", "127.0.0.1:%d" % cls.prom_port,
                               "--storage.tsdb.retention.time", "100y"],
                              os.path.join(cls.tmp, "prometheus.log"))
        cls.procs.append(prom)
        prom.wait_ready(cls.prom_port, timeout=120)

        data_dir = os.path.join(cls.tmp, "tw-data")
        cls.tw = twtest.Server(data_dir, ["--web.enable-admin-api"]).start()
        batch = []
        for i, (ts, s, v) in enumerate(samples):
            batch.append("%s %s %d\n" % (s, fmt_value(v), ts))
            if len(batch) == 50000 or i == len(samples) - 1:
                status, body = cls.tw.request("POST", "/api/v1/import/prometheus", "".join(batch).encode(), timeout=120)
                if status != 204:
                    raise RuntimeError("import: %d %r" % (status, body[:300]))
                batch = []
        # Query from blocks, as Prometheus does here.
        status, body = cls.tw.request("POST", "/api/v1/admin/tsdb/flush", timeout=300)
        if status != 204:
            raise RuntimeError("flush: %d %r" % (status, body[:300]))

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "tw", None) is not None:
            cls.tw.stop_quietly()
        for p in cls.procs:
            p.stop()
        if os.environ.get("TW_E2E_KEEP"):
            sys.stderr.write("kept %s\n" % cls.tmp)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def query(self, port, path, params):
        body = urllib.parse.urlencode(params).encode()
        status, data = twtest.request(port, "POST", path, body,
                                      {"Content-Type": "application/x-www-form-urlencoded"}, timeout=120)
        try:
            resp = json.loads(data)
        except ValueError:
            raise AssertionError("%s %r: HTTP %d, not JSON: %r" % (path, params, status, data[:300]))
        if resp.get("status") == "success":
            self.assertEqual(status, 200, data[:300])
        else:
            # Both servers answer errors with Prometheus's error JSON and codes.
            self.assertIn(status, (400, 422, 503), data[:300])
            self.assertIn("errorType", resp)
            self.assertIn("error", resp)
        return resp

    def both(self, path, expr, params):
        prom_expr = expr
        for new, old in RENAMED_FOR_2X.items():
            prom_expr = prom_expr.replace(new, old)
        ours = self.query(self.tw.port, path, dict(params, query=expr))
        theirs = self.query(self.prom_port, path, dict(params, query=prom_expr))
        return ours, theirs

    def run_queries(self, queries):
        failures = []
        counts = {"instant": 0, "range": 0, "error_both": 0, "nonempty": 0, "exempt": 0}
        for name, expr in queries:
            ordered = expr.startswith("sort")
            if name in VALUES_DIFFER_2X:
                counts["exempt"] += 1
                sys.stderr.write("  values exempt: %s %r (%s)\n" % (name, expr, VALUES_DIFFER_2X[name]))
            cases = [("/api/v1/query", {"time": str(t)}) for t in INSTANT_TIMES]
            cases.append(("/api/v1/query_range", {"start": str(RANGE[0]), "end": str(RANGE[1]), "step": str(RANGE[2])}))
            for path, params in cases:
                ours, theirs = self.both(path, expr, params)
                kind = "instant" if path.endswith("query") else "range"
                counts[kind] += 1
                na, nb = normalize(ours), normalize(theirs)
                if na[0] == "error" and nb[0] == "error":
                    counts["error_both"] += 1
                elif na[0] in ("vector", "matrix") and na[1]:
                    counts["nonempty"] += 1
                diff = compare(na, nb, ordered and kind == "instant", values=name not in VALUES_DIFFER_2X)
                if diff is not None:
                    detail = ""
                    if na[0] == "error" or nb[0] == "error":
                        detail = " (trainwatch: %s; prometheus: %s)" % (ours.get("error"), theirs.get("error"))
                    failures.append("%s %s %s %r: %s%s" % (name, kind, params.get("time", ""), expr, diff, detail))
        return failures, counts

    def check(self, queries, label):
        failures, counts = self.run_queries(queries)
        sys.stderr.write("%s: %d queries (%d with values exempt), %d instant + %d range evaluations, "
                         "%d non-empty, %d errors on both, %d differences (data: %d samples)\n"
                         % (label, len(queries), counts["exempt"], counts["instant"], counts["range"],
                            counts["nonempty"], counts["error_both"], len(failures), self.n_samples))
        for f in failures[:40]:
            sys.stderr.write("  DIFF " + f + "\n")
        self.assertEqual(failures, [])
        # The data must be rich enough for the comparison to mean something.
        self.assertGreater(counts["nonempty"], (counts["instant"] + counts["range"]) // 2)

    def test_data_loaded_identically(self):
        # Same series and sample counts in both before any query is compared.
        q = "count({__name__=~\".+\"})"
        ours, theirs = self.both("/api/v1/query", q, {"time": str(T0 + 3607)})
        self.assertEqual(normalize(ours), normalize(theirs))
        for name in sorted(self.names):
            q = "sum(count_over_time(%s[3h]))" % name
            ours, theirs = self.both("/api/v1/query", q, {"time": str(T0 + DURATION)})
            self.assertIsNone(compare(normalize(ours), normalize(theirs), False), name)

    def test_hand_written(self):
        self.check(hand_written(), "hand-written")

    def test_generated(self):
        self.check(generated(self.names), "generated")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: promql_diff_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
