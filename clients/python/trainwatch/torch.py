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
"""
import time

import torch as _torch

from . import run as _run

_foreach_norm = getattr(_torch, "_foreach_norm", None)  # torch >= 1.13


class Watch:
    """What watch() returns: remove() undoes the wrapping."""

    def __init__(self, model, optimizer, every, run, batch_size, log_grad_norm):
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
        self._orig_step = optimizer.step
        if model is not None and batch_size is None:
            self._hook = model.register_forward_pre_hook(self._pre_forward)
        optimizer.step = self._step

    def _pre_forward(self, module, inputs):
        for x in inputs:
            if isinstance(x, _torch.Tensor) and x.dim() > 0:
                self._last_batch = x.shape[0]
                return

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

    def _step(self, *args, **kwargs):
        if self.profile:
            c0 = time.thread_time()
        now = time.perf_counter()
        if self._window_start is None:
            self._window_start = now
        bs = self.batch_size if self.batch_size is not None else self._last_batch
        self._samples += bs or 0
        log_now = self.steps > 0 and self.steps % self.every == 0
        grad = None
        if log_now and self.log_grad_norm:
            grad = self._norm([p.grad for p in self._params() if p.grad is not None])
        if self.profile:
            c1 = time.thread_time()
        out = self._orig_step(*args, **kwargs)
        if self.profile:
            c2 = time.thread_time()
        if log_now:
            window = now - self._window_start
            pnorm = self._norm(list(self._params()))
            norms = [n for n in (pnorm, grad) if n is not None]
            # Both norms read with one device sync, after the step was queued.
            got = _torch.stack(norms).tolist() if norms else []
            values = {"lr": float(self.optimizer.param_groups[0].get("lr", 0.0)),
                      "param_norm": got.pop(0) if pnorm is not None else 0.0}
            if self.log_grad_norm:
                values["grad_norm"] = got.pop(0) if grad is not None else 0.0
            if window > 0:
                values["step_time_seconds"] = window / self.every
                if self._samples:
                    values["samples_per_sec"] = (self._samples - (bs or 0)) / window
            run = self.run or _run.current
            if run is not None:
                run.log(values, step=self.steps)
            self._window_start = now
            self._samples = bs or 0
        self.steps += 1
        if self.profile:
            self.overhead_seconds += (c1 - c0) + (time.thread_time() - c2)
        return out

    def remove(self):
        if self._hook is not None:
            self._hook.remove()
        self.optimizer.step = self._orig_step


def watch(model, optimizer, every=10, run=None, batch_size=None, log_grad_norm=True):
    """Logs grad_norm, param_norm, lr, samples_per_sec and step_time_seconds
    every `every` optimizer steps to `run` (default: the last init()).
    batch_size: samples per step, when the model's first input does not say."""
    return Watch(model, optimizer, every, run, batch_size, log_grad_norm)
