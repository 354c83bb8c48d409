// Parser and import throughput: bytes/s and samples/s (items/s), one core.
//  - BM_ParseText / BM_ImportBatchParse: node_exporter output repeated with
//    timestamps (the import/backfill shape).
//  - BM_ParseFile/<file>: one scrape body as captured (HELP/TYPE included):
//    node_exporter 1.5, Prometheus 2.42, Prometheus's own parser benchmark
//    input (alltypes.237mfs), the python client in OpenMetrics.
//  - BM_ParseSynthetic/<format>: a 10 MB body of labelled series in both
//    formats; openmetrics_st with ParseOptions::start_timestamps (the body
//    has no `_created`: the cost of looking).
//  - BM_ParseCreated/<st>: an OpenMetrics body of counters and histograms
//    with a `_created` line per series, as the Python client writes them,
//    parsed without and with start_timestamps.
//  - BM_RemoteWriteParse: one uncompressed remote_write 1.0 WriteRequest of
//    the peers harness's shape (5,000 series of 8 labels, one sample each)
//    parsed with a warm series cache, as a steady sender's requests are,
//    the cache holding the argument's number of other series besides;
//    items are samples.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/proto_writer.h"
#include "ingest/import.h"
#include "ingest/remote_write.h"
#include "ingest/series_cache.h"
#include "ingest/text_parser.h"
#include "tsdb/head.h"

