// Parser and import throughput: bytes/s and samples/s (items/s), one core.
//  - BM_ParseText / BM_ImportBatchParse: node_exporter output repeated with
//    timestamps (the import/backfill shape).
//  - BM_ParseFile/<file>: one scrape body as captured (HELP/TYPE included):
//    node_exporter 1.5, Prometheus 2.42, Prometheus's own parser benchmark
//    input (alltypes.237mfs), the python client in OpenMetrics.
//  - BM_ParseSynthetic/<format>: a 10 MB body of labelled series in both
//    formats.
#include <benchmark/benchmark.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ingest/import.h"
#include "ingest/text_parser.h"

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
void RunParse(benchmark::State& state, const std::string& body, TextFormat format) {
  if (body.empty()) {
    state.SkipWithError("input missing");
    return;
  }
  size_t samples = 0;
  size_t meta = 0;
  for (auto _ : state) {
    ParseOptions o{.format = format};
    o.on_metadata = [&](const MetadataLine&) { meta++; };
    TextParser p(body, std::move(o));
    double sum = 0;
    size_t n = 0;
    while (p.Next()) {
      sum += p.sample().value;
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
}  // namespace
}  // namespace trainwatch::ingest
