"""trainwatch client: experiment tracking for training scripts (standard library only).

    import trainwatch
    run = trainwatch.init(project="llama", config={"lr": 3e-4}, total_steps=20000)
    for step in range(20000):
        ...
        with run.timer("data"):                # step phases: data, forward, ...
            batch = next(loader)
        ...
        run.log({"loss": loss, "lr": lr}, step=step)
    run.log({"weights": trainwatch.Histogram(w), "sample": trainwatch.Image(img)}, step=step)
    run.log_artifact("model.pt", type="model", upload=True)
    run.finish()

    api = trainwatch.Api()                     # reading back (trainwatch.api)
    rows = api.run(run.id).history(keys=["loss"], pandas=False)

See README.md next to this package and docs/runs-api.md for the wire format.
"""
from . import run as _run
from .api import Api, ApiError, RunInfo
from .media import Histogram, Image, Table, Text
from .run import LogHandler, Run, init

__version__ = "0.1.0"
__all__ = ["init", "Run", "LogHandler", "log", "timer", "finish", "Api", "ApiError", "RunInfo",
           "Histogram", "Image", "Text", "Table"]


def log(values, step=None):
    """run.log() on the run of the last init()."""
    if _run.current is None:
        raise RuntimeError("trainwatch.log: call trainwatch.init() first")
    _run.current.log(values, step=step)


def timer(phase):
    """run.timer() on the run of the last init(): `with trainwatch.timer("data"): ...`."""
    if _run.current is None:
        raise RuntimeError("trainwatch.timer: call trainwatch.init() first")
    return _run.current.timer(phase)


def finish(status="finished"):
    """run.finish() on the run of the last init()."""
    if _run.current is not None:
        _run.current.finish(status)
