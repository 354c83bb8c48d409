#!/usr/bin/env python3
"""Unit tests of the Python client's rich values and artifact hashing
(clients/python/trainwatch: media.py, artifacts.py, the sender's batching
of rich values, torch.watch(log=...)), without a server: Histogram from a
list (numpy and the standard library), a numpy array, a torch tensor and
counts + edges; the PNG encoder, decoded back with zlib; Image's signature
checks, arrays and tensors; Text and Table limits and cells; batches that
carry rich values (JSON the server accepts, split by the media byte budget
without reordering, spooled by a Run whose server is down); the summary
refusing them; file and directory digests; watch()'s histograms.
The numpy and torch cases skip where those are not installed
(Debian: python3-numpy, python3-torch).

Usage: python_media_unit_test.py [unittest args]
"""
import base64
import glob
import hashlib
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import unittest
import zlib

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

import trainwatch  # noqa: E402
from trainwatch import artifacts, media  # noqa: E402
from trainwatch._sender import Sender  # noqa: E402

try:
    import numpy as np
except ImportError:
    np = None
try:
    import torch
except ImportError:
    torch = None

needs_numpy = unittest.skipIf(np is None, "numpy missing (Debian: python3-numpy)")
needs_torch = unittest.skipIf(torch is None, "torch missing (Debian: python3-torch)")


