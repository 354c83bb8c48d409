// Chunk codec benchmarks.
//
// Synthetic series (always): encode/decode speed for XOR and dense on a
// random-walk gauge, an integer counter, 3-decimal floats and full-precision
// floats.
//
// Real workload (when CHUNKENC_DATA names a file written by testdata_gen.py):
// BM_Workload* report bytes/sample for XOR (120-sample chunks, like
// Prometheus' head) and dense (one chunk per series and block), and the dense
// encode/decode speed; BM_WorkloadReport/N prints a per-metric table to stderr
// (N samples per dense chunk, 0 = one chunk per series);
// BM_WorkloadChunkSize/N gives dense bytes/sample for N-sample chunks.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tsdb/chunkenc/chunk.h"

namespace trainwatch::chunkenc {
namespace {

constexpr size_t kN = 480;  // 2 h at 15 s

struct Series {
  std::string name;
  std::vector<int64_t> ts;
  std::vector<double> vs;
};

Series Synthetic(int kind) {
  std::mt19937_64 rng(kind);
  std::normal_distribution<double> gauss(0, 1);
  Series s;
  double v = 100;
  for (size_t i = 0; i < kN; i++) {
    s.ts.push_back(1700000000000 + static_cast<int64_t>(i) * 15000);
    switch (kind) {
      case 0: v += std::round(gauss(rng) * 2); break;                      // integer random-walk gauge
      case 1: v += static_cast<double>(1000 + rng() % 200); break;          // integer counter
      case 2: v = std::round((600 + gauss(rng) * 20) * 1000) / 1000; break;  // 3 decimals
      default: v = 2.0 + gauss(rng) * 0.02; break;                         // full precision
    }
    s.vs.push_back(v);
  }
  return s;
}

const char* kKindNames[] = {"int_gauge", "int_counter", "decimal3", "float64"};

void BM_Encode(benchmark::State& state, Encoding enc) {
  Series s = Synthetic(static_cast<int>(state.range(0)));
  std::string out;
  for (auto _ : state) {
    out.clear();
    if (enc == Encoding::kXor) {
      EncodeXor(s.ts.data(), s.vs.data(), kN, &out);
    } else {
      EncodeDense(s.ts.data(), s.vs.data(), kN, &out);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(kKindNames[state.range(0)]);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kN));
  state.counters["B/sample"] = static_cast<double>(out.size()) / kN;
}

void BM_Decode(benchmark::State& state, Encoding enc, bool iterator) {
  Series s = Synthetic(static_cast<int>(state.range(0)));
  std::string data;
  if (enc == Encoding::kXor) {
    EncodeXor(s.ts.data(), s.vs.data(), kN, &data);
  } else {
    EncodeDense(s.ts.data(), s.vs.data(), kN, &data);
  }
  std::vector<int64_t> ts;
  std::vector<double> vs;
  Iterator it;
  for (auto _ : state) {
    if (iterator) {
      it.Reset(enc, data);
      double sum = 0;
      while (it.Next()) sum += it.v();
      benchmark::DoNotOptimize(sum);
    } else {
      ts.clear();
      vs.clear();
      Status st = DecodeAll(enc, data, &ts, &vs);
      benchmark::DoNotOptimize(st);
      benchmark::DoNotOptimize(vs.data());
    }
  }
  state.SetLabel(kKindNames[state.range(0)]);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kN));
  state.counters["B/sample"] = static_cast<double>(data.size()) / kN;
}

BENCHMARK_CAPTURE(BM_Encode, xor, Encoding::kXor)->DenseRange(0, 3);
BENCHMARK_CAPTURE(BM_Encode, dense, Encoding::kDense)->DenseRange(0, 3);
BENCHMARK_CAPTURE(BM_Decode, xor_iter, Encoding::kXor, true)->DenseRange(0, 3);
BENCHMARK_CAPTURE(BM_Decode, dense_iter, Encoding::kDense, true)->DenseRange(0, 3);
BENCHMARK_CAPTURE(BM_Decode, xor_all, Encoding::kXor, false)->DenseRange(0, 3);
BENCHMARK_CAPTURE(BM_Decode, dense_all, Encoding::kDense, false)->DenseRange(0, 3);

// ---- real workload

const std::vector<Series>* LoadWorkload() {
  static std::vector<Series>* data = [] {
    const char* path = std::getenv("CHUNKENC_DATA");
    if (path == nullptr) return static_cast<std::vector<Series>*>(nullptr);
    FILE* f = std::fopen(path, "rb");
    if (f == nullptr) return static_cast<std::vector<Series>*>(nullptr);
    auto* out = new std::vector<Series>;
    char magic[4];
    bool ok = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "TWCD", 4) == 0;
    while (ok) {
      uint16_t name_len;
      uint32_t n;
      if (std::fread(&name_len, 2, 1, f) != 1 || std::fread(&n, 4, 1, f) != 1) break;
      Series s;
      s.name.resize(name_len);
      s.ts.resize(n);
      s.vs.resize(n);
      if (std::fread(s.name.data(), 1, name_len, f) != name_len || std::fread(s.ts.data(), 8, n, f) != n ||
          std::fread(s.vs.data(), 8, n, f) != n) {
        ok = false;
        break;
      }
      out->push_back(std::move(s));
    }
    std::fclose(f);
    if (!ok || out->empty()) {
      delete out;
      return static_cast<std::vector<Series>*>(nullptr);
    }
    return out;
  }();
  return data;
}

