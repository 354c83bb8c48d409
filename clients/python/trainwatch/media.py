"""Rich values for run.log(): Histogram, Image, Text and Table (standard library only).

    run.log({"loss": loss,
             "weights": trainwatch.Histogram(layer.weight),          # numpy / torch / a list
             "sample": trainwatch.Image(img_array, caption="epoch 3"),  # PNG/JPEG bytes, a path, arrays
             "notes": trainwatch.Text("**best** so far"),
             "preds": trainwatch.Table(data=[{"x": 1, "y": 0.5}])}, step=step)

Each object is a snapshot taken when it is built (the histogram counted,
the image encoded, the table's cells copied), so the data may change after
it; what is sent is to_json(), the `{"_type": ...}` object of
docs/runs-api.md ("Rich values"). The server's limits are checked here, so
a value it would refuse raises ValueError in the training code rather than
being dropped later. numpy and torch are used when the value is one of
theirs (imported only then); nothing here imports them otherwise.
"""
import base64
import json
import math
import os
import struct
import sys
import zlib

__all__ = ["Media", "Histogram", "Image", "Text", "Table", "encode_png"]

MAX_BUCKETS = 4096
MAX_IMAGE_BYTES = 16 << 20
MAX_TEXT_BYTES = 1 << 20
MAX_COLUMNS = 1000
MAX_CELLS = 100000

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8\xff"


def _module_of(obj):
    return type(obj).__module__.split(".", 1)[0]


def _is_torch(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _is_numpy(obj):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.ndarray)


def _numpy_importable():
    if "numpy" in sys.modules:
        return True
    import importlib.util
    return importlib.util.find_spec("numpy") is not None


def _plain_number(v):
    """numpy / torch scalars as Python numbers (anything else unchanged)."""
    if type(v) in (int, float, bool):
        return v
    if hasattr(v, "item") and _module_of(v) in ("numpy", "torch"):
        try:
            return v.item()
        except (ValueError, RuntimeError):
            return v
    return v


created = False  # whether any rich value was made: until then run.log() skips looking for them


class Media:
    """A rich value: to_json() is what a batch carries; nbytes about its JSON size
    (the sender's batch byte budget)."""

    __slots__ = ("_json", "nbytes")

    def _done(self, doc, nbytes):
        global created
        created = True
        self._json = doc
        self.nbytes = nbytes

    def to_json(self):
        return self._json

    def __repr__(self):
        return "<trainwatch.%s %d bytes>" % (type(self).__name__, self.nbytes)


# ---- histograms -------------------------------------------------------------------

def _check_bins(bins):
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BUCKETS:
        raise ValueError("trainwatch.Histogram: bins=%r: expected an int in 1..%d" % (bins, MAX_BUCKETS))


def _count(v):
    """A count as JSON: an int where it is whole."""
    v = float(v)
    return int(v) if v.is_integer() and abs(v) < 2 ** 53 else v


def _buckets_from(counts, lo, hi, n_finite):
    """Buckets [[lower, upper, count], ...] of equal width over [lo, hi]; one
    bucket [v, v, n] for constant input."""
    if lo == hi:
        return [[lo, hi, _count(n_finite)]]
    bins = len(counts)
    width = (hi - lo) / bins
    edges = [lo + i * width for i in range(bins)] + [hi]
    return [[edges[i], edges[i + 1], _count(counts[i])] for i in range(bins)]


def _histogram_py(values, bins):
    """Standard library: (buckets, count) of the finite numbers of an iterable."""
    vals = []
    for v in values:
        v = _plain_number(v)
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError("trainwatch.Histogram: %r is not a number" % (v,)) from None
        if math.isfinite(f):
            vals.append(f)
    if not vals:
        return None
    lo, hi = min(vals), max(vals)
    if lo == hi:
        return _buckets_from(None, lo, hi, len(vals))
    counts = [0] * bins
    scale = bins / (hi - lo)
    last = bins - 1
    for f in vals:
        i = int((f - lo) * scale)
        counts[i if i < last else last] += 1
    return _buckets_from(counts, lo, hi, len(vals))