def decode_png(data):
    """(width, height, colour type, pixel rows as bytes) of a PNG with 8-bit
    samples and filter 0 rows, every chunk's CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    pos, chunks = 8, []
    while pos < len(data):
        n, = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks.append((kind, body))
        pos += 12 + n
    assert [k for k, _ in chunks][0] == b"IHDR" and chunks[-1][0] == b"IEND", [k for k, _ in chunks]
    w, h, depth, color, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, comp, filt, interlace) == (8, 0, 0, 0)
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    channels = {0: 1, 4: 2, 2: 3, 6: 4}[color]
    stride = w * channels
    rows = []
    for y in range(h):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        assert line[0] == 0, "filter %d" % line[0]
        rows.append(line[1:])
    assert len(raw) == h * (stride + 1)
    return w, h, color, rows


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once closed


class HistogramTest(unittest.TestCase):
    def counts(self, h):
        return [b[2] for b in h.buckets]

    def check_shape(self, buckets):
        for i, (lo, hi, c) in enumerate(buckets):
            self.assertLessEqual(lo, hi)
            self.assertGreaterEqual(c, 0)
            if i:
                self.assertGreaterEqual(lo, buckets[i - 1][1])

    def test_from_a_list_standard_library(self):
        b = media._histogram_py([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, float("nan"), float("inf"), -float("inf")], 5)
        self.assertEqual(b, [[0.0, 1.8, 2], [1.8, 3.6, 2], [3.6, 5.4, 2], [5.4, 7.2, 2], [7.2, 9.0, 2]])
        self.check_shape(b)
        # The maximum lands in the last bucket; bools and numeric strings are numbers.
        self.assertEqual(media._histogram_py([1, 2, 2, 3], 2), [[1.0, 2.0, 1], [2.0, 3.0, 3]])
        self.assertIsNone(media._histogram_py([float("nan")], 4))
        with self.assertRaises(ValueError):
            media._histogram_py([1, None], 4)

    def test_from_a_list(self):
        h = trainwatch.Histogram([1, 2, 3, 4, float("nan")], bins=3)
        self.assertEqual(h.buckets, [[1.0, 2.0, 1], [2.0, 3.0, 1], [3.0, 4.0, 2]])
        self.assertEqual(h.to_json(), {"_type": "histogram", "buckets": h.buckets})
        self.assertEqual(trainwatch.Histogram((5, 5, 5)).buckets, [[5.0, 5.0, 3]])  # constant: one bucket
        self.assertEqual(sum(self.counts(trainwatch.Histogram(range(1000)))), 1000)
        self.assertEqual(len(trainwatch.Histogram(range(1000)).buckets), 64)  # default bins

    def test_errors(self):
        for bad in ([], [float("nan"), float("inf")]):
            with self.assertRaisesRegex(ValueError, "no finite values"):
                trainwatch.Histogram(bad)
        for bins in (0, 4097, 2.5, True):
            with self.assertRaises(ValueError):
                trainwatch.Histogram([1, 2], bins=bins)
        with self.assertRaises(ValueError):
            trainwatch.Histogram("abc")
        with self.assertRaises(ValueError):
            trainwatch.Histogram([1], counts=[1], edges=[0, 1])
        with self.assertRaises(ValueError):
            trainwatch.Histogram()

    def test_counts_and_edges(self):
        h = trainwatch.Histogram(counts=[3, 0, 2.5], edges=[-1, 0, 0.5, 2])
        self.assertEqual(h.buckets, [[-1.0, 0.0, 3], [0.0, 0.5, 0], [0.5, 2.0, 2.5]])
        for counts, edges, msg in (([1, 2], [0, 1], "3 edges|2 edges"), ([1], [1, 0], "ascending"),
                                   ([-1], [0, 1], "counts\\[0\\]"), ([float("nan")], [0, 1], "counts"),
                                   ([1], [0, float("inf")], "finite"), ([], [0], "empty"),
                                   ([1] * 4097, range(4098), "at most 4096")):
            with self.assertRaisesRegex(ValueError, msg):
                trainwatch.Histogram(counts=counts, edges=edges)

    @needs_numpy
    def test_from_numpy(self):
        rng = np.random.default_rng(0)
        a = rng.normal(size=(50, 40))
        a[0, 0], a[1, 1] = np.nan, np.inf
        h = trainwatch.Histogram(a, bins=16)
        want, edges = np.histogram(a[np.isfinite(a)], bins=16)
        self.assertEqual(self.counts(h), want.tolist())
        self.assertAlmostEqual(h.buckets[0][0], edges[0])
        self.assertAlmostEqual(h.buckets[-1][1], edges[-1])
        self.check_shape(h.buckets)
        # numpy.histogram's own answer as counts + edges.
        h2 = trainwatch.Histogram(counts=want, edges=edges)
        self.assertEqual(self.counts(h2), want.tolist())
        self.assertTrue(all(type(c) is int for c in self.counts(h2)))
        self.assertEqual(trainwatch.Histogram(np.full(7, 2.5, dtype=np.float32)).buckets, [[2.5, 2.5, 7]])
        self.assertEqual(trainwatch.Histogram([np.float32(1), np.int64(3)], bins=2).buckets,
                         [[1.0, 2.0, 1], [2.0, 3.0, 1]])
        with self.assertRaises(ValueError):
            trainwatch.Histogram(np.array([]))

    @needs_torch
    def test_from_torch(self):
        torch.manual_seed(0)
        t = torch.randn(3000)
        t[7], t[9] = float("nan"), -float("inf")
        h = trainwatch.Histogram(t, bins=20)
        finite = t[torch.isfinite(t)]
        self.assertEqual(sum(self.counts(h)), finite.numel())
        want = torch.histc(finite, bins=20, min=float(finite.min()), max=float(finite.max())).tolist()
        self.assertEqual(self.counts(h), [int(c) for c in want])
        self.assertEqual(h.buckets[0][0], float(finite.min()))
        self.assertEqual(h.buckets[-1][1], float(finite.max()))
        self.check_shape(h.buckets)
        # The accelerators' sync-free way (run here on CPU): the same buckets, in passes of
        # TORCH_CHUNK elements too, and under torch.use_deterministic_algorithms (index_put_).
        def device_way():
            return media.buckets_from_torch(media._device_histogram(t, 20).tolist(), 20)

        self.assertEqual(device_way(), h.buckets)
        old = media.TORCH_CHUNK
        media.TORCH_CHUNK = 101
        try:
            self.assertEqual(device_way(), h.buckets)
        finally:
            media.TORCH_CHUNK = old
        torch.use_deterministic_algorithms(True)
        try:
            self.assertEqual(device_way(), h.buckets)
        finally:
            torch.use_deterministic_algorithms(False)
        for const in (torch.full((9,), 3.0), torch.tensor([float("nan"), 2.0, float("inf")])):
            self.assertEqual(media.buckets_from_torch(media._device_histogram(const, 4).tolist(), 4),
                             trainwatch.Histogram(const, bins=4).buckets)
        self.assertIsNone(media.buckets_from_torch(media._device_histogram(torch.tensor([float("nan")]), 4).tolist(), 4))
        # Any shape and dtype; a tensor that requires grad; constant; nothing finite.
        self.assertEqual(trainwatch.Histogram(torch.arange(6).reshape(2, 3), bins=3).buckets,
                         [[0.0, 5 / 3, 2], [5 / 3, 10 / 3, 2], [10 / 3, 5.0, 2]])
        self.assertEqual(trainwatch.Histogram(torch.ones(4, dtype=torch.float16)).buckets, [[1.0, 1.0, 4]])
        self.assertEqual(sum(self.counts(trainwatch.Histogram(torch.randn(5, requires_grad=True)))), 5)
        with self.assertRaises(ValueError):
            trainwatch.Histogram(torch.tensor([float("nan")]))
        with self.assertRaises(ValueError):
            trainwatch.Histogram(torch.tensor([]))


class ImageTest(unittest.TestCase):
    def test_png_encoder_round_trip(self):
        for channels, color in ((1, 0), (2, 4), (3, 2), (4, 6)):
            w, h = 7, 5
            pixels = bytes((x * 31 + y * 17 + c * 5) % 256 for y in range(h) for x in range(w) for c in range(channels))
            png = media.encode_png(pixels, w, h, channels)
            gw, gh, gcolor, rows = decode_png(png)
            self.assertEqual((gw, gh, gcolor), (w, h, color))
            self.assertEqual(b"".join(rows), pixels)
        with self.assertRaises(ValueError):
            media.encode_png(b"\0" * 5, 2, 2, 1)
        with self.assertRaises(ValueError):
            media.encode_png(b"", 0, 0, 3)
        with self.assertRaises(ValueError):
            media.encode_png(b"\0" * 10, 1, 2, 5)

    def test_bytes_and_signatures(self):
        png = media.encode_png(b"\x10\x20\x30", 1, 1, 3)
        img = trainwatch.Image(png, caption="one pixel")
        self.assertEqual(img.to_json(), {"_type": "image", "format": "png",
                                         "data": base64.b64encode(png).decode(), "caption": "one pixel"})
        jpeg = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\0" * 20 + b"\xff\xd9"
        j = trainwatch.Image(bytearray(jpeg), format="jpg")
        self.assertEqual((j.format, base64.b64decode(j.to_json()["data"])), ("jpeg", jpeg))
        self.assertNotIn("caption", j.to_json())
        with self.assertRaisesRegex(ValueError, "neither PNG nor JPEG"):
            trainwatch.Image(b"GIF89a....")
        with self.assertRaisesRegex(ValueError, "neither PNG nor JPEG"):
            trainwatch.Image(b"")
        with self.assertRaisesRegex(ValueError, "is PNG"):
            trainwatch.Image(png, format="jpeg")
        with self.assertRaisesRegex(ValueError, "format="):
            trainwatch.Image(png, format="gif")
        with self.assertRaisesRegex(ValueError, "not int"):
            trainwatch.Image(42)
        with self.assertRaisesRegex(ValueError, "over 16 MiB"):
            trainwatch.Image(png + b"\0" * (16 << 20))

    def test_path(self):
        tmp = tempfile.mkdtemp(prefix="tw-media-unit-")
        self.addCleanup(shutil.rmtree, tmp)
        png = media.encode_png(b"\xff" * 12, 2, 2, 3)
        p = os.path.join(tmp, "a.png")
        with open(p, "wb") as f:
            f.write(png)
        import pathlib
        for arg in (p, pathlib.Path(p)):
            self.assertEqual(trainwatch.Image(arg).data, png)
        bad = os.path.join(tmp, "a.txt")
        with open(bad, "w") as f:
            f.write("hello")
        with self.assertRaisesRegex(ValueError, "a.txt is neither PNG nor JPEG"):
            trainwatch.Image(bad)
        with self.assertRaisesRegex(ValueError, "cannot read"):
            trainwatch.Image(os.path.join(tmp, "missing.png"))

    @needs_numpy
    def test_numpy_arrays(self):
        gray = np.array([[0, 128], [255, 7]], dtype=np.uint8)
        w, h, color, rows = decode_png(trainwatch.Image(gray).data)
        self.assertEqual((w, h, color, rows), (2, 2, 0, [b"\x00\x80", b"\xff\x07"]))
        # Float in [0, 1] (clipped, NaN as 0), HxWx3.
        rgb = np.zeros((2, 3, 3))
        rgb[0, 0] = [1.0, 0.5, 0.0]
        rgb[1, 2] = [2.0, -1.0, np.nan]
        w, h, color, rows = decode_png(trainwatch.Image(rgb).data)
        self.assertEqual((w, h, color), (3, 2, 2))
        self.assertEqual(rows[0][:3], bytes([255, 128, 0]))
        self.assertEqual(rows[1][6:9], bytes([255, 0, 0]))
        # HxWx1, HxWx4, CxHxW, bool.
        self.assertEqual(decode_png(trainwatch.Image(np.ones((3, 2, 1), dtype=np.uint8)).data)[:3], (2, 3, 0))
        self.assertEqual(decode_png(trainwatch.Image(np.ones((3, 2, 4), dtype=np.uint8)).data)[:3], (2, 3, 6))
        chw = np.arange(3 * 5 * 6, dtype=np.uint8).reshape(3, 5, 6)
        w, h, color, rows = decode_png(trainwatch.Image(chw).data)
        self.assertEqual((w, h, color), (6, 5, 2))
        self.assertEqual(rows[1][:3], bytes(chw[:, 1, 0].tolist()))
        self.assertEqual(decode_png(trainwatch.Image(np.eye(2, dtype=bool)).data)[3], [b"\xff\x00", b"\x00\xff"])
        for bad, msg in ((np.zeros((2, 2, 5)), "channels"), (np.zeros((1, 2, 2, 3)), "one image"),
                         (np.array([[300]]), "0..255"), (np.array([["a"]]), "dtype"),
                         (np.zeros((0, 3)), "at least one pixel")):
            with self.assertRaisesRegex(ValueError, msg):
                trainwatch.Image(bad)
        with self.assertRaisesRegex(ValueError, "encoded as PNG"):
            trainwatch.Image(gray, format="jpeg")

    @needs_torch
    def test_torch_tensors(self):
        chw = torch.zeros(3, 2, 4)
        chw[0, 0, 0] = 1.0  # red top-left
        chw[2, 1, 3] = 0.5  # half blue bottom-right
        w, h, color, rows = decode_png(trainwatch.Image(chw, caption="c").data)
        self.assertEqual((w, h, color), (4, 2, 2))
        self.assertEqual(rows[0][:3], b"\xff\x00\x00")
        self.assertEqual(rows[1][9:12], b"\x00\x00\x80")
        hwc = torch.zeros(5, 6, 3, dtype=torch.uint8)
        hwc[4, 5] = torch.tensor([1, 2, 3], dtype=torch.uint8)
        w, h, color, rows = decode_png(trainwatch.Image(hwc).data)
        self.assertEqual((w, h), (6, 5))
        self.assertEqual(rows[4][15:18], b"\x01\x02\x03")
        self.assertEqual(decode_png(trainwatch.Image(torch.ones(1, 3, 2, requires_grad=True)).data)[:3], (2, 3, 0))
        with self.assertRaises(ValueError):
            trainwatch.Image(torch.zeros(2, 3, 4, 5))


class TextTableTest(unittest.TestCase):
    def test_text(self):
        t = trainwatch.Text("# title\n**bold** é")
        self.assertEqual(t.to_json(), {"_type": "text", "text": "# title\n**bold** é"})
        trainwatch.Text("x" * (1 << 20))
        with self.assertRaisesRegex(ValueError, "1 MiB"):
            trainwatch.Text("é" * (1 << 19) + "x")
        with self.assertRaises(ValueError):
            trainwatch.Text(b"bytes")

    def test_table(self):
        t = trainwatch.Table(columns=["a", "b"], rows=[[1, "x"], (2.5, None), [True, float("nan")]])
        self.assertEqual(t.to_json(), {"_type": "table", "columns": ["a", "b"],
                                       "rows": [[1, "x"], [2.5, None], [True, None]]})
        # data: the columns' union in first-seen order, missing cells None.
        t = trainwatch.Table(data=[{"id": 1, "pred": "cat"}, {"id": 2, "score": 0.9}, {"pred": "dog", "id": 3}])
        self.assertEqual(t.columns, ["id", "pred", "score"])
        self.assertEqual(t.rows, [[1, "cat", None], [2, None, 0.9], [3, "dog", None]])
        t = trainwatch.Table(columns=["pred"], data=[{"id": 1, "pred": "cat"}])
        self.assertEqual(t.rows, [["cat"]])
        json.dumps(t.to_json(), allow_nan=False)
        with self.assertRaisesRegex(ValueError, "row 1 has 1 cells"):
            trainwatch.Table(columns=["a", "b"], rows=[[1, 2], [3]])
        with self.assertRaisesRegex(TypeError, "row 0, column 'a'"):
            trainwatch.Table(columns=["a"], rows=[[object()]])
        with self.assertRaisesRegex(ValueError, "columns"):
            trainwatch.Table(rows=[[1]])
        with self.assertRaisesRegex(ValueError, "0 columns"):
            trainwatch.Table(columns=[], rows=[])
        with self.assertRaisesRegex(ValueError, "1001 columns"):
            trainwatch.Table(columns=range(1001))
        with self.assertRaisesRegex(ValueError, "cells"):
            trainwatch.Table(columns=["a", "b"], rows=[[0, 0]] * 50001)
        with self.assertRaisesRegex(ValueError, "data\\[1\\]"):
            trainwatch.Table(data=[{"a": 1}, [2]])

    @needs_numpy
    def test_table_numpy_cells(self):
        t = trainwatch.Table(columns=["i", "f", "b", "nan"],
                             rows=[[np.int64(3), np.float32(0.5), np.bool_(True), np.float64("nan")]])
        self.assertEqual(t.rows, [[3, 0.5, True, None]])
        self.assertEqual([type(c) for c in t.rows[0][:3]], [int, float, bool])


class BatchTest(unittest.TestCase):
    """Rich values through the sender's batching, without a server."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-media-unit-")
        self.warnings = []

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def sender(self, **kw):
        body = {"id": "m1", "project": "p", "rank": 0, "host": "h", "pid": os.getpid(), "world_size": 1,
                "name": "m"}
        return Sender("http://127.0.0.1:%d" % closed_port(), "m1", 0, "h", os.path.join(self.tmp, "m1.r0"), body,
                      warn=self.warnings.append, **kw)

    def test_a_batch_carries_rich_values_beside_numbers(self):
        s = self.sender()
        h = trainwatch.Histogram([1, 2, 3], bins=2)
        png = media.encode_png(b"\0\0\0", 1, 1, 3)
        s.points.append((5, 1000, {"loss": 0.5, "w": h, "img": trainwatch.Image(png, caption="c"),
                                   "note": trainwatch.Text("hi"), "tab": trainwatch.Table(columns=["a"], rows=[[1]]),
                                   "nan": float("nan")}))
        seq, path, body = s._form(1000)
        self.assertEqual(path, "/api/v1/runs/m1/batches")
        values = body["points"][0]["values"]
        self.assertEqual(values["loss"], 0.5)
        self.assertEqual(values["nan"], "NaN")
        self.assertEqual(values["w"], {"_type": "histogram", "buckets": [[1.0, 2.0, 1], [2.0, 3.0, 2]]})
        self.assertEqual(values["img"], {"_type": "image", "format": "png", "data": base64.b64encode(png).decode(),
                                         "caption": "c"})
        self.assertEqual(values["note"], {"_type": "text", "text": "hi"})
        self.assertEqual(values["tab"], {"_type": "table", "columns": ["a"], "rows": [[1]]})
        json.dumps(body, allow_nan=False)  # what Http.request sends
        self.assertEqual(self.warnings, [])
        s.http.close()

    def test_the_media_byte_budget_splits_batches_in_order(self):
        s = self.sender(batch_media_bytes=3000)
        texts = [trainwatch.Text(str(i) * 1000) for i in range(5)]
        s.media_bytes = sum(t.nbytes for t in texts)
        s.points.append((0, 10, {"loss": 1.0, "a": texts[0], "b": texts[1], "c": texts[2], "lr": 0.1}))
        s.points.append((1, 11, {"a": texts[3], "loss": 2.0}))
        s.points.append((2, 12, {"big": texts[4]}))
        s.ops.append(("/api/v1/runs/m1/finish", {"status": "finished"}))
        quota = [len(s.points), len(s.ops)]
        bodies = []
        while True:
            item = s._form(1000, quota)
            if item is None:
                break
            bodies.append(item)
        paths = [p for _, p, _ in bodies]
        self.assertEqual(paths[-1], "/api/v1/runs/m1/finish")  # the op after every point logged before it
        self.assertTrue(all(p.endswith("/batches") for p in paths[:-1]))
        self.assertEqual([seq for seq, _, _ in bodies], sorted(seq for seq, _, _ in bodies))
        got = []
        for _, _, body in bodies[:-1]:
            media_bytes = 0
            for pt in body["points"]:
                for k, v in pt["values"].items():
                    got.append((pt["step"], pt["ts"], k))
                    if isinstance(v, dict):
                        media_bytes += len(json.dumps(v))
            self.assertLessEqual(media_bytes, 3000 * 1.1)
        self.assertGreaterEqual(len(bodies) - 1, 3)
        self.assertEqual(got, [(0, 10, "loss"), (0, 10, "a"), (0, 10, "b"), (0, 10, "c"), (0, 10, "lr"),
                               (1, 11, "a"), (1, 11, "loss"), (2, 12, "big")])
        self.assertEqual((len(s.points), len(s.ops), s.media_bytes), (0, 0, 0))
        # One value larger than the budget goes alone.
        s.points.append((3, 13, {"huge": trainwatch.Text("x" * 5000)}))
        _, _, body = s._form(1000)
        self.assertEqual(list(body["points"][0]["values"]), ["huge"])
        s.http.close()

    def test_a_run_spools_rich_values_while_the_server_is_down(self):
        run = trainwatch.init(project="p", name="offline", url="http://127.0.0.1:%d" % closed_port(),
                              spool_dir=self.tmp, capture_output=False, install_hooks=False, flush_interval=0.05,
                              max_queue_bytes=50000)
        run._sender._warn = self.warnings.append
        with self.assertRaisesRegex(TypeError, "log it with run.log"):
            run.summary["img"] = trainwatch.Text("x")
        run.summary["best"] = 1.0
        for step in range(30):
            run.log({"loss": 1.0 / (step + 1), "h": trainwatch.Histogram([step, step + 1, step + 3], bins=2),
                     "t": trainwatch.Text("step %d " % step + "y" * 3000)}, step=step)
            # The queue's media bytes stay bounded (spilled to the spool past max_queue_bytes).
            self.assertLessEqual(run._sender.media_bytes, 50000 + 4000)
        run.finish(timeout=0.2)
        got = {}
        for fn in sorted(glob.glob(os.path.join(self.tmp, "*", "op-*.json"))):
            with open(fn) as f:
                op = json.load(f)
            if op["path"].endswith("/batches"):
                for pt in op["body"]["points"]:
                    for k, v in pt["values"].items():
                        got.setdefault(k, {})[pt["step"]] = v
        self.assertEqual(sorted(got), ["h", "loss", "t"])
        self.assertEqual(sorted(got["t"]), list(range(30)))
        self.assertEqual(got["h"][4], {"_type": "histogram", "buckets": [[4.0, 5.5, 2], [5.5, 7.0, 1]]})
        self.assertEqual(got["t"][29]["text"], "step 29 " + "y" * 3000)
        self.assertFalse([w for w in self.warnings if "not a number" in w], self.warnings)


class ArtifactHashTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-media-unit-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, rel, data):
        p = os.path.join(self.tmp, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def test_file_digest(self):
        data = os.urandom(3 * artifacts.PIECE + 17)
        p = self.write("model.pt", data)
        self.assertEqual(artifacts.file_digest(p), (hashlib.sha256(data).hexdigest(), len(data)))
        self.assertEqual(artifacts.file_digest(self.write("empty", b"")), (hashlib.sha256(b"").hexdigest(), 0))

    def test_directory_manifest(self):
        self.write("ckpt/b.bin", b"bbb")
        self.write("ckpt/a/z.txt", b"z")
        self.write("ckpt/a.txt", b"aa")
        m = artifacts.directory_manifest(os.path.join(self.tmp, "ckpt"))
        self.assertEqual([e["path"] for e in m], ["a.txt", "a/z.txt", "b.bin"])
        self.assertEqual(m[2], {"path": "b.bin", "sha256": hashlib.sha256(b"bbb").hexdigest(), "size": 3})
        digest, size = artifacts.manifest_digest(m)
        text = json.dumps(m, sort_keys=True, separators=(",", ":"))
        self.assertEqual((digest, size), (hashlib.sha256(text.encode()).hexdigest(), 6))
        # The same tree written in another order: the same digest; a changed byte: another.
        self.write("copy/a/z.txt", b"z")
        self.write("copy/b.bin", b"bbb")
        self.write("copy/a.txt", b"aa")
        self.assertEqual(artifacts.manifest_digest(artifacts.directory_manifest(os.path.join(self.tmp, "copy"))),
                         (digest, size))
        self.write("copy/a.txt", b"ab")
        self.assertNotEqual(artifacts.manifest_digest(artifacts.directory_manifest(os.path.join(self.tmp, "copy")))[0],
                            digest)

    def test_log_artifact_refuses_before_sending(self):
        run = trainwatch.init(project="p", name="art", url="http://127.0.0.1:%d" % closed_port(),
                              spool_dir=os.path.join(self.tmp, "spool"), capture_output=False, install_hooks=False)
        run._sender._warn = lambda msg: None
        self.write("d/x", b"x")
        with self.assertRaisesRegex(ValueError, "is a directory: upload=True takes a file"):
            run.log_artifact(os.path.join(self.tmp, "d"), upload=True)
        with self.assertRaises(FileNotFoundError):
            run.log_artifact(os.path.join(self.tmp, "missing"))
        with self.assertRaisesRegex(ValueError, "name"):
            run.log_artifact(os.path.join(self.tmp, "d", "x"), name="a/b")
        with self.assertRaises(ValueError):
            run.use_artifact("m", version="latest-ish")
        # The server is down: a clear error, not a hang or a silent drop.
        with self.assertRaisesRegex(trainwatch.ApiError, "unreachable"):
            run.log_artifact(os.path.join(self.tmp, "d", "x"))
        run.finish(timeout=0.1)


@needs_torch
class WatchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tw-media-unit-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    class Recorder:
        def __init__(self):
            self.logged = []

        def log(self, values, step=None):
            self.logged.append((step, dict(values)))

    def train(self, steps, **kw):
        import trainwatch.torch as twt
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        model[0].bias.requires_grad_(False)  # frozen: no histograms
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        rec = self.Recorder()
        w = twt.watch(model, opt, run=rec, **kw)
        for _ in range(steps):
            loss = model(torch.randn(16, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        w.remove()
        return model, rec.logged

    def test_default_logs_no_histograms(self):
        _, logged = self.train(25, every=10)
        self.assertEqual([s for s, _ in logged], [10, 20])
        for _, values in logged:
            self.assertFalse([k for k, v in values.items() if not isinstance(v, float)], values)

    def test_histograms_every_log_freq_steps(self):
        model, logged = self.train(25, every=10, log="all", log_freq=12, bins=8)
        steps = {s: v for s, v in logged}
        self.assertEqual(sorted(steps), [0, 10, 12, 20, 24])
        names = ["0.weight", "2.weight", "2.bias"]
        want = sorted(["gradients/" + n for n in names] + ["parameters/" + n for n in names])
        for s in (0, 12, 24):
            self.assertEqual(sorted(k for k in steps[s] if "/" in k and not k.startswith("step_phase/")), want)
        for s in (10, 20):
            self.assertIn("grad_norm", steps[s])
            self.assertFalse([k for k in steps[s] if k.startswith(("gradients/", "parameters/"))])
        h = steps[24]["parameters/0.weight"]
        self.assertIsInstance(h, trainwatch.Histogram)
        self.assertEqual(len(h.buckets), 8)
        self.assertEqual(sum(b[2] for b in h.buckets), 32)
        # The parameters after step 24 are the model's now (training ended there).
        w = model[0].weight.detach()
        self.assertAlmostEqual(h.buckets[0][0], float(w.min()), places=6)
        self.assertAlmostEqual(h.buckets[-1][1], float(w.max()), places=6)
        self.assertEqual(steps[0]["parameters/2.bias"].buckets[0][2], 1)  # one value: one bucket
        _, logged = self.train(3, every=10, log="gradients", log_freq=1)
        self.assertEqual([s for s, _ in logged], [0, 1, 2])
        self.assertTrue(all(k.startswith("gradients/") for _, v in logged for k in v))

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "log="):
            self.train(1, log="weights")
        import trainwatch.torch as twt
        with self.assertRaisesRegex(TypeError, "needs the optimizer"):
            twt.watch(torch.nn.Linear(2, 2), None, log="all")
        with self.assertRaisesRegex(ValueError, "needs the model"):
            twt.watch(None, torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1), log="all")


if __name__ == "__main__":
    unittest.main()