constexpr size_t kXorChunkSamples = 120;

size_t XorBytes(const Series& s) {
  size_t bytes = 0;
  std::string out;
  for (size_t off = 0; off < s.ts.size(); off += kXorChunkSamples) {
    size_t n = std::min(kXorChunkSamples, s.ts.size() - off);
    out.clear();
    EncodeXor(s.ts.data() + off, s.vs.data() + off, n, &out);
    bytes += out.size();
  }
  return bytes;
}

// Delta (the head's open chunk) bytes of a series cut into 120-sample
// chunks.
size_t DeltaBytes(const Series& s) {
  size_t bytes = 0;
  for (size_t off = 0; off < s.ts.size(); off += kXorChunkSamples) {
    DeltaChunk c;
    for (size_t i = off; i < std::min(off + kXorChunkSamples, s.ts.size()); i++) c.Append(s.ts[i], s.vs[i]);
    bytes += c.Bytes().size();
  }
  return bytes;
}

// Dense bytes of a series cut into chunks of `per_chunk` samples (0: one
// chunk).
size_t DenseBytes(const Series& s, std::string* out, size_t per_chunk = 0) {
  if (per_chunk == 0) per_chunk = s.ts.size();
  size_t bytes = 0;
  for (size_t off = 0; off < s.ts.size(); off += per_chunk) {
    out->clear();
    EncodeDense(s.ts.data() + off, s.vs.data() + off, std::min(per_chunk, s.ts.size() - off), out);
    bytes += out->size();
  }
  return bytes;
}

void BM_WorkloadReport(benchmark::State& state) {
  const auto* data = LoadWorkload();
  if (data == nullptr) {
    state.SkipWithError("set CHUNKENC_DATA to a file from testdata_gen.py");
    return;
  }
  struct Acc {
    size_t series = 0, samples = 0, xor_bytes = 0, delta_bytes = 0, dense_bytes = 0;
  };
  std::map<std::string, Acc> per;
  Acc total;
  std::string buf;
  for (auto _ : state) {
    per.clear();
    total = Acc{};
    for (const Series& s : *data) {
      Acc& a = per[s.name];
      size_t xb = XorBytes(s), lb = DeltaBytes(s), db = DenseBytes(s, &buf, static_cast<size_t>(state.range(0)));
      for (Acc* p : {&a, &total}) {
        p->series++;
        p->samples += s.ts.size();
        p->xor_bytes += xb;
        p->delta_bytes += lb;
        p->dense_bytes += db;
      }
    }
  }
  std::vector<std::pair<std::string, Acc>> rows(per.begin(), per.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.dense_bytes > b.second.dense_bytes; });
  std::fprintf(stderr, "%-42s %6s %8s %8s %8s %6s\n", "metric", "series", "xor B/s", "delta", "dense", "share");
  for (auto& [name, a] : rows) {
    std::fprintf(stderr, "%-42s %6zu %8.3f %8.3f %8.3f %5.1f%%\n", name.c_str(), a.series,
                 static_cast<double>(a.xor_bytes) / static_cast<double>(a.samples),
                 static_cast<double>(a.delta_bytes) / static_cast<double>(a.samples),
                 static_cast<double>(a.dense_bytes) / static_cast<double>(a.samples),
                 100.0 * static_cast<double>(a.dense_bytes) / static_cast<double>(total.dense_bytes));
  }
  std::fprintf(stderr, "%-42s %6zu %8.3f %8.3f %8.3f\n", "TOTAL", total.series,
               static_cast<double>(total.xor_bytes) / static_cast<double>(total.samples),
               static_cast<double>(total.delta_bytes) / static_cast<double>(total.samples),
               static_cast<double>(total.dense_bytes) / static_cast<double>(total.samples));
  state.counters["xor_B/sample"] = static_cast<double>(total.xor_bytes) / static_cast<double>(total.samples);
  state.counters["delta_B/sample"] = static_cast<double>(total.delta_bytes) / static_cast<double>(total.samples);
  state.counters["dense_B/sample"] = static_cast<double>(total.dense_bytes) / static_cast<double>(total.samples);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * total.samples));
}
// Arg: samples per dense chunk (0 = the whole series; 240 = the peers
// harness' hour at 15 s).
BENCHMARK(BM_WorkloadReport)->Arg(0)->Arg(240)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_WorkloadDecode(benchmark::State& state, Encoding enc) {
  const auto* data = LoadWorkload();
  if (data == nullptr) {
    state.SkipWithError("set CHUNKENC_DATA to a file from testdata_gen.py");
    return;
  }
  std::vector<std::string> chunks;
  size_t samples = 0;
  for (const Series& s : *data) {
    if (enc == Encoding::kDense) {
      chunks.emplace_back();
      EncodeDense(s.ts.data(), s.vs.data(), s.ts.size(), &chunks.back());
    } else {
      for (size_t off = 0; off < s.ts.size(); off += kXorChunkSamples) {
        chunks.emplace_back();
        EncodeXor(s.ts.data() + off, s.vs.data() + off, std::min(kXorChunkSamples, s.ts.size() - off),
                  &chunks.back());
      }
    }
    samples += s.ts.size();
  }
  Iterator it;
  for (auto _ : state) {
    double sum = 0;
    for (const std::string& c : chunks) {
      it.Reset(enc, c);
      while (it.Next()) sum += it.v();
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * samples));
}
BENCHMARK_CAPTURE(BM_WorkloadDecode, xor, Encoding::kXor)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_WorkloadDecode, dense, Encoding::kDense)->Unit(benchmark::kMillisecond);