def _histogram_numpy(a, bins):
    import numpy as np
    try:
        a = np.asarray(a, dtype=np.float64).ravel()
    except (TypeError, ValueError) as e:
        raise ValueError("trainwatch.Histogram: values are not numbers (%s)" % e) from None
    a = a[np.isfinite(a)]
    if a.size == 0:
        return None
    lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        return _buckets_from(None, lo, hi, a.size)
    counts, _ = np.histogram(a, bins=bins, range=(lo, hi))
    return _buckets_from(counts.tolist(), lo, hi, a.size)


TORCH_CHUNK = 1 << 22  # elements per pass: bounds the temporaries of a histogram of a huge tensor


def torch_histogram(t, bins):
    """The histogram of tensor t's finite values as a float64 tensor of
    bins + 2 values (the counts, then the finite min and max), on t's
    device: read it (one sync for many, stacked) and pass the list to
    buckets_from_torch(). On CPU with torch.histc; on another device
    without a device sync (see _device_histogram)."""
    import torch
    x = t.detach().reshape(-1)
    if x.dtype not in (torch.float32, torch.float64):
        x = x.float()
    if x.device.type != "cpu":
        return _device_histogram(x, bins)
    if not bool(torch.isfinite(x).all()):
        x = x[torch.isfinite(x)]
    out = torch.zeros(bins + 2, dtype=torch.float64)
    if x.numel() == 0:
        out[bins], out[bins + 1] = math.inf, -math.inf
        return out
    lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        out[0] = x.numel()
    else:
        out[:bins] = torch.histc(x, bins=bins, min=lo, max=hi)
    out[bins], out[bins + 1] = lo, hi
    return out


def _device_histogram(x, bins):
    """torch_histogram() of a flat float tensor on an accelerator, queued
    without a device sync, in passes of TORCH_CHUNK elements so that the
    temporaries stay small whatever the tensor's size.

    Not torch.histc: it takes its range as Python numbers (a sync per tensor
    to learn min and max, and histc itself syncs when they are equal) and,
    on CUDA, refuses to run under torch.use_deterministic_algorithms (here
    the counts are added with index_put_(accumulate=True) then, which has a
    deterministic kernel, and with index_add_ otherwise)."""
    import torch
    inf = math.inf
    n = x.numel()
    chunks = [x[i:i + TORCH_CHUNK] for i in range(0, n, TORCH_CHUNK)] or [x]
    if n == 0:
        lo, hi = x.new_full((), inf), x.new_full((), -inf)
    elif len(chunks) == 1:
        lo = torch.nan_to_num(x, nan=inf, posinf=inf, neginf=inf).amin()
        hi = torch.nan_to_num(x, nan=-inf, posinf=-inf, neginf=-inf).amax()
    else:
        lo = torch.stack([torch.nan_to_num(c, nan=inf, posinf=inf, neginf=inf).amin() for c in chunks]).amin()
        hi = torch.stack([torch.nan_to_num(c, nan=-inf, posinf=-inf, neginf=-inf).amax() for c in chunks]).amax()
    # Bucket i + 1 holds [lo + i*w, lo + (i+1)*w) (the last one includes hi); bucket 0 the
    # non-finite values (dropped). A constant tensor lands in bucket 1.
    scale = bins / (hi - lo).clamp(min=1e-30)
    counts = torch.zeros(bins + 1, dtype=torch.float64, device=x.device)
    if n:
        one = torch.ones((), dtype=torch.float64, device=x.device)
        deterministic = torch.are_deterministic_algorithms_enabled()
        for c in chunks:
            pos = (c - lo) * scale
            pos = torch.nan_to_num(pos, nan=-1.0, posinf=-1.0, neginf=-1.0)
            idx = pos.floor_().clamp_(max=bins - 1).add_(1).clamp_(min=0).long()
            if deterministic:
                counts.index_put_((idx,), one, accumulate=True)
            else:
                counts.index_add_(0, idx, one.expand(idx.numel()))
    return torch.cat([counts[1:], lo.double().reshape(1), hi.double().reshape(1)])


