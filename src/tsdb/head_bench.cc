// Head micro-benchmarks: append throughput (samples/s, one core), memory per
// active series, select+decode throughput.

#include <benchmark/benchmark.h>

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

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

// The peers workload with every label (TW_HEAD_WORKLOAD names a file from
// `chunkenc/testdata_gen.py --labels`): all series appended step by step in
// 5000-sample commits, first by labels, then by ref (the import fast path).
struct WorkloadSeries {
  model::Labels labels;
  std::vector<int64_t> ts;
  std::vector<double> vs;
};

const std::vector<WorkloadSeries>* LoadLabelledWorkload() {
  static std::vector<WorkloadSeries>* data = [] {
    const char* path = std::getenv("TW_HEAD_WORKLOAD");
    if (path == nullptr) return static_cast<std::vector<WorkloadSeries>*>(nullptr);
    FILE* f = std::fopen(path, "rb");
    if (f == nullptr) return static_cast<std::vector<WorkloadSeries>*>(nullptr);
    auto* out = new std::vector<WorkloadSeries>();
    char magic[4];
    bool ok = std::fread(magic, 1, 4, f) == 4 && std::string_view(magic, 4) == "TWCL";
    auto str = [&](std::string* s) {
      uint16_t len;
      if (std::fread(&len, 2, 1, f) != 1) return false;
      s->resize(len);
      return len == 0 || std::fread(s->data(), 1, len, f) == len;
    };
    while (ok) {
      uint16_t nl;
      uint32_t n;
      if (std::fread(&nl, 2, 1, f) != 1 || std::fread(&n, 4, 1, f) != 1) break;
      std::vector<model::Label> ls(nl);
      for (auto& l : ls) ok = ok && str(&l.name) && str(&l.value);
      WorkloadSeries ws;
      ws.labels = model::Labels(std::move(ls));
      ws.ts.resize(n);
      ws.vs.resize(n);
      ok = ok && std::fread(ws.ts.data(), 8, n, f) == n && std::fread(ws.vs.data(), 8, n, f) == n;
      if (ok) out->push_back(std::move(ws));
    }
    std::fclose(f);
    return out;
  }();
  return data;
}

void BM_HeadMemoryWorkload(benchmark::State& state) {
  const auto* data = LoadLabelledWorkload();
  if (data == nullptr || data->empty()) {
    state.SkipWithError("set TW_HEAD_WORKLOAD to a file from testdata_gen.py --labels");
    return;
  }
  const size_t n = data->size(), steps = (*data)[0].ts.size();
  for (auto _ : state) {
    ::malloc_trim(0);
    double rss0 = RssBytes();
    double heap0 = static_cast<double>(::mallinfo2().uordblks);
    int64_t cpu0 = 0;
    {
      timespec ts;
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      cpu0 = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    }
    // Arg 1: closed chunks spilled to files as a serve's head does
    // (SpillOptions), in a fresh directory under TMPDIR or /tmp.
    HeadOptions ho;
    std::string spill_dir;
    if (state.range(0) == 1) {
      const char* tmp = std::getenv("TMPDIR");
      std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/tw_spill_XXXXXX";
      if (::mkdtemp(tmpl.data()) == nullptr) {
        state.SkipWithError("mkdtemp failed");
        return;
      }
      spill_dir = tmpl;
      ho.spill.dir = spill_dir;
    }
    auto head = std::make_unique<Head>(ho);
    std::vector<storage::SeriesRef> refs(n, 0);
    size_t in_batch = 0;
    auto app = head->NewAppender();
    for (size_t step = 0; step < steps; step++) {
      for (size_t i = 0; i < n; i++) {
        const auto& s = (*data)[i];
        if (refs[i] == 0 || !app->AppendByRef(refs[i], s.ts[step], s.vs[step])) {
          refs[i] = *app->Append(0, s.labels, s.ts[step], s.vs[step]);
        }
        if (++in_batch == 5000) {
          benchmark::DoNotOptimize(app->Commit());
          in_batch = 0;
        }
      }
    }
    benchmark::DoNotOptimize(app->Commit());
    timespec ts;
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    double cpu_s = static_cast<double>(ts.tv_sec * 1000000000LL + ts.tv_nsec - cpu0) / 1e9;
    state.counters["series"] = static_cast<double>(n);
    state.counters["samples_per_cpu_s"] = static_cast<double>(n * steps) / cpu_s;
    state.counters["rss_bytes_per_series"] = (RssBytes() - rss0) / static_cast<double>(n);
    state.counters["heap_bytes_per_series"] =
        (static_cast<double>(::mallinfo2().uordblks) - heap0) / static_cast<double>(n);
    Head::MemoryStats m = head->GetMemoryStats();
    auto per = [n](size_t b) { return static_cast<double>(b) / static_cast<double>(n); };
    state.counters["m_series"] = per(m.series);
    state.counters["m_chunk_lists"] = per(m.chunk_lists);
    state.counters["m_closed"] = per(m.closed_bytes);
    state.counters["m_closed_slack"] = per(m.closed_slack);
    state.counters["m_closed_mapped"] = per(m.closed_mapped);
    state.counters["m_open"] = per(m.open_bytes);
    state.counters["m_maps"] = per(m.series_maps);
    state.counters["m_postings"] = per(m.postings);
    state.counters["m_symbols"] = per(m.symbols);
    state.counters["closed_B_per_sample"] =
        static_cast<double>(m.closed_bytes + m.closed_mapped) / static_cast<double>(m.closed_samples);
    state.counters["open_B_per_sample"] = static_cast<double>(m.open_bytes) / static_cast<double>(m.open_samples);
    head.reset();
    if (!spill_dir.empty()) ::rmdir(spill_dir.c_str());  // empty once the head's chunks are released
  }
}
BENCHMARK(BM_HeadMemoryWorkload)->Arg(0)->Arg(1)->ArgName("spill")->Iterations(1)->Unit(benchmark::kMillisecond);

