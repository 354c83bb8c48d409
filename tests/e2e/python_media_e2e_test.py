#!/usr/bin/env python3
"""End-to-end test of the Python client's rich values and artifacts
(clients/python/trainwatch: media.py, Run.log_artifact / use_artifact,
the Api readers) against the real trainwatch binary, read back through the
routes of docs/runs-api.md ("Rich values", "Artifacts"):

- histograms, PNG and JPEG images (with width, height, caption and their
  bytes from the content route), markdown text and tables logged beside
  scalars by step; keys listed with their kind and steps; a step logged
  again replaces its value; a value of another kind than the key's is
  rejected and the key keeps its values; rich values stay out of the
  summary; histograms downsampled to `points` steps keeping the first and
  last; `step=S` answering the last entry at or before S;
- three 6 MiB images in one log() call, split over batches by the client's
  media byte budget, all stored;
- trainwatch.torch.watch(log="all") on a small CPU model (skipped without
  torch);
- artifacts: a file uploaded (streamed) and downloaded byte for byte, the
  same content logged again answering the same version, a new content a new
  version, a directory referenced by its manifest digest, a wrong upload
  refused, use_artifact by latest, number and "v<n>", lineage (producer,
  consumers) in the listing and the run's logged/used, deleting stored
  content; a run whose server came up after init() logging an artifact.

Usage: python_media_e2e_test.py /path/to/trainwatch [unittest args]
"""
import hashlib
import http.client
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

import twtest
from twtest import Server

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLIENT = os.path.join(ROOT, "clients", "python")
sys.path.insert(0, CLIENT)

import trainwatch  # noqa: E402
from trainwatch import artifacts, media  # noqa: E402


def png_of(width, height, channels=3, seed=0, noise=False):
    if noise:
        pixels = os.urandom(width * height * channels)
    else:
        pixels = bytes((x * 7 + y * 13 + c * 29 + seed) % 256
                       for y in range(height) for x in range(width) for c in range(channels))
    return media.encode_png(pixels, width, height, channels)