namespace trainwatch::ingest {
namespace {

// node_exporter_1.5.txt repeated `copies` times, each copy one scrape 15 s later.
const std::string& Body() {
  static const std::string body = [] {
    const char* dir = std::getenv("TW_CONFORMANCE_DIR");
    std::string path = std::string(dir ? dir : "/work/shared/conformance") + "/exposition/node_exporter_1.5.txt";
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string src = ss.str();
    std::string out;
    for (int copy = 0; copy < 200; copy++) {
      std::istringstream lines(src);
      std::string line;
      std::string ts = " " + std::to_string(1700000000000 + copy * 15000) + "\n";
      while (std::getline(lines, line)) {
        if (line.empty() || line[0] == '#') continue;
        out += line;
        out += ts;
      }
    }
    return out;
  }();
  return body;
}

void BM_ParseText(benchmark::State& state) {
  const std::string& body = Body();
  size_t samples = 0;
  for (auto _ : state) {
    TextParser p(body, {});
    double sum = 0;
    size_t n = 0;
    while (p.Next()) {
      sum += p.sample().value;
      n++;
    }
    benchmark::DoNotOptimize(sum);
    samples += n;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.SetItemsProcessed(static_cast<int64_t>(samples));
}
BENCHMARK(BM_ParseText)->Unit(benchmark::kMillisecond);

void BM_ImportBatchParse(benchmark::State& state) {
  const std::string& body = Body();
  ImportBatch batch;
  size_t samples = 0;
  for (auto _ : state) {
    Status s = batch.Parse(body, {});
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    samples += batch.stats().samples;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.SetItemsProcessed(static_cast<int64_t>(samples));
}
BENCHMARK(BM_ImportBatchParse)->Unit(benchmark::kMillisecond);


std::string ReadConformance(const std::string& rel) {
  const char* dir = std::getenv("TW_CONFORMANCE_DIR");
  std::ifstream in(std::string(dir ? dir : "/work/shared/conformance") + "/exposition/" + rel, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parses `body` once per iteration; reports bytes and samples.
void RunParse(benchmark::State& state, const std::string& body, TextFormat format, bool start_timestamps = false) {
  if (body.empty()) {
    state.SkipWithError("input missing");
    return;
  }
  size_t samples = 0;
  size_t meta = 0;
  for (auto _ : state) {
    ParseOptions o{.format = format, .start_timestamps = start_timestamps};
    o.on_metadata = [&](const MetadataLine&) { meta++; };
    TextParser p(body, std::move(o));
    double sum = 0;
    size_t n = 0;
    while (p.Next()) {
      sum += p.sample().value + static_cast<double>(p.sample().start_timestamp_ms);
      n += p.sample().num_labels + 1;
    }
    if (!p.status().ok()) {
      state.SkipWithError(p.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(sum);
    benchmark::DoNotOptimize(n);
  }
  // Count once outside the timed loop.
  {
    TextParser p(body, ParseOptions{.format = format});
    size_t n = 0;
    while (p.Next()) n++;
    samples = n * static_cast<size_t>(state.iterations());
  }
  benchmark::DoNotOptimize(meta);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.SetItemsProcessed(static_cast<int64_t>(samples));
}

void BM_ParseFile(benchmark::State& state, const char* file, TextFormat format) {
  static std::map<std::string, std::string> bodies;
  auto it = bodies.find(file);
  if (it == bodies.end()) it = bodies.emplace(file, ReadConformance(file)).first;
  RunParse(state, it->second, format);
}
BENCHMARK_CAPTURE(BM_ParseFile, node_exporter, "node_exporter_1.5.txt", TextFormat::kPrometheus);
BENCHMARK_CAPTURE(BM_ParseFile, prometheus, "prometheus_2.42.txt", TextFormat::kPrometheus);
BENCHMARK_CAPTURE(BM_ParseFile, alltypes_237mfs, "upstream/prometheus/model_textparse/alltypes.237mfs.prom.txt",
                  TextFormat::kPrometheus);
BENCHMARK_CAPTURE(BM_ParseFile, python_openmetrics, "python_client_0.16_ml_sample.openmetrics.txt",
                  TextFormat::kOpenMetrics);

// ~10 MB: 2,000 families of 50 series each with 3 labels, a histogram-like
// le label on every other family, values of varied shapes.
std::string Synthetic(TextFormat format) {
  std::string out;
  for (int f = 0; f < 2000; f++) {
    std::string name = "trainwatch_synthetic_metric_" + std::to_string(f) + (f % 2 ? "_bucket" : "_seconds");
    std::string family = f % 2 ? name.substr(0, name.size() - 7) : name;
    out += "# HELP " + family + " A synthetic metric family number " + std::to_string(f) + ".\n";
    out += "# TYPE " + family + (f % 2 ? " histogram\n" : " gauge\n");
    for (int s = 0; s < 50; s++) {
      out += name + "{job=\"trainer\",instance=\"node-" + std::to_string(s % 16) + ":9100\",rank=\"" +
             std::to_string(s) + "\"";
      if (f % 2) out += ",le=\"" + std::to_string(0.005 * (1 << (s % 12))) + "\"";
      out += "} ";
      switch (s % 4) {
        case 0: out += std::to_string(s * 1000 + f); break;
        case 1: out += "0." + std::to_string(123456 + s * 7 + f); break;
        case 2: out += std::to_string(1.5e9 + s * 31.25 + f); break;
        default: out += std::to_string(s + f) + "e-3"; break;
      }
      out += "\n";
    }
  }
  if (format == TextFormat::kOpenMetrics) out += "# EOF\n";
  return out;
}

void BM_ParseSynthetic(benchmark::State& state, TextFormat format) {
  static const std::string text = Synthetic(TextFormat::kPrometheus);
  static const std::string om = Synthetic(TextFormat::kOpenMetrics);
  RunParse(state, format == TextFormat::kOpenMetrics ? om : text, format);
}
BENCHMARK_CAPTURE(BM_ParseSynthetic, text, TextFormat::kPrometheus)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ParseSynthetic, openmetrics, TextFormat::kOpenMetrics)->Unit(benchmark::kMillisecond);

void BM_ParseSyntheticST(benchmark::State& state) {
  static const std::string om = Synthetic(TextFormat::kOpenMetrics);
  RunParse(state, om, TextFormat::kOpenMetrics, true);
}
BENCHMARK(BM_ParseSyntheticST)->Name("BM_ParseSynthetic/openmetrics_st")->Unit(benchmark::kMillisecond);

// ~5 MB: 500 counter families of 40 series, each followed by its _created;
// 100 histogram families of 20 label sets (8 buckets, _count, _sum, _created).
std::string SyntheticCreated() {
  std::string out;
  for (int f = 0; f < 500; f++) {
    const std::string family = "trainwatch_synthetic_requests_" + std::to_string(f);
    out += "# HELP " + family + " A synthetic counter.\n# TYPE " + family + " counter\n";
    for (int s = 0; s < 40; s++) {
      const std::string labels = "{job=\"trainer\",instance=\"node-" + std::to_string(s % 16) + ":9100\",rank=\"" +
                                 std::to_string(s) + "\"}";
      out += family + "_total" + labels + " " + std::to_string(s * 1000 + f) + ".0\n";
      out += family + "_created" + labels + " 1.7962071" + std::to_string(10 + s) + "e+09\n";
    }
  }
  for (int f = 0; f < 100; f++) {
    const std::string family = "trainwatch_synthetic_latency_seconds_" + std::to_string(f);
    out += "# HELP " + family + " A synthetic histogram.\n# TYPE " + family + " histogram\n";
    for (int s = 0; s < 20; s++) {
      const std::string labels = "job=\"trainer\",rank=\"" + std::to_string(s) + "\"";
      for (int b = 0; b < 8; b++) {
        out += family + "_bucket{" + labels + ",le=\"" + (b == 7 ? std::string("+Inf") : std::to_string(0.005 * (1 << b))) +
               "\"} " + std::to_string(b * 10 + s) + ".0\n";
      }
      out += family + "_count{" + labels + "} " + std::to_string(70 + s) + ".0\n";
      out += family + "_sum{" + labels + "} 12.5\n";
      out += family + "_created{" + labels + "} 1.796207177e+09\n";
    }
  }
  return out + "# EOF\n";
}

void BM_ParseCreated(benchmark::State& state, bool start_timestamps) {
  static const std::string body = SyntheticCreated();
  RunParse(state, body, TextFormat::kOpenMetrics, start_timestamps);
}
BENCHMARK_CAPTURE(BM_ParseCreated, off, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ParseCreated, st, true)->Unit(benchmark::kMillisecond);

// prompb's WriteRequest { repeated TimeSeries timeseries = 1 }, TimeSeries
// { repeated Label labels = 1; repeated Sample samples = 2 }, Label { name = 1;
// value = 2 }, Sample { double value = 1; int64 timestamp = 2 }.
std::string RemoteWriteRequest(int series, int64_t t) {
  ProtoWriter req;
  for (int i = 0; i < series; i++) {
    const std::string values[][2] = {{"__name__", "DCGM_FI_DEV_GPU_UTIL_" + std::to_string(i % 45)},
                                     {"Hostname", "node-" + std::to_string(i / 405)},
                                     {"UUID", "GPU-" + std::to_string(i / 45 % 9) + "-5a1c9e0f-7b2d"},
                                     {"gpu", std::to_string(i / 45 % 9)},
                                     {"instance", "10.0.1." + std::to_string(i / 405) + ":9400"},
                                     {"job", "dcgm"},
                                     {"modelName", "NVIDIA H100 80GB HBM3"},
                                     {"pci_bus_id", "00000000:" + std::to_string(10 + i % 7) + ":00.0"}};
    ProtoWriter ts;
    for (const auto& nv : values) {
      ProtoWriter label;
      label.Bytes(1, nv[0]);
      label.Bytes(2, nv[1]);
      ts.Message(1, label);
    }
    ProtoWriter sample;
    sample.Double(1, 40.0 + (i * 7919 % 600) / 10.0);
    sample.Int64(2, t);
    ts.Message(2, sample);
    req.Message(1, ts);
  }
  return req.Release();
}

void BM_RemoteWriteParse(benchmark::State& state) {
  constexpr int kSeries = 5000;
  const std::string req = RemoteWriteRequest(kSeries, 1796207100000);
  // The cache also holds range(0) other series, as a server with that many
  // does (so that its table is as large, and as far from the CPU's caches).
  SeriesCache cache;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; i < state.range(0); i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    cache.Put(SeriesCache::Key{x, x ^ (x >> 29)}, static_cast<storage::SeriesRef>(1u << 30) + i);
  }
  // Warm the cache as a first request does: its series go to a head.
  tsdb::Head head(tsdb::HeadOptions{});
  {
    RemoteWriteBatch first;
    Status s = first.Parse(req, &cache);
    auto app = head.NewAppender();
    if (s.ok()) s = first.AppendTo(app.get());
    if (s.ok()) s = app->Commit();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  RemoteWriteBatch batch;
  for (auto _ : state) {
    batch.Clear();
    Status s = batch.Parse(req, &cache);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::DoNotOptimize(batch.stats().samples);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * req.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kSeries));
}
BENCHMARK(BM_RemoteWriteParse)->Arg(0)->Arg(1000000)->Unit(benchmark::kMicrosecond);
}  // namespace
}  // namespace trainwatch::ingest
