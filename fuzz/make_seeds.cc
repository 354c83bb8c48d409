// Writes seed inputs for the binary-format fuzz targets with the project's
// own writers, so the seeds always match the current formats:
//   make_seeds OUT_DIR  ->  OUT_DIR/<target>/<name>
// Each file starts with the target's mode byte (see the target's comment).
// Run by fuzz/seeds.py before the fuzz tests (a ctest fixture).

#include <snappy.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "base/file.h"
#include "model/labels.h"
#include "model/sample.h"
#include "remote/prom_chunks.h"
#include "remote/proto.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/index/chunks_file.h"
#include "tsdb/index/index_writer.h"
#include "tsdb/wal/records.h"
#include "tsdb/wal/segment.h"
#include "tsdb/wal/wal.h"

namespace fs = std::filesystem;
using namespace trainwatch;

namespace {

void Put(const fs::path& dir, const std::string& name, char mode, std::string_view body) {
  fs::create_directories(dir);
  std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
  f.put(mode);
  f.write(body.data(), static_cast<std::streamsize>(body.size()));
  if (!f) {
    std::fprintf(stderr, "make_seeds: cannot write %s\n", (dir / name).c_str());
    std::exit(1);
  }
}

std::string Slurp(const fs::path& p) {
  std::string s;
  if (!file::ReadFile(p.string(), &s).ok()) {
    std::fprintf(stderr, "make_seeds: cannot read %s\n", p.c_str());
    std::exit(1);
  }
  return s;
}

void Die(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "make_seeds: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

const std::vector<model::Labels>& Series() {
  static const std::vector<model::Labels> s = {
      {{"__name__", "gpu_util"}, {"gpu", "0"}, {"job", "train"}},
      {{"__name__", "gpu_util"}, {"gpu", "1"}, {"job", "train"}},
      {{"__name__", "loss"}, {"job", "train"}, {"run", "lr-sweep-3"}},
      {{"__name__", "up"}, {"instance", "node:9100"}, {"job", "node"}},
  };
  return s;
}

// Samples of a few shapes: counters, decimals, full-precision floats, specials.
void Samples(int shape, std::vector<int64_t>* ts, std::vector<double>* vs) {
  ts->clear();
  vs->clear();
  int64_t t = 1'700'000'000'000;
  for (int i = 0; i < 40; i++) {
    t += shape == 2 ? 15000 + (i % 3) * 7 : 15000;
    ts->push_back(t);
    switch (shape) {
      case 0: vs->push_back(100.0 * i); break;
      case 1: vs->push_back(0.25 + 0.01 * i); break;
      case 2: vs->push_back(std::sin(i) * 1e6 / 3); break;
      default: {
        const double special[] = {std::numeric_limits<double>::quiet_NaN(), INFINITY, -INFINITY, -0.0, 1e308, 5e-324};
        uint64_t stale = model::kStaleNaNBits;
        double sv;
        std::memcpy(&sv, &stale, 8);
        vs->push_back(i % 7 == 6 ? sv : special[i % 6]);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path tmp = out / ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);

  // chunks_fuzz: modes 0 (XOR), 1 (dense), 2 (delta), 3/7 (segment file).
  std::vector<int64_t> ts;
  std::vector<double> vs;
  std::vector<std::pair<uint8_t, std::string>> chunks;
  for (int shape = 0; shape < 4; shape++) {
    Samples(shape, &ts, &vs);
    std::string x, d;
    chunkenc::EncodeXor(ts.data(), vs.data(), ts.size(), &x);
    chunkenc::EncodeDense(ts.data(), vs.data(), ts.size(), &d);
    chunkenc::DeltaChunk dc;
    for (size_t i = 0; i < ts.size(); i++) dc.Append(ts[i], vs[i]);
    std::string n = std::to_string(shape);
    Put(out / "chunks", "xor_" + n, 0, x);
    Put(out / "chunks", "dense_" + n, 1, d);
    Put(out / "chunks", "delta_" + n, 2, dc.Bytes());
    chunks.emplace_back(1, x);
    chunks.emplace_back(2, d);
  }
  {
    auto w = index::ChunkWriter::Create((tmp / "chunks").string());
    Die(w.status(), "chunk writer");
    for (const auto& [enc, bytes] : chunks) Die((*w)->Write(enc, bytes).status(), "chunk write");
    Die((*w)->Finish(), "chunk finish");
    std::string seg = Slurp(tmp / "chunks" / index::ChunkSegmentName(1));
    Put(out / "chunks", "segment", 3, seg);
    Put(out / "chunks", "segment_crc", 7, seg);
  }
  // chunks_fuzz mode bit 4: Prometheus chunks of remote read (XOR 0x10,
  // FLOAT_HISTOGRAM 0x12): a histogram series with a new bucket (recoded),
  // a reset (a second chunk) and custom buckets.
  {
    remote::PromChunkEncoder e;
    model::FloatHistogram h;
    h.zero_threshold = 0.001;
    h.count = 3;
    h.sum = 1.5;
    h.positive_spans = {{-1, 2}};
    h.positive_buckets = {1, 2};
    e.AppendHistogram(1000, h);
    h.count = 5;
    h.positive_spans = {{-1, 3}};
    h.positive_buckets = {1, 3, 1};
    e.AppendHistogram(2000, h);
    h.count = 1;
    h.positive_buckets = {0, 1, 0};
    e.AppendHistogram(3000, h);
    model::FloatHistogram c;
    c.schema = model::kCustomBucketsSchema;
    c.count = 2;
    c.positive_spans = {{0, 3}};
    c.positive_buckets = {1, 0, 1};
    c.custom_values = {0.25, 7};
    e.AppendHistogram(4000, c);
    e.AppendFloat(5000, 1.5);
    int i = 0;
    for (const remote::PromChunk& pc : e.Finish()) {
      Put(out / "chunks", "prom_" + std::to_string(i++), static_cast<char>(0x10 + static_cast<int>(pc.encoding) - 1), pc.data);
    }
  }

  // index_fuzz: mode 0 (no CRC check), 1 (CRCs verified); zstd on and off.
  for (int level : {0, 3}) {
    fs::path p = tmp / ("index" + std::to_string(level));
    auto w = index::IndexWriter::Create(p.string(), {.zstd_level = level});
    Die(w.status(), "index writer");
    index::SeriesRef id = 0;
    for (const model::Labels& ls : Series()) {
      std::vector<index::ChunkMeta> metas = {{1'700'000'000'000, 1'700'000'600'000, index::MakeChunkRef(1, 8 + id * 100)},
                                             {1'700'000'600'001, 1'700'001'200'000, index::MakeChunkRef(1, 808 + id)}};
      Die((*w)->AddSeries(id++, ls, metas), "index add");
    }
    Die((*w)->Finish(), "index finish");
    std::string bytes = Slurp(p);
    Put(out / "index", "zstd" + std::to_string(level), 0, bytes);
    Put(out / "index", "zstd" + std::to_string(level) + "_crc", 1, bytes);
  }

  // wal_fuzz: mode 0 (a segment), 1 (one record).
  {
    std::vector<wal::RefSeries> series;
    for (size_t i = 0; i < Series().size(); i++) series.push_back({i + 1, Series()[i]});
    std::vector<wal::RefSample> samples;
    Samples(3, &ts, &vs);
    for (size_t i = 0; i < ts.size(); i++) samples.push_back({1 + i % series.size(), ts[i] - static_cast<int64_t>(i % 5) * 1000, vs[i]});
    std::string srec, prec;
    wal::EncodeSeries(series, &srec);
    wal::EncodeSamples(samples, &prec);
    Put(out / "wal", "series_record", 1, srec);
    Put(out / "wal", "samples_record", 1, prec);
    fs::path dir = tmp / "wal";
    {
      auto w = wal::Writer::Open({.dir = dir.string()});
      Die(w.status(), "wal writer");
      Die((*w)->Log(srec), "wal log");
      Die((*w)->Log(prec), "wal log");
      Die((*w)->Log(std::vector<std::string>{srec, prec}), "wal log");
      Die((*w)->Close(), "wal close");
    }
    for (const auto& e : fs::directory_iterator(dir)) {
      std::string seg = Slurp(e.path());
      if (seg.empty()) continue;
      Put(out / "wal", "segment", 0, seg);
      Put(out / "wal", "torn_segment", 0, seg.substr(0, seg.size() - 5));
    }
  }

  // remote_write_fuzz: mode 0 (snappy body as sent), 1 (protobuf, compressed by the target).
  {
    std::string req;
    Samples(1, &ts, &vs);
    for (const model::Labels& ls : Series()) {
      std::vector<model::Sample> ss;
      for (size_t i = 0; i < 5; i++) ss.push_back({ts[i], vs[i]});
      remote::AppendTimeSeries(ls, ss.data(), ss.size(), &req);
    }
    std::string framed;
    remote::SnappyCompress(req, &framed);
    Put(out / "remote_write", "request", 0, framed);
    Put(out / "remote_write", "request_proto", 1, req);
  }

  // loki_proto_fuzz: a logproto.PushRequest, mode 0 (snappy) and 1 (raw).
  {
    auto len = [](std::string_view s) {
      std::string v;
      for (uint64_t n = s.size();; n >>= 7) {
        v += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
        if (n < 0x80) break;
      }
      return v + std::string(s);
    };
    auto varint = [](uint64_t n) {
      std::string v;
      for (;; n >>= 7) {
        v += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
        if (n < 0x80) break;
      }
      return v;
    };
    std::string ts_msg = "\x08" + varint(1'700'000'000) + "\x10" + varint(123456789);
    std::string md = "\x0a" + len("trace_id") + "\x12" + len("abc");
    std::string entry1 = "\x0a" + len(ts_msg) + "\x12" + len("level=error msg=\"CUDA out of memory\"");
    std::string entry2 = "\x0a" + len(ts_msg) + "\x12" + len(R"({"level":"info","message":"step 10","loss":0.5})") +
                         "\x1a" + len(md);
    std::string stream = "\x0a" + len(R"({job="train", run="r1"})") + "\x12" + len(entry1) + "\x12" + len(entry2);
    std::string push = "\x0a" + len(stream);
    std::string compressed;
    snappy::Compress(push.data(), push.size(), &compressed);
    Put(out / "loki_proto", "push", 0, compressed);
    Put(out / "loki_proto", "push_proto", 1, push);
  }

  fs::remove_all(tmp);
  return 0;
}
