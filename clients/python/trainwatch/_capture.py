"""stdout/stderr capture: a tee that leaves the terminal output unchanged and
hands each complete line to the run's log shipping."""
import sys
import threading
import time

_MAX_PARTIAL = 64 * 1024  # a line longer than this is sent in pieces


class _TeeStream:
    def __init__(self, stream, sink, source, level):
        self._stream = stream
        self._sink = sink
        self._source = source
        self._level = level
        self._buf = ""
        self._lock = threading.Lock()
        self.dropped = 0

    def write(self, s):
        n = self._stream.write(s)
        try:
            if not isinstance(s, str):
                s = s.decode("utf-8", "replace")
            with self._lock:
                self._buf += s
                if "\n" in s or len(self._buf) > _MAX_PARTIAL:
                    lines = self._buf.split("\n")
                    self._buf = lines.pop()
                    if len(self._buf) > _MAX_PARTIAL:
                        lines.append(self._buf)
                        self._buf = ""
                    t = time.time()
                    for line in lines:
                        line = line.rstrip("\r")
                        if line:
                            self._sink(t, self._level, line, self._source)
        except Exception:
            self.dropped += 1  # capture must never break the program's output
        return n

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        self._stream.flush()

    def __getattr__(self, name):  # fileno, isatty, encoding, buffer, ...
        return getattr(self._stream, name)


class Tee:
    """Replaces sys.stdout and sys.stderr while installed."""

    def __init__(self, sink):
        # No level: the server reads it from the line ("INFO:root:...",
        # "RuntimeError: CUDA error: ..."), as it does for a tailed file; a
        # stream says nothing (logging writes INFO to stderr, tqdm its bars).
        self.out = _TeeStream(sys.stdout, sink, "stdout", None)
        self.err = _TeeStream(sys.stderr, sink, "stderr", None)

    @classmethod
    def install(cls, sink):
        if isinstance(sys.stdout, _TeeStream) or isinstance(sys.stderr, _TeeStream):
            return None  # another run captures already
        t = cls(sink)
        sys.stdout, sys.stderr = t.out, t.err
        return t

    @property
    def dropped(self):
        return self.out.dropped + self.err.dropped

    def uninstall(self):
        for tee, name in ((self.out, "stdout"), (self.err, "stderr")):
            with tee._lock:
                rest, tee._buf = tee._buf, ""
            if rest:
                tee._sink(time.time(), tee._level, rest, tee._source)
            if getattr(sys, name) is tee:
                setattr(sys, name, tee._stream)