def buckets_from_torch(row, bins):
    """The buckets of one row torch_histogram() gave, read back as a list; None when empty."""
    counts, lo, hi = row[:bins], row[bins], row[bins + 1]
    n = sum(counts)
    if not n or not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return _buckets_from(counts, lo, hi, n)


def _histogram_torch(t, bins):
    if t.is_complex():
        raise ValueError("trainwatch.Histogram: complex tensors are not supported")
    return buckets_from_torch(torch_histogram(t, bins).tolist(), bins)


class Histogram(Media):
    """A histogram: of `values` (a list or tuple of numbers, a numpy array or
    a torch tensor of any shape; NaN and infinities are dropped) in `bins`
    equal-width buckets between their min and max, or given as `counts` and
    `edges` (len(edges) = len(counts) + 1, ascending), as numpy.histogram
    returns them. Constant values give one bucket [v, v, n].

    numpy arrays (and lists, where numpy is importable) are counted with
    numpy, tensors with torch on their own device; lists otherwise with the
    standard library. Sent as {"_type": "histogram", "buckets": [[lower,
    upper, count], ...]}; `.buckets` holds them."""

    __slots__ = ("buckets",)

    def __init__(self, values=None, *, counts=None, edges=None, bins=64):
        if values is not None and (counts is not None or edges is not None):
            raise ValueError("trainwatch.Histogram: give values, or counts and edges, not both")
        if values is None:
            if counts is None or edges is None:
                raise ValueError("trainwatch.Histogram: expected values, or counts and edges")
            buckets = self._from_counts(counts, edges)
        else:
            _check_bins(bins)
            if _is_torch(values):
                buckets = _histogram_torch(values, bins)
            elif _is_numpy(values) or _module_of(values) == "numpy":
                buckets = _histogram_numpy(values, bins)
            else:
                if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
                    raise ValueError("trainwatch.Histogram: values: expected a sequence of numbers, "
                                     "a numpy array or a torch tensor, not %s" % type(values).__name__)
                values = list(values)
                if _numpy_importable():
                    buckets = _histogram_numpy([_plain_number(v) for v in values], bins)
                else:
                    buckets = _histogram_py(values, bins)
            if buckets is None:
                raise ValueError("trainwatch.Histogram: no finite values to count")
        self._set(buckets)

    def _set(self, buckets):
        self.buckets = buckets
        self._done({"_type": "histogram", "buckets": buckets}, 32 + 60 * len(buckets))

    @classmethod
    def from_buckets(cls, buckets):
        """A Histogram of ready buckets [[lower, upper, count], ...] (not checked)."""
        h = cls.__new__(cls)
        h._set(buckets)
        return h

    @staticmethod
    def _from_counts(counts, edges):
        counts = counts.tolist() if hasattr(counts, "tolist") else list(counts)
        edges = edges.tolist() if hasattr(edges, "tolist") else list(edges)
        if not counts:
            raise ValueError("trainwatch.Histogram: counts is empty")
        if len(counts) > MAX_BUCKETS:
            raise ValueError("trainwatch.Histogram: %d buckets: at most %d" % (len(counts), MAX_BUCKETS))
        if len(edges) != len(counts) + 1:
            raise ValueError("trainwatch.Histogram: %d edges for %d counts: expected len(counts) + 1"
                             % (len(edges), len(counts)))
        try:
            edges = [float(e) for e in edges]
            counts = [float(c) for c in counts]
        except (TypeError, ValueError):
            raise ValueError("trainwatch.Histogram: counts and edges must be numbers") from None
        for i, e in enumerate(edges):
            if not math.isfinite(e):
                raise ValueError("trainwatch.Histogram: edges[%d] is %r: expected finite edges" % (i, e))
            if i and e < edges[i - 1]:
                raise ValueError("trainwatch.Histogram: edges[%d] = %r is below edges[%d] = %r: expected ascending"
                                 % (i, e, i - 1, edges[i - 1]))
        for i, c in enumerate(counts):
            if not math.isfinite(c) or c < 0:
                raise ValueError("trainwatch.Histogram: counts[%d] is %r: expected a finite count >= 0" % (i, c))
        return [[edges[i], edges[i + 1], _count(counts[i])] for i in range(len(counts))]