// Churn: 100,000 series, a tenth replaced by new ones (new UUID and
// instance values) every hour, a head cut every hour, for two days.
// Counters: RSS and the head's own accounting (MiB) after the first day and
// at the end (they should match: memory holds the live set, not the
// history), and the mean time of a cut (ms).
void BM_HeadChurn(benchmark::State& state) {
  constexpr int kSeries = 100000, kHours = 48;
  const int64_t hour = 3600 * 1000;
  for (auto _ : state) {
    HeadOptions o;
    o.block_duration_ms = hour;
    Head head(o);
    std::vector<int> gen(kSeries, 0);
    auto labels = [](int i, int g) {
      const std::string id = std::to_string(i) + "-" + std::to_string(g);
      return model::Labels{{"__name__", "DCGM_FI_DEV_GPU_TEMP"}, {"UUID", "GPU-" + id + "-aaaa-bbbb"},
                           {"gpu", std::to_string(i % 8)}, {"instance", "10.0." + id + ":9400"},
                           {"job", "dcgm"}};
    };
    double rss_day = 0, head_day = 0, cut_ns = 0;
    for (int h = 0; h < kHours; h++) {
      for (int i = h % 10; i < kSeries; i += 10) gen[i] = h;
      // Four samples an hour per series (enough to fill chunks partly).
      for (int k = 0; k < 4; k++) {
        auto app = head.NewAppender();
        for (int i = 0; i < kSeries; i++) (void)app->Append(0, labels(i, gen[i]), h * hour + k * 900000 + i, 40 + (i % 7));
        (void)app->Commit();
      }
      const auto start = std::chrono::steady_clock::now();
      head.Truncate(head.SnapshotForPersist(h * hour, false));
      cut_ns += static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
      if (h == 23) {
        ::malloc_trim(0);
        rss_day = RssBytes();
        head_day = static_cast<double>(head.GetMemoryStats().Total());
      }
    }
    ::malloc_trim(0);
    auto m = head.GetMemoryStats();
    const double head_end = static_cast<double>(m.Total());
    state.counters["rss_day1_MiB"] = rss_day / (1 << 20);
    state.counters["rss_day2_MiB"] = RssBytes() / (1 << 20);
    state.counters["head_day1_MiB"] = head_day / (1 << 20);
    state.counters["head_day2_MiB"] = head_end / (1 << 20);
    state.counters["symbols_day2_MiB"] = static_cast<double>(m.symbols) / (1 << 20);
    state.counters["cut_ms"] = cut_ns / kHours / 1e6;
  }
}
BENCHMARK(BM_HeadChurn)->Iterations(1)->Unit(benchmark::kMillisecond);

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
