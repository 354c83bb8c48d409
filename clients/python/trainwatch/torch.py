"""PyTorch helpers (import trainwatch.torch only where torch is installed).

    import trainwatch, trainwatch.torch
    run = trainwatch.init(project="mnist", total_steps=1000)
    trainwatch.torch.watch(model, optimizer, every=10)

watch() wraps optimizer.step: every `every` optimizer steps it logs
grad_norm (global L2 norm of the gradients, before the step), param_norm
(after it), lr (of the first parameter group), step_time_seconds (mean wall
time between consecutive steps over the window) and samples_per_sec (batch
size, taken from the first dimension of the model's first input, over the
step time), at step = the number of optimizer steps taken before this one.

With phases=True (the default when a model is given) it also times where
each step's time goes, through hooks, without changes to the training loop,
and logs step_phase/<phase> (seconds per step; docs/training-metrics.md):

  forward    from the model's forward call until its output's first gradient
             (the loss computation included)
  backward   from there until the last parameter gradient
  optimizer  from the last gradient to the end of optimizer.step (gradient
             clipping, scaling, the step)
  data       the rest: from the end of a step (or of a micro-batch's
             backward) to the next forward call -- the data loader, logging

On CPU every step is timed and the window's mean is logged. On a CUDA
device kernels run asynchronously, so host-side times would hide GPU time:
only the last step of each window is timed, with a device synchronize at
each phase boundary, and that step's times are logged (the other steps run
untouched).

With log="gradients", "parameters" or "all" it also logs histograms
(trainwatch.Histogram, `bins` buckets) of each trainable parameter's
gradient (before the step, as "gradients/<name>") and value (after it, as
"parameters/<name>"), names from model.named_parameters(), every
`log_freq` optimizer steps from step 0. They are counted on the
parameters' device and read back with the norms in one device sync per
logged step; the steps in between cost nothing. The default, log=None,
logs none (unlike W&B's watch, whose default is "gradients"), so watch()
costs what it cost before unless histograms are asked for.

With step_histogram=True (the default) it also sends the distribution of
the step times (the wall time between consecutive optimizer steps, as
step_time_seconds, one observation per step from the second on) as a
Prometheus native histogram, train_step_duration_seconds{job="trainwatch",
run="<run id>", rank="<rank>"}: exponential schema 3 (buckets grow by
2^(1/8), about 9 %), zero threshold 0, counts cumulative over the run (a
counter histogram, for histogram_quantile(0.99, rate(...[5m])) and the
Explore heatmap). It goes every `every` steps, and once more at the run's
finish() and at remove(), through POST <server>/api/v1/write (remote write
1.0, snappy, no protobuf or snappy package needed) from a thread of its own;
a failed send is reported once on stderr and never reaches the training
loop. step_histogram=False sends none.
"""
import sys
import time

import torch as _torch

from . import run as _run
from ._remote_write import HistogramWriter, NativeHistogram
from .media import Histogram, buckets_from_torch, torch_histogram

STEP_HISTOGRAM = "train_step_duration_seconds"
STEP_HISTOGRAM_SCHEMA = 3

_HIST_KINDS = {None: (), "gradients": ("gradients",), "parameters": ("parameters",),
               "all": ("gradients", "parameters")}

_foreach_norm = getattr(_torch, "_foreach_norm", None)  # torch >= 1.13