# ---- images -------------------------------------------------------------------------

def _png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> PNG colour type (grey, grey+alpha, RGB, RGBA)


def encode_png(pixels, width, height, channels, level=6):
    """A PNG file of 8-bit pixels: `pixels` holds height rows of width x
    channels bytes (1 grey, 2 grey + alpha, 3 RGB, 4 RGBA), row-major.
    Standard library (zlib and struct); every row with filter 0."""
    if channels not in _COLOR_TYPES:
        raise ValueError("trainwatch.encode_png: %d channels: expected 1, 2, 3 or 4" % channels)
    if width < 1 or height < 1:
        raise ValueError("trainwatch.encode_png: %dx%d: expected at least one pixel" % (width, height))
    stride = width * channels
    view = memoryview(pixels).cast("B")
    if len(view) != stride * height:
        raise ValueError("trainwatch.encode_png: %d bytes for %dx%dx%d pixels" % (len(view), height, width, channels))
    comp = zlib.compressobj(level)
    parts = []
    for y in range(height):
        parts.append(comp.compress(b"\x00"))
        parts.append(comp.compress(view[y * stride:(y + 1) * stride]))
    parts.append(comp.flush())
    ihdr = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPES[channels], 0, 0, 0)
    return (PNG_SIGNATURE + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", b"".join(parts))
            + _png_chunk(b"IEND", b""))


def _sniff(data):
    if data[:8] == PNG_SIGNATURE:
        return "png"
    if data[:3] == JPEG_SIGNATURE:
        return "jpeg"
    return None


def _layout(shape, chw_first):
    """(height, width, channels, chw) of an image array's shape; raises ValueError."""
    if len(shape) == 2:
        return shape[0], shape[1], 1, False
    if len(shape) != 3:
        raise ValueError("trainwatch.Image: an array of shape %s: expected HxW, HxWxC or CxHxW (one image)"
                         % (tuple(shape),))
    chw = shape[0] in (1, 3, 4)
    hwc = shape[2] in (1, 3, 4)
    if chw and (chw_first or not hwc):
        return shape[1], shape[2], shape[0], True
    if hwc:
        return shape[0], shape[1], shape[2], False
    raise ValueError("trainwatch.Image: an array of shape %s: expected 1, 3 or 4 channels (HxWxC or CxHxW)"
                     % (tuple(shape),))


