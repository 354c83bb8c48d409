// Parser and import throughput on node_exporter output repeated with
// timestamps: bytes/s and samples/s (items/s).
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

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

}  // namespace
}  // namespace trainwatch::ingest