class Watch:
    """What watch() returns: remove() undoes the wrapping."""

    def __init__(self, model, optimizer, every, run, batch_size, log_grad_norm, phases,
                 log=None, log_freq=100, bins=64, step_histogram=True):
        if log not in _HIST_KINDS:
            raise ValueError('trainwatch.torch.watch: log=%r: expected "gradients", "parameters", "all" or None' % (log,))
        if optimizer is None or not hasattr(optimizer, "step"):
            raise TypeError("trainwatch.torch.watch needs the optimizer (it wraps optimizer.step): "
                            "watch(model, optimizer, log=...)")
        self.hist_kinds = _HIST_KINDS[log]
        if self.hist_kinds and model is None:
            raise ValueError("trainwatch.torch.watch: log=%r needs the model (its parameter names)" % (log,))
        self.log_freq = max(1, int(log_freq))
        self.bins = int(bins)
        if not 1 <= self.bins <= 4096:
            raise ValueError("trainwatch.torch.watch: bins=%r: expected 1..4096" % (bins,))
        self._named = ([(n, p) for n, p in model.named_parameters() if p.requires_grad and not p.is_complex()]
                       if self.hist_kinds else [])
        self.model = model
        self.optimizer = optimizer
        self.every = max(1, int(every))
        self.run = run
        self.batch_size = batch_size
        self.log_grad_norm = log_grad_norm
        self.steps = 0
        self.profile = False  # True: measure overhead_seconds, the thread CPU watch() adds to steps (benchmarks)
        self.overhead_seconds = 0.0
        self._samples = 0
        self._window_start = None
        self._last_batch = None
        self._hook = None
        self._handles = []
        self._orig_step = optimizer.step
        # The step durations' native histogram: what is counted, and where it goes.
        self.step_durations = NativeHistogram(STEP_HISTOGRAM_SCHEMA) if step_histogram else None
        self._prev_step_t = None
        self._writer = None       # HistogramWriter of _writer_run
        self._writer_run = None
        self._submitted = 0       # the count of the last snapshot handed to the writer
        if model is not None and batch_size is None:
            self._hook = model.register_forward_pre_hook(self._pre_forward)
        # Step phases: the open phase and when it began, the last parameter
        # gradient's time, and the seconds per phase of the window.
        self.phases = bool(phases) and model is not None
        self._phase = None
        self._phase_t = None
        self._grad_t = None
        self._phase_sum = {}
        self._phase_steps = 0
        self._cuda = False
        if self.phases:
            first = next(iter(model.parameters()), None)
            self._cuda = first is not None and first.is_cuda
            self._handles.append(model.register_forward_pre_hook(self._phase_forward))
            self._handles.append(model.register_forward_hook(self._phase_forward_done))
            if not self._cuda:  # on CUDA a gradient's host time says nothing of the GPU's
                for p in model.parameters():
                    if p.requires_grad:
                        self._handles.append(p.register_hook(self._phase_grad))
        optimizer.step = self._step

    def _pre_forward(self, module, inputs):
        for x in inputs:
            if isinstance(x, _torch.Tensor) and x.dim() > 0:
                self._last_batch = x.shape[0]
                return

    # ---- step phases ------------------------------------------------------------
    def _timing(self, ahead=0):
        """Whether the step `ahead` steps on is timed: every step on CPU, the
        window's last on CUDA."""
        return not self._cuda or (self.steps + 1 + ahead) % self.every == 0

    def _now(self):
        if self._cuda:
            _torch.cuda.synchronize()
        return time.perf_counter()

    def _switch(self, phase, now=None):
        """Closes the open phase at `now` and opens `phase` (None: none)."""
        if now is None:
            now = self._now()
        if self._phase is not None and now > self._phase_t:
            self._phase_sum[self._phase] = self._phase_sum.get(self._phase, 0.0) + (now - self._phase_t)
        self._phase, self._phase_t = phase, now

    def _phase_forward(self, module, inputs):
        if not self._timing():
            return
        now = self._now()
        if self._phase == "backward" and self._grad_t is not None:
            self._switch("data", self._grad_t)  # a micro-batch's backward ended at its last gradient
        self._grad_t = None
        self._switch("forward", now)

    def _phase_forward_done(self, module, inputs, output):
        if not self._timing() or not _torch.is_grad_enabled():
            return
        t = _first_grad_tensor(output)
        if t is not None:
            t.register_hook(self._phase_backward)

    def _phase_backward(self, grad):
        if self._phase == "forward":
            self._switch("backward")

    def _phase_grad(self, grad):
        if self._phase == "backward":
            self._grad_t = time.perf_counter()

    def _phase_step_begin(self):
        if not self._timing():
            return
        now = self._now()
        if self._phase == "backward" and self._grad_t is not None:
            self._switch("optimizer", self._grad_t)
        self._grad_t = None
        self._switch("optimizer", now)

    def _phase_step_end(self):
        # What follows is the next step's data phase, timed if that step is.
        nxt = "data" if self._timing(1) else None
        if self._timing():
            self._switch(nxt)
            self._phase_steps += 1
        elif nxt is not None:
            self._switch(nxt)

    def _phase_values(self):
        """step_phase/<phase> -> mean seconds per timed step of the window; resets it."""
        out = {}
        if self._phase_steps:
            out = {"step_phase/" + k: v / self._phase_steps for k, v in self._phase_sum.items()}
        self._phase_sum = {}
        self._phase_steps = 0
        return out

    def _params(self):
        for g in self.optimizer.param_groups:
            for p in g["params"]:
                yield p

    @staticmethod
    def _norm(tensors):
        """The global L2 norm of `tensors` as a 0-dim tensor, read later (no
        device sync here); None if there are none."""
        if not tensors:
            return None
        with _torch.no_grad():  # params require grad: no graph, and no detach() op per tensor
            if _foreach_norm is not None and all(t.dtype == _torch.float32 and not t.is_sparse for t in tensors):
                norms = _foreach_norm(tensors)  # one op for all tensors instead of one per tensor
            else:
                norms = [t.float().norm(2) for t in tensors]  # half/bf16: summed in float32
            return _torch.norm(_torch.stack(norms), 2)

    def _histograms(self, kind):
        """[(key, histogram tensor)] of the trainable parameters ("parameters")
        or their gradients ("gradients"), computed on their device, not read."""
        out = []
        with _torch.no_grad():
            for name, p in self._named:
                t = p if kind == "parameters" else p.grad
                if t is None or t.is_sparse or t.numel() == 0:
                    continue
                out.append((kind + "/" + name, torch_histogram(t, self.bins)))
        return out

    def _step(self, *args, **kwargs):
        if self.profile:
            c0 = time.thread_time()
        now = time.perf_counter()
        if self._window_start is None:
            self._window_start = now
        if self.step_durations is not None:
            if self._prev_step_t is not None:
                self.step_durations.observe(now - self._prev_step_t)
            self._prev_step_t = now
        bs = self.batch_size if self.batch_size is not None else self._last_batch
        self._samples += bs or 0
        log_now = self.steps > 0 and self.steps % self.every == 0
        hist_now = bool(self.hist_kinds) and self.steps % self.log_freq == 0
        grad = None
        if log_now and self.log_grad_norm:
            grad = self._norm([p.grad for p in self._params() if p.grad is not None])
        hists = []
        if hist_now and "gradients" in self.hist_kinds:
            hists = self._histograms("gradients")  # before the step, as grad_norm
        if self.profile:
            c1 = time.thread_time()
        if self.phases:
            self._phase_step_begin()
        out = self._orig_step(*args, **kwargs)
        if self.phases:
            self._phase_step_end()
        if self.profile:
            c2 = time.thread_time()
        if hist_now and "parameters" in self.hist_kinds:
            hists += self._histograms("parameters")
        values = {}
        if log_now:
            window = now - self._window_start
            pnorm = self._norm(list(self._params()))
            norms = [n for n in (pnorm, grad) if n is not None]
            # Both norms (and the histograms) read with one device sync, after the step was queued.
            rows = _read(([_torch.stack(norms).double()] if norms else []) + [h for _, h in hists])
            got = rows.pop(0) if norms else []
            values = {"lr": float(self.optimizer.param_groups[0].get("lr", 0.0)),
                      "param_norm": got.pop(0) if pnorm is not None else 0.0}
            if self.log_grad_norm:
                values["grad_norm"] = got.pop(0) if grad is not None else 0.0
            if self.phases:
                values.update(self._phase_values())
            if window > 0:
                values["step_time_seconds"] = window / self.every
                if self._samples:
                    values["samples_per_sec"] = (self._samples - (bs or 0)) / window
            self._window_start = now
            self._samples = bs or 0
        elif hists:
            rows = _read([h for _, h in hists])
        for (key, _), row in zip(hists, rows if hists else ()):
            buckets = buckets_from_torch(row, self.bins)
            if buckets is not None:  # none: every value NaN or infinite
                values[key] = Histogram.from_buckets(buckets)
        if values or (log_now and self.step_durations is not None):
            run = self.run or _run.current
            if run is not None:
                if values:
                    run.log(values, step=self.steps)
                if log_now and self.step_durations is not None:
                    try:
                        self._send_step_histogram(run)
                    except Exception as e:  # never into training: warned once, not sent again
                        self.step_durations = None
                        sys.__stderr__.write("trainwatch: watch(): %s not sent: %s: %s\n"
                                             % (STEP_HISTOGRAM, type(e).__name__, e))
        self.steps += 1
        if self.profile:
            self.overhead_seconds += (c1 - c0) + (time.thread_time() - c2)
        return out

    # ---- step duration histogram -------------------------------------------------
    def _send_step_histogram(self, run):
        """Hands the histogram's current state to `run`'s writer (sent on its thread)."""
        if run is not self._writer_run:
            self._close_writer(0)
            if getattr(run, "_finish_hooks", None) is None or run._finished:
                return  # finished, or not a trainwatch Run (a stand-in with log() only): no server
            if self._writer_run is not None:  # another run (a new init): its series starts from zero
                self.step_durations = NativeHistogram(STEP_HISTOGRAM_SCHEMA)
            self._writer_run = run
            self._writer = HistogramWriter(run.url, STEP_HISTOGRAM,
                                           {"job": "trainwatch", "run": run.id, "rank": str(run.rank)},
                                           schema=STEP_HISTOGRAM_SCHEMA, timeout=run._timeout, token=run._token)
            self._submitted = 0
            run._finish_hooks.append(self._at_finish)
        if self._writer is None:
            return
        snap = self.step_durations.snapshot()
        if snap[0] > self._submitted:
            self._submitted = snap[0]
            self._writer.submit(snap)

    def _at_finish(self, timeout):
        """The run finishes: its last state, sent before it does (up to `timeout` s)."""
        self._send_step_histogram(self._writer_run)
        self._close_writer(timeout)

    def _close_writer(self, timeout):
        if self._writer is None:
            return
        self._writer.close(timeout)
        try:
            self._writer_run._finish_hooks.remove(self._at_finish)
        except ValueError:
            pass
        self._writer = None

    def remove(self):
        """Unwraps the optimizer and the model; sends the step histogram's last
        state first (waiting for it up to 10 s)."""
        if self._writer is not None:
            try:
                self._send_step_histogram(self._writer_run)
                self._close_writer(min(10.0, self._writer_run._timeout))
            except Exception:  # never into training
                pass
        if self._hook is not None:
            self._hook.remove()
        for h in self._handles:
            h.remove()
        self._handles = []
        self.optimizer.step = self._orig_step