// Encode speed over the whole workload: XOR in 120-sample chunks, dense one
// chunk per series, or (dense, range(0) > 0) chunks of range(0) samples: 120
// is what the head encodes as each chunk closes (Head::EncodeDenser).
void BM_WorkloadEncode(benchmark::State& state, Encoding enc) {
  const auto* data = LoadWorkload();
  if (data == nullptr) {
    state.SkipWithError("set CHUNKENC_DATA to a file from testdata_gen.py");
    return;
  }
  size_t samples = 0, bytes = 0;
  std::string buf;
  for (auto _ : state) {
    samples = bytes = 0;
    for (const Series& s : *data) {
      bytes += enc == Encoding::kXor ? XorBytes(s) : DenseBytes(s, &buf, static_cast<size_t>(state.range(0)));
      samples += s.ts.size();
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * samples));
  state.counters["B/sample"] = static_cast<double>(bytes) / static_cast<double>(samples);
}
BENCHMARK_CAPTURE(BM_WorkloadEncode, xor, Encoding::kXor)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_WorkloadEncode, dense, Encoding::kDense)->Arg(0)->Arg(120)->Unit(benchmark::kMillisecond);

// Dense in 120-sample chunks, the head's chunk size (Head::EncodeDenser):
// each series' first chunk and every fourth after it searched, the others
// encoded as the last search chose (EncodeDenseLike; the head starts a
// series from its metric's choices instead, docs/performance.md).
void BM_WorkloadEncodeLike(benchmark::State& state) {
  const auto* data = LoadWorkload();
  if (data == nullptr) {
    state.SkipWithError("set CHUNKENC_DATA to a file from testdata_gen.py");
    return;
  }
  constexpr size_t kChunk = 120;
  size_t samples = 0, bytes = 0;
  std::string out;
  for (auto _ : state) {
    samples = bytes = 0;
    for (const Series& s : *data) {
      DenseChoice choice;
      for (size_t off = 0, i = 0; off < s.ts.size(); off += kChunk, i++) {
        out.clear();
        EncodeDenseLike(s.ts.data() + off, s.vs.data() + off, std::min(kChunk, s.ts.size() - off), &out, &choice,
                        i % 4 == 0 ? DenseSearch::kAll : DenseSearch::kNone);
        bytes += out.size();
      }
      samples += s.ts.size();
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * samples));
  state.counters["B/sample"] = static_cast<double>(bytes) / static_cast<double>(samples);
}
BENCHMARK(BM_WorkloadEncodeLike)->Unit(benchmark::kMillisecond);

// Dense bytes/sample when each series is cut into chunks of state.range(0)
// samples (the persisted-block chunk size). Needs series at least that long
// (testdata_gen.py --duration 28800 gives 1920 samples at 15 s); the
// "samples/chunk" counter shows the real average.
void BM_WorkloadChunkSize(benchmark::State& state) {
  const auto* data = LoadWorkload();
  if (data == nullptr) {
    state.SkipWithError("set CHUNKENC_DATA to a file from testdata_gen.py");
    return;
  }
  const size_t per_chunk = static_cast<size_t>(state.range(0));
  size_t samples = 0, bytes = 0, chunks = 0;
  std::string out;
  for (auto _ : state) {
    samples = bytes = chunks = 0;
    for (const Series& s : *data) {
      for (size_t off = 0; off < s.ts.size(); off += per_chunk) {
        size_t n = std::min(per_chunk, s.ts.size() - off);
        out.clear();
        EncodeDense(s.ts.data() + off, s.vs.data() + off, n, &out);
        bytes += out.size();
        chunks++;
      }
      samples += s.ts.size();
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * samples));
  state.counters["B/sample"] = static_cast<double>(bytes) / static_cast<double>(samples);
  state.counters["samples/chunk"] = static_cast<double>(samples) / static_cast<double>(chunks);
}
BENCHMARK(BM_WorkloadChunkSize)->Arg(120)->Arg(240)->Arg(480)->Arg(960)->Arg(1920)->Iterations(1)->Unit(
    benchmark::kMillisecond);

}  // namespace
}  // namespace trainwatch::chunkenc
