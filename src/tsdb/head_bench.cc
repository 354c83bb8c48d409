// Head micro-benchmarks: append throughput (samples/s, one core), memory per
// active series, select+decode throughput.

#include <benchmark/benchmark.h>

#include <malloc.h>
#include <unistd.h>

#include <fstream>

#include "tsdb/head.h"

namespace trainwatch::tsdb {
namespace {

std::vector<model::Labels> MakeSeries(int n) {
  std::vector<model::Labels> out;
  for (int i = 0; i < n; i++) {
    out.push_back(model::Labels{{"__name__", "DCGM_FI_DEV_GPU_TEMP"},
                                {"Hostname", "gpu-node-" + std::to_string(i / 8)},
                                {"gpu", std::to_string(i % 8)},
                                {"UUID", "GPU-" + std::to_string(1000000 + i) + "-aaaa-bbbb"},
                                {"instance", "10.0.0." + std::to_string(i / 8) + ":9400"},
                                {"job", "dcgm"},
                                {"modelName", "NVIDIA H100 80GB HBM3"}});
  }
  return out;
}

// Resident set size in bytes, from /proc/self/statm.
double RssBytes() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, rss = 0;
  f >> pages >> rss;
  return static_cast<double>(rss) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

// Append with labels (the import / remote_write path: series looked up by labels).
void BM_HeadAppendByLabels(benchmark::State& state) {
  auto series = MakeSeries(static_cast<int>(state.range(0)));
  Head head(HeadOptions{});
  int64_t t = 0;
  for (auto _ : state) {
    auto app = head.NewAppender();
    for (const auto& l : series) benchmark::DoNotOptimize(app->Append(0, l, t, 40 + (t % 7)));
    benchmark::DoNotOptimize(app->Commit());
    t += 15000;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(series.size()));
}
BENCHMARK(BM_HeadAppendByLabels)->Arg(10000);

// Append by ref (the import fast path: series known from an earlier request).
void BM_HeadAppendByRef(benchmark::State& state) {
  auto series = MakeSeries(static_cast<int>(state.range(0)));
  Head head(HeadOptions{});
  std::vector<storage::SeriesRef> refs;
  {
    auto app = head.NewAppender();
    for (const auto& l : series) refs.push_back(*app->Append(0, l, 0, 1));
    benchmark::DoNotOptimize(app->Commit());
  }
  int64_t t = 15000;
  for (auto _ : state) {
    auto app = head.NewAppender();
    for (auto ref : refs) benchmark::DoNotOptimize(app->AppendByRef(ref, t, 40 + (t % 7)));
    benchmark::DoNotOptimize(app->Commit());
    t += 15000;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(refs.size()));
}
BENCHMARK(BM_HeadAppendByRef)->Arg(10000);

// Memory per active series after 240 samples (1 h at 15 s) each.
void BM_HeadMemoryPerSeries(benchmark::State& state) {
  const int n = 20000;
  auto series = MakeSeries(n);
  for (auto _ : state) {
    ::malloc_trim(0);
    double before = RssBytes();
    Head head(HeadOptions{});
    for (int64_t step = 0; step < 240; step++) {
      auto app = head.NewAppender();
      for (int i = 0; i < n; i++) benchmark::DoNotOptimize(app->Append(0, series[i], step * 15000, 40 + (step + i) % 9));
      benchmark::DoNotOptimize(app->Commit());
    }
    state.counters["series"] = n;
    state.counters["chunks"] = static_cast<double>(head.NumChunks());
    state.counters["rss_bytes_per_series"] = (RssBytes() - before) / n;
  }
}
BENCHMARK(BM_HeadMemoryPerSeries)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_HeadSelectDecode(benchmark::State& state) {
  const int n = 10000;
  auto series = MakeSeries(n);
  Head head(HeadOptions{});
  for (int64_t step = 0; step < 240; step++) {
    auto app = head.NewAppender();
    for (int i = 0; i < n; i++) benchmark::DoNotOptimize(app->Append(0, series[i], step * 15000, 40 + (step + i) % 9));
    benchmark::DoNotOptimize(app->Commit());
  }
  auto m = *model::Matcher::Make(model::MatchType::kEqual, "__name__", "DCGM_FI_DEV_GPU_TEMP");
  int64_t samples = 0;
  for (auto _ : state) {
    auto q = head.NewQuerier(model::kMinTime, model::kMaxTime);
    auto set = (*q)->Select(false, {}, {m});
    while (set->Next()) {
      auto it = set->At().Iterator();
      while (it->Next()) samples++;
    }
  }
  state.SetItemsProcessed(samples);
}
BENCHMARK(BM_HeadSelectDecode)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainwatch::tsdb