def _read(tensors):
    """The values of 1-D tensors as lists, with one device sync per device."""
    by_device = {}
    for i, t in enumerate(tensors):
        by_device.setdefault(t.device, []).append(i)
    out = [None] * len(tensors)
    for idx in by_device.values():
        flat = _torch.cat([tensors[i] for i in idx]).tolist() if len(idx) > 1 else tensors[idx[0]].tolist()
        off = 0
        for i in idx:
            n = tensors[i].numel()
            out[i] = flat[off:off + n]
            off += n
    return out


def _first_grad_tensor(output):
    """The first tensor needing a gradient in a forward's output (a tensor, or
    a tuple, list or dict of them, as models return), or None."""
    if isinstance(output, _torch.Tensor):
        return output if output.requires_grad else None
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (tuple, list)):
        for x in output:
            t = _first_grad_tensor(x)
            if t is not None:
                return t
    return None


def watch(model, optimizer, every=10, run=None, batch_size=None, log_grad_norm=True, phases=True,
          log=None, log_freq=100, bins=64, step_histogram=True):
    """Logs grad_norm, param_norm, lr, samples_per_sec and step_time_seconds
    every `every` optimizer steps to `run` (default: the last init()), and
    with phases (needs the model) step_phase/forward, backward, optimizer
    and data. batch_size: samples per step, when the model's first input
    does not say. log="gradients", "parameters" or "all" (default None:
    none) adds histograms of the trainable parameters' gradients
    ("gradients/<name>") and values ("parameters/<name>") every `log_freq`
    optimizer steps, in `bins` buckets. step_histogram=True (the default)
    also sends every step's time as the native histogram
    train_step_duration_seconds{job="trainwatch", run, rank} (schema 3,
    cumulative) through the server's /api/v1/write, every `every` steps and
    at finish() and remove(); step_histogram=False opts out."""
    return Watch(model, optimizer, every, run, batch_size, log_grad_norm, phases,
                 log=log, log_freq=log_freq, bins=bins, step_histogram=step_histogram)