def _numpy_pixels(a):
    import numpy as np
    a = np.asarray(a)
    h, w, c, chw = _layout(a.shape, chw_first=False)
    if chw:
        a = a.transpose(1, 2, 0)
    if a.dtype == np.bool_:
        a = a.astype(np.uint8) * 255
    elif a.dtype.kind == "f":
        a = (np.clip(np.nan_to_num(a.astype(np.float64), nan=0.0), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    elif a.dtype.kind in "iu":
        if a.size and (a.min() < 0 or a.max() > 255):
            raise ValueError("trainwatch.Image: integer pixels must be 0..255 (found %d..%d)" % (a.min(), a.max()))
        a = a.astype(np.uint8)
    else:
        raise ValueError("trainwatch.Image: pixels of dtype %s: expected uint8, bool or float in [0, 1]" % a.dtype)
    return np.ascontiguousarray(a).tobytes(), w, h, c


def _torch_pixels(t):
    import torch
    t = t.detach().cpu()
    h, w, c, chw = _layout(tuple(t.shape), chw_first=True)
    if chw:
        t = t.permute(1, 2, 0)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8) * 255
    elif t.is_floating_point():
        t = torch.nan_to_num(t.double(), nan=0.0).clamp(0.0, 1.0).mul(255.0).add(0.5).floor().to(torch.uint8)
    elif t.dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        if t.numel() and (int(t.min()) < 0 or int(t.max()) > 255):
            raise ValueError("trainwatch.Image: integer pixels must be 0..255 (found %d..%d)" % (t.min(), t.max()))
        t = t.to(torch.uint8)
    else:
        raise ValueError("trainwatch.Image: pixels of dtype %s: expected uint8, bool or float in [0, 1]" % t.dtype)
    t = t.contiguous()
    try:
        data = t.numpy().tobytes()
    except (ImportError, RuntimeError, TypeError):  # torch without numpy
        data = bytes(t.reshape(-1).tolist())
    return data, w, h, c


class Image(Media):
    """An image: PNG or JPEG bytes, the path of such a file (str or
    pathlib.Path), a numpy array (HxW, HxWx1/3/4; uint8, bool, or float in
    [0, 1], clipped, NaN as 0), a torch tensor (CxHxW or HxWxC, the same
    dtypes) or a PIL image. Arrays are encoded as PNG with the standard
    library. The format comes from the bytes' signature (`format`, "png" or
    "jpeg", must agree when given); anything else is a ValueError, as is an
    image over the server's 16 MiB. Sent as {"_type": "image", "format",
    "data" (base64), "caption"}."""

    __slots__ = ("format", "data", "caption")

    def __init__(self, data, caption=None, format=None):
        fmt = None if format is None else str(format).lower()
        if fmt == "jpg":
            fmt = "jpeg"
        if fmt not in (None, "png", "jpeg"):
            raise ValueError("trainwatch.Image: format=%r: expected \"png\" or \"jpeg\"" % format)
        source = None
        if isinstance(data, (bytes, bytearray, memoryview)):
            raw = bytes(data)
        elif isinstance(data, (str, os.PathLike)):
            source = os.fspath(data)
            try:
                with open(source, "rb") as f:
                    raw = f.read(MAX_IMAGE_BYTES + 1)
            except OSError as e:
                raise ValueError("trainwatch.Image: cannot read %s: %s" % (source, e.strerror or e)) from None
        elif _is_torch(data) or _is_numpy(data) or _module_of(data) == "PIL":
            if fmt == "jpeg":
                raise ValueError("trainwatch.Image: arrays are encoded as PNG; for JPEG pass the file's bytes")
            if _module_of(data) == "PIL":
                import io
                buf = io.BytesIO()
                data.save(buf, format="PNG")
                raw = buf.getvalue()
            else:
                pixels, w, h, c = _torch_pixels(data) if _is_torch(data) else _numpy_pixels(data)
                raw = encode_png(pixels, w, h, c)
        else:
            raise ValueError("trainwatch.Image: expected PNG or JPEG bytes, a path, a numpy array, a torch tensor "
                             "or a PIL image, not %s" % type(data).__name__)
        what = source or "the data"
        got = _sniff(raw)
        if got is None:
            raise ValueError("trainwatch.Image: %s is neither PNG nor JPEG (starts with %r)" % (what, raw[:8]))
        if fmt is not None and fmt != got:
            raise ValueError("trainwatch.Image: format=%r but %s is %s" % (format, what, got.upper()))
        if len(raw) > MAX_IMAGE_BYTES:
            raise ValueError("trainwatch.Image: %s is over %d MiB (the server's limit for an image)"
                             % (what, MAX_IMAGE_BYTES >> 20))
        self.format = got
        self.data = raw
        self.caption = None if caption is None else str(caption)
        doc = {"_type": "image", "format": got, "data": base64.b64encode(raw).decode("ascii")}
        if self.caption is not None:
            doc["caption"] = self.caption
        self._done(doc, len(doc["data"]) + len(self.caption or "") * 2 + 64)


# ---- text and tables ----------------------------------------------------------------

class Text(Media):
    """Markdown text (at most 1 MiB of UTF-8). Sent as {"_type": "text", "text"}."""

    __slots__ = ("text",)

    def __init__(self, markdown):
        if not isinstance(markdown, str):
            raise ValueError("trainwatch.Text: expected a str, not %s" % type(markdown).__name__)
        n = len(markdown.encode("utf-8", "surrogatepass"))
        if n > MAX_TEXT_BYTES:
            raise ValueError("trainwatch.Text: %d bytes: at most %d (1 MiB)" % (n, MAX_TEXT_BYTES))
        self.text = markdown
        self._done({"_type": "text", "text": markdown}, n + n // 8 + 32)  # + escapes


def _cell(v, r, c):
    if v is None or isinstance(v, (str, bool)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if hasattr(v, "item") and _module_of(v) in ("numpy", "torch"):
        try:
            return _cell(v.item(), r, c)
        except (ValueError, RuntimeError):
            pass
    raise TypeError("trainwatch.Table: row %d, column %r: a %s cell: expected str, int, float, bool or None"
                    % (r, c, type(v).__name__))


class Table(Media):
    """A table: `columns` (names) and `rows` (lists as long as columns), or
    `data`, a list of dicts (the columns are the union of their keys in
    first-seen order; a missing key is None), or a pandas DataFrame.
    Cells are str, int, float, bool or None; numpy and torch scalars become
    Python numbers, and NaN and infinities become None (JSON has no NaN).
    At most 1000 columns and 100,000 cells. Sent as {"_type": "table",
    "columns", "rows"}."""

    __slots__ = ("columns", "rows")

    def __init__(self, columns=None, rows=None, data=None):
        if data is not None:
            if rows is not None:
                raise ValueError("trainwatch.Table: give rows or data, not both")
            if hasattr(data, "columns") and hasattr(data, "itertuples"):  # a pandas DataFrame
                if columns is None:
                    columns = [str(c) for c in data.columns]
                rows = [list(t) for t in data.itertuples(index=False, name=None)]
            else:
                data = list(data)
                if columns is None:
                    seen = {}
                    for i, d in enumerate(data):
                        if not isinstance(d, dict):
                            raise ValueError("trainwatch.Table: data[%d]: expected a dict, not %s"
                                             % (i, type(d).__name__))
                        for k in d:
                            seen.setdefault(str(k), k)
                    columns, keys = list(seen), list(seen.values())
                else:
                    keys = list(columns)
                rows = [[d.get(k) for k in keys] for d in data]
        if columns is None:
            raise ValueError("trainwatch.Table: expected columns (with rows), or data")
        columns = [str(c) for c in columns]
        rows = [] if rows is None else list(rows)
        if not 1 <= len(columns) <= MAX_COLUMNS:
            raise ValueError("trainwatch.Table: %d columns: expected 1..%d" % (len(columns), MAX_COLUMNS))
        if len(columns) * len(rows) > MAX_CELLS:
            raise ValueError("trainwatch.Table: %d cells: at most %d" % (len(columns) * len(rows), MAX_CELLS))
        out = []
        for r, row in enumerate(rows):
            row = list(row)
            if len(row) != len(columns):
                raise ValueError("trainwatch.Table: row %d has %d cells for %d columns" % (r, len(row), len(columns)))
            out.append([_cell(v, r, columns[i]) for i, v in enumerate(row)])
        self.columns = columns
        self.rows = out
        doc = {"_type": "table", "columns": columns, "rows": out}
        self._done(doc, len(json.dumps(doc, separators=(",", ":"), allow_nan=False)))