def jpeg_header(width, height):
    """A JPEG's start: SOI, a JFIF APP0 and a baseline SOF0 giving its size, then EOI
    (what the server reads width and height from)."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def torch_available():
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


class MediaTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tw-pymedia-e2e-")
        cls.server = Server(os.path.join(cls.tmp, "data")).start()
        cls.url = "http://127.0.0.1:%d" % cls.server.port
        cls.api = trainwatch.Api(cls.url)

    @classmethod
    def tearDownClass(cls):
        cls.api.close()
        cls.server.stop_quietly()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def init(self, **kw):
        kw.setdefault("url", self.url)
        kw.setdefault("spool_dir", os.path.join(self.tmp, "spool"))
        kw.setdefault("capture_output", False)
        kw.setdefault("install_hooks", False)
        kw.setdefault("flush_interval", 0.05)
        run = trainwatch.init(**kw)
        self.warnings = []
        run._sender._warn = self.warnings.append
        return run

    def get(self, path, **params):
        if params:
            path += "?" + urllib.parse.urlencode(params)
        status, body = self.server.request("GET", path)
        self.assertEqual(status, 200, body[:500])
        return json.loads(body)["data"]

    def raw(self, method, path, body=None):
        """(status, content type, body bytes) of one request."""
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        try:
            conn.request(method, path, body=body)
            resp = conn.getresponse()
            return resp.status, resp.getheader("Content-Type", ""), resp.read()
        finally:
            conn.close()

    def path_of(self, url):
        u = urllib.parse.urlsplit(url)
        return u.path + ("?" + u.query if u.query else "")

    # ---- rich values ------------------------------------------------------------------
    def test_rich_values_round_trip(self):
        run = self.init(project="media", name="rich")
        pngs = {s: png_of(6 + s, 4, seed=s) for s in (0, 4, 8)}
        jpeg = jpeg_header(640, 480)
        logged_hist = {}
        for step in range(10):
            values = {"loss": 1.0 / (step + 1)}
            h = trainwatch.Histogram([step, step + 1, step + 1, step + 5, float("nan")], bins=4)
            logged_hist[step] = h.buckets
            values["weights"] = h
            if step in pngs:
                values["sample"] = trainwatch.Image(pngs[step], caption="step %d" % step)
            if step == 2:
                values["photo"] = trainwatch.Image(jpeg)
                values["notes"] = trainwatch.Text("# first\n*draft*")
            if step == 3:
                values["preds"] = trainwatch.Table(data=[{"x": 1, "y": "cat"}, {"x": 2.5, "z": True},
                                                         {"y": "dog", "x": float("nan")}])
            run.log(values, step=step)
        run._sender.wake()
        # Logged again in a later batch: the later value wins.
        run.log({"notes": trainwatch.Text("# second")}, step=2)
        # Another kind than the key's: rejected, the key keeps its histograms.
        run.log({"weights": trainwatch.Text("not a histogram")}, step=11)
        run.finish()
        self.assertTrue(any("weights" in w for w in self.warnings), self.warnings)

        keys = self.get("/api/v1/runs/media/keys", ids=run.id)
        self.assertEqual([(k["run"], k["key"], k["kind"]) for k in keys],
                         [(run.id, "notes", "text"), (run.id, "photo", "image"), (run.id, "preds", "table"),
                          (run.id, "sample", "image"), (run.id, "weights", "histogram")])
        by_key = {k["key"]: k for k in keys}
        self.assertEqual((by_key["weights"]["steps"], by_key["weights"]["first_step"],
                          by_key["weights"]["last_step"]), (10, 0, 9))
        self.assertEqual((by_key["sample"]["steps"], by_key["sample"]["first_step"],
                          by_key["sample"]["last_step"]), (3, 0, 8))
        self.assertEqual(self.api.media_keys([run.id]), keys)
        self.assertEqual(self.api.run(run.id).media_keys(), keys)

        # Histograms: every step as logged, rank 0 (the client's batches carry its rank).
        hist = self.get("/api/v1/runs/histograms", ids=run.id, key="weights")
        self.assertEqual([(e["run"], e["rank"], e["step"]) for e in hist], [(run.id, 0, s) for s in range(10)])
        for e in hist:
            self.assertEqual(e["buckets"], logged_hist[e["step"]])
            self.assertIsInstance(e["timestamp"], (int, float))
        self.assertEqual(self.api.histograms(run.id, "weights"), hist)
        few = self.api.run(run.id).histograms("weights", points=4)
        steps = [e["step"] for e in few]
        self.assertEqual((len(steps), steps[0], steps[-1]), (4, 0, 9))
        part = self.api.histograms([run.id], "weights", start=3, end=5)
        self.assertEqual([e["step"] for e in part], [3, 4, 5])
        self.assertEqual(self.api.histograms(run.id, "weights", rank=-1), [])  # no rankless values

        # Images: width, height, caption, bytes and the content route.
        imgs = self.get("/api/v1/runs/media", ids=run.id, key="sample")
        self.assertEqual([e["step"] for e in imgs], [0, 4, 8])
        for e in imgs:
            png = pngs[e["step"]]
            self.assertEqual((e["kind"], e["format"], e["width"], e["height"], e["bytes"], e["caption"], e["rank"]),
                             ("image", "png", 6 + e["step"], 4, len(png), "step %d" % e["step"], 0))
            status, ctype, body = self.raw("GET", self.path_of(e["url"]))
            self.assertEqual((status, ctype.split(";")[0], body), (200, "image/png", png))
        self.assertEqual(self.api.media_content(run.id, "sample", 4), pngs[4])
        self.assertEqual(self.api.run(run.id).media_content("sample", 8, rank=0), pngs[8])
        with self.assertRaises(trainwatch.ApiError) as ctx:
            self.api.media_content(run.id, "sample", 5)
        self.assertEqual(ctx.exception.status, 404)
        # step=S: the last entry at or before S.
        at = self.api.media(run.id, "sample", step=7)
        self.assertEqual([e["step"] for e in at], [4])
        self.assertEqual(len(self.api.media(run.id, "sample", limit=2)), 2)
        photo = self.api.run(run.id).media("photo")
        self.assertEqual([(e["format"], e["width"], e["height"], e["bytes"]) for e in photo],
                         [("jpeg", 640, 480, len(jpeg))])
        status, ctype, body = self.raw("GET", self.path_of(photo[0]["url"]))
        self.assertEqual((status, ctype.split(";")[0], body), (200, "image/jpeg", jpeg))

        # Text (logged again: the later one) and the table (NaN as null).
        notes = self.api.media(run.id, "notes")
        self.assertEqual([(e["step"], e["kind"], e["text"]) for e in notes], [(2, "text", "# second")])
        preds = self.api.media(run.id, "preds")
        self.assertEqual([(e["step"], e["kind"], e["columns"], e["rows"]) for e in preds],
                         [(3, "table", ["x", "y", "z"], [[1, "cat", None], [2.5, None, True], [None, "dog", None]])])

        # Scalars as before; rich values not in the summary.
        info = self.api.run(run.id)
        self.assertEqual(info.state, "finished")
        self.assertIn("loss", info.summary)
        self.assertFalse({"weights", "sample", "notes", "preds", "photo"} & set(info.summary), info.summary)
        self.assertEqual(len(info.history(keys=["loss"], pandas=False)), 10)

    def test_large_images_are_split_over_batches(self):
        run = self.init(project="media", name="large")
        big = [png_of(1100, 1100, channels=4, noise=True) for _ in range(3)]  # ~4.6 MiB each, incompressible
        self.assertTrue(all(len(b) > 4 << 20 for b in big))
        sent = run._sender.sent_batches
        run.log({"loss": 1.0, "a": trainwatch.Image(big[0]), "b": trainwatch.Image(big[1]),
                 "c": trainwatch.Image(big[2])}, step=0)
        run.finish()
        self.assertEqual(self.warnings, [])
        self.assertGreaterEqual(run._sender.sent_batches - sent, 2)  # 3 x ~6.1 MiB of base64 > 16 MiB
        for key, data in zip("abc", big):
            e = self.api.media(run.id, key)
            self.assertEqual([(x["step"], x["bytes"], x["width"]) for x in e], [(0, len(data), 1100)])
            self.assertEqual(self.api.media_content(run.id, key, 0), data)

    @unittest.skipUnless(torch_available(), "torch missing (Debian: python3-torch)")
    def test_torch_watch_histograms(self):
        code = r'''
import sys
sys.path.insert(0, %r)
import torch, trainwatch, trainwatch.torch
torch.manual_seed(0)
run = trainwatch.init(project="media", name="watch", url=%r, capture_output=False, flush_interval=0.05)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
trainwatch.torch.watch(model, opt, every=10, log="all", log_freq=5, bins=16)
for step in range(20):
    loss = model(torch.randn(32, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    run.log({"loss": loss.item()}, step=step)
run.finish()
print(run.id)
''' % (CLIENT, self.url)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                             env=dict(os.environ, TRAINWATCH_SPOOL=os.path.join(self.tmp, "spool")))
        self.assertEqual(out.returncode, 0, out.stderr.decode())
        run_id = out.stdout.decode().split()[-1]
        keys = {k["key"]: k for k in self.api.media_keys(run_id)}
        names = ["0.weight", "0.bias", "2.weight", "2.bias"]
        self.assertEqual(sorted(keys), sorted(["gradients/" + n for n in names] + ["parameters/" + n for n in names]))
        self.assertTrue(all(k["kind"] == "histogram" and k["steps"] == 4 for k in keys.values()), keys)
        hist = self.api.histograms(run_id, "parameters/0.weight")
        self.assertEqual([e["step"] for e in hist], [0, 5, 10, 15])
        for e in hist:
            self.assertEqual(sum(b[2] for b in e["buckets"]), 32)
            self.assertEqual(len(e["buckets"]), 16)

    # ---- artifacts ------------------------------------------------------------------
    def test_artifacts(self):
        d = os.path.join(self.tmp, "art")
        os.makedirs(os.path.join(d, "ckpt", "sub"))
        model = os.path.join(d, "model.pt")
        data = os.urandom(3 << 20) + b"tail"
        with open(model, "wb") as f:
            f.write(data)
        for rel, content in (("ckpt/a.bin", b"a" * 100), ("ckpt/sub/b.txt", b"bee")):
            with open(os.path.join(d, rel), "wb") as f:
                f.write(content)

        producer = self.init(project="arts", name="producer")
        v0 = producer.log_artifact(model, upload=True, metadata={"epoch": 1, "loss": float("nan")})
        self.assertEqual((v0["project"], v0["name"], v0["type"], v0["version"], v0["sha256"], v0["size"]),
                         ("arts", "model.pt", "model", 0, hashlib.sha256(data).hexdigest(), len(data)))
        self.assertEqual(v0["uri"], "file://" + os.path.abspath(model))
        self.assertEqual(v0["metadata"], {"epoch": 1, "loss": "NaN"})
        self.assertEqual((v0["stored"], v0["deleted"], v0["producer"]), (True, False, producer.id))
        self.assertEqual(v0["download_url"], "%s/api/v1/artifacts/%d/content" % (self.url, v0["id"]))
        self.assertEqual(self.api.artifact_content(v0["id"]), data)
        status, ctype, body = self.raw("GET", self.path_of(v0["download_url"]))
        self.assertEqual((status, ctype.split(";")[0], body), (200, "application/octet-stream", data))
        out = os.path.join(self.tmp, "downloaded.pt")
        self.assertEqual(self.api.download_artifact(v0["id"], out), out)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), data)

        # The same content again: the same version, nothing added (and not uploaded again).
        again = producer.log_artifact(model, upload=True)
        self.assertEqual((again["id"], again["version"]), (v0["id"], 0))
        # New content: v1, here referenced only.
        with open(model, "ab") as f:
            f.write(b"more")
        v1 = producer.log_artifact(model)
        self.assertEqual((v1["version"], v1["stored"], v1["sha256"]), (1, False, artifacts.file_digest(model)[0]))
        self.assertNotIn("download_url", v1)
        with self.assertRaises(trainwatch.ApiError) as ctx:
            self.api.artifact_content(v1["id"])
        self.assertEqual(ctx.exception.status, 404)
        # A wrong upload is refused and nothing is kept.
        status, _, body = self.raw("PUT", "/api/v1/artifacts/%d/content" % v1["id"], b"not the content")
        self.assertEqual(status, 400, body)
        self.assertFalse(self.api.artifacts("arts", name="model.pt")[0]["stored"])

        # A directory: referenced, by its manifest's digest.
        ckpt = os.path.join(d, "ckpt")
        dv = producer.log_artifact(ckpt, name="ckpt", type="checkpoint", metadata={"files": 2})
        digest, size = artifacts.manifest_digest(artifacts.directory_manifest(ckpt))
        self.assertEqual((dv["name"], dv["version"], dv["sha256"], dv["size"], dv["stored"], dv["uri"]),
                         ("ckpt", 0, digest, 103, False, "file://" + os.path.abspath(ckpt)))
        self.assertEqual(size, 103)
        with self.assertRaisesRegex(ValueError, "directory"):
            producer.log_artifact(ckpt, upload=True)
        producer.finish()

        # Lineage: a consumer uses the latest, v0 by number and "v0".
        consumer = self.init(project="arts", name="consumer")
        used = consumer.use_artifact("model.pt")
        self.assertEqual((used["id"], used["version"]), (v1["id"], 1))
        used0 = consumer.use_artifact("model.pt", version="v0")
        self.assertEqual((used0["id"], used0["stored"]), (v0["id"], True))
        self.assertIn("download_url", used0)
        self.assertEqual(consumer.use_artifact("model.pt", version=0)["id"], v0["id"])
        for name, version in (("nope", "latest"), ("model.pt", 7)):
            with self.assertRaises(trainwatch.ApiError) as ctx:
                consumer.use_artifact(name, version=version)
            self.assertEqual(ctx.exception.status, 404)
        consumer.finish()

        listing = self.api.artifacts("arts", name="model.pt")
        self.assertEqual([(v["version"], v["id"]) for v in listing], [(1, v1["id"]), (0, v0["id"])])
        self.assertEqual([v["producer"] for v in listing], [producer.id, producer.id])
        self.assertEqual([v["consumers"] for v in listing], [[consumer.id], [consumer.id]])
        self.assertEqual(sorted(v["name"] for v in self.api.artifacts("arts")), ["ckpt", "model.pt", "model.pt"])
        self.assertEqual(self.get("/api/v1/artifacts", project="arts", name="model.pt"), listing)
        mine = self.api.run(producer.id).artifacts()
        self.assertEqual(sorted(v["id"] for v in mine["logged"]), sorted([v0["id"], v1["id"], dv["id"]]))
        self.assertEqual(mine["used"], [])
        theirs = self.api.run_artifacts(consumer.id)
        self.assertEqual(theirs["logged"], [])
        self.assertEqual(sorted({v["id"] for v in theirs["used"]}), sorted([v0["id"], v1["id"]]))

        # Deleting stored content keeps the version and its lineage.
        status, _, body = self.raw("DELETE", "/api/v1/artifacts/%d/content" % v0["id"])
        self.assertEqual(status, 200, body)
        gone = [v for v in self.api.artifacts("arts", name="model.pt") if v["id"] == v0["id"]][0]
        self.assertEqual((gone["deleted"], gone["sha256"], gone["consumers"]), (True, v0["sha256"], [consumer.id]))
        with self.assertRaises(trainwatch.ApiError) as ctx:
            self.api.artifact_content(v0["id"])
        self.assertEqual(ctx.exception.status, 404)

    def test_artifact_of_a_run_registered_late(self):
        # The server is down at init(): log_artifact() registers the run itself once it is up.
        port = twtest.free_port()
        server = Server(os.path.join(self.tmp, "late-data"), port=port)
        self.addCleanup(server.stop_quietly)
        run = self.init(project="late", name="late", url="http://127.0.0.1:%d" % port)
        f = os.path.join(self.tmp, "late.bin")
        with open(f, "wb") as fh:
            fh.write(b"late content")
        with self.assertRaisesRegex(trainwatch.ApiError, "unreachable") as ctx:
            run.log_artifact(f)
        self.assertIsNone(ctx.exception.status)
        server.start()
        v = run.log_artifact(f, upload=True)
        self.assertEqual((v["version"], v["stored"], v["producer"]), (0, True, run.id))
        run.finish()
        api = trainwatch.Api("http://127.0.0.1:%d" % port)
        try:
            self.assertEqual(api.artifact_content(v["id"]), b"late content")
            self.assertEqual(api.run(run.id).state, "finished")
        finally:
            api.close()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python_media_e2e_test.py /path/to/trainwatch [unittest args]")
    twtest.BINARY = os.path.abspath(sys.argv.pop(1))
    unittest.main()
