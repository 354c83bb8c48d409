#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <set>

#include "base/file.h"
#include "tsdb/index/index_reader.h"
#include "tsdb/index/index_writer.h"
#include "tsdb/index/postings.h"

namespace trainwatch::index {
namespace {

Postings RandomSorted(size_t n, uint64_t range, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> v(n);
  for (auto& x : v) x = rng() % range;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

void BM_Intersect1Mx1M(benchmark::State& state) {
  Postings a = RandomSorted(1 << 20, 4 << 20, 1), b = RandomSorted(1 << 20, 4 << 20, 2);
  for (auto _ : state) benchmark::DoNotOptimize(Intersect(a, b));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(a.size() + b.size()));
}
BENCHMARK(BM_Intersect1Mx1M);

void BM_Intersect1Kx1M(benchmark::State& state) {
  Postings a = RandomSorted(1000, 4 << 20, 1), b = RandomSorted(1 << 20, 4 << 20, 2);
  for (auto _ : state) benchmark::DoNotOptimize(Intersect(a, b));
}
BENCHMARK(BM_Intersect1Kx1M);

void BM_Union100x10K(benchmark::State& state) {
  std::vector<Postings> ls;
  for (int i = 0; i < 100; ++i) ls.push_back(RandomSorted(10000, 1 << 22, i));
  for (auto _ : state) benchmark::DoNotOptimize(Union(ls));
}
BENCHMARK(BM_Union100x10K);

// ~100k series with 11-15 labels each, many shared values; 4 chunks per
// series (2 h block, 15 s scrape, 120 samples per chunk = 480 samples).
std::vector<model::Labels> Workload(size_t n) {
  std::mt19937_64 rng(1);
  std::set<model::Labels> out;
  while (out.size() < n) {
    std::vector<model::Label> ls;
    const uint64_t host = rng() % (n / 100 + 1);
    ls.push_back({"__name__", "metric_" + std::to_string(rng() % 300)});
    ls.push_back({"job", "job" + std::to_string(host % 7)});
    ls.push_back({"instance", "host-" + std::to_string(host) + ".example.com:9100"});
    ls.push_back({"cluster", "c" + std::to_string(host % 3)});
    ls.push_back({"region", "region-" + std::to_string(host % 4)});
    ls.push_back({"env", host % 5 == 0 ? "staging" : "prod"});
    ls.push_back({"namespace", "ns-" + std::to_string(rng() % 20)});
    ls.push_back({"pod", "pod-" + std::to_string(rng() % (n / 20 + 1)) + "-7f9c8d"});
    ls.push_back({"container", "ctr" + std::to_string(rng() % 12)});
    ls.push_back({"gpu", std::to_string(rng() % 8)});
    if (rng() % 2) ls.push_back({"mode", rng() % 2 ? "user" : "system"});
    if (rng() % 3 == 0) ls.push_back({"le", std::to_string(rng() % 12)});
    if (rng() % 4 == 0) ls.push_back({"device", "nvme" + std::to_string(rng() % 4)});
    ls.push_back({"team", "t" + std::to_string(host % 9)});
    out.insert(model::Labels(std::move(ls)));
  }
  return {out.begin(), out.end()};
}

constexpr size_t kSeries = 100000;
constexpr double kSamplesPerSeries = 480;

std::string BuildIndex(const std::vector<model::Labels>& series, const std::string& path, int level) {
  auto w = IndexWriter::Create(path, IndexWriter::Options{.zstd_level = level});
  uint64_t ref = MakeChunkRef(1, 8);
  std::vector<ChunkMeta> cs(4);
  for (size_t s = 0; s < series.size(); ++s) {
    for (size_t i = 0; i < cs.size(); ++i) {
      cs[i].mint = 1700000000000 + static_cast<int64_t>(i) * 1800000 + static_cast<int64_t>(s % 3);
      cs[i].maxt = cs[i].mint + 1785000;
      cs[i].ref = ref;
      ref += 120 + (s * 13 + i) % 60;
    }
    if (!(*w)->AddSeries(s, series[s], cs).ok()) std::abort();
  }
  if (!(*w)->Finish().ok()) std::abort();
  return path;
}

std::string BenchPath() { return "/tmp/tw_index_bench_" + std::to_string(::getpid()) + ".index"; }

void BM_IndexBuild100k(benchmark::State& state) {
  const auto series = Workload(kSeries);
  const std::string path = BenchPath();
  const int level = static_cast<int>(state.range(0));
  for (auto _ : state) BuildIndex(series, path, level);
  const double size = static_cast<double>(file::DiskUsage(path));
  state.counters["bytes"] = size;
  state.counters["B/series"] = size / kSeries;
  state.counters["B/sample"] = size / (kSeries * kSamplesPerSeries);
  (void)file::RemoveAll(path);
}
BENCHMARK(BM_IndexBuild100k)->Arg(0)->Arg(3)->Unit(benchmark::kMillisecond);

struct Fixture {
  std::vector<model::Labels> series = Workload(kSeries);
  std::string path = BuildIndex(series, BenchPath() + ".ro", 3);
  std::unique_ptr<IndexReader> r = std::move(IndexReader::Open(path).value());
};
Fixture& F() {
  static Fixture* f = new Fixture();
  return *f;
}

void BM_PostingsLookup(benchmark::State& state) {
  const IndexReader& r = *F().r;
  size_t i = 0;
  for (auto _ : state) {
    const model::Labels& ls = F().series[(i++ * 7919) % kSeries];
    benchmark::DoNotOptimize(r.Postings("namespace", ls.Get("namespace")));
  }
}
BENCHMARK(BM_PostingsLookup);

void BM_PostingsForMatchers(benchmark::State& state) {
  const IndexReader& r = *F().r;
  model::Matchers ms{*model::Matcher::Make(model::MatchType::kEqual, "__name__", "metric_7"),
                     *model::Matcher::Make(model::MatchType::kEqual, "job", "job3"),
                     *model::Matcher::Make(model::MatchType::kNotEqual, "env", "staging")};
  for (auto _ : state) benchmark::DoNotOptimize(r.PostingsForMatchers(ms));
}
BENCHMARK(BM_PostingsForMatchers);

// The peers harness's one_host_gpu_temp at scale: a metric name's long
// list (1 M series of 50 metrics: 20,000 ids, DCGM-like label names that
// sort before __name__, so they are spread over the index) against one
// host's 400. Arg 1: as PostingsForMatchers does it; arg 0: both lists
// decoded whole, then intersected (how it was done before the blocked lists
// and PostingsIntersecting).
struct Fleet {
  std::vector<model::Labels> series;
  std::string path;
  std::unique_ptr<IndexReader> r;
  Fleet() {
    for (int h = 0; h < 2500; h++) {
      for (int m = 0; m < 50; m++) {
        for (int g = 0; g < 8; g++) {
          series.push_back(model::Labels{{"Hostname", "host-" + std::to_string(10000 + h)},
                                         {"UUID", "GPU-" + std::to_string(h * 8 + g)},
                                         {"__name__", "DCGM_FI_" + std::to_string(100 + m)},
                                         {"gpu", std::to_string(g)}});
        }
      }
    }
    std::sort(series.begin(), series.end());
    path = BuildIndex(series, BenchPath() + ".fleet", 3);
    r = std::move(IndexReader::Open(path).value());
  }
};
Fleet& FleetIndex() {
  static Fleet* f = new Fleet();
  return *f;
}

void BM_PostingsOneHostOneMetric1M(benchmark::State& state) {
  const IndexReader& r = *FleetIndex().r;
  size_t i = 0;
  for (auto _ : state) {
    const std::string host = "host-" + std::to_string(10000 + (i * 7919) % 2500);
    const std::string name = "DCGM_FI_" + std::to_string(100 + i % 50);
    i++;
    if (state.range(0) == 1) {
      auto p = r.PostingsForMatchers({*model::Matcher::Make(model::MatchType::kEqual, "__name__", name),
                                      *model::Matcher::Make(model::MatchType::kEqual, "Hostname", host)});
      if (!p.ok() || p->size() != 8) std::abort();
    } else {
      auto a = r.Postings("__name__", name);
      auto b = r.Postings("Hostname", host);
      if (Intersect(*a, *b).size() != 8) std::abort();
    }
  }
}
BENCHMARK(BM_PostingsOneHostOneMetric1M)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_SeriesSequential(benchmark::State& state) {
  const IndexReader& r = *F().r;
  model::Labels ls;
  std::vector<ChunkMeta> cs;
  uint64_t i = 0;
  for (auto _ : state) {
    if (!r.Series(i++ % kSeries, &ls, &cs).ok()) std::abort();
  }
}
BENCHMARK(BM_SeriesSequential);

void BM_IndexOpen(benchmark::State& state) {
  const std::string& path = F().path;
  for (auto _ : state) benchmark::DoNotOptimize(IndexReader::Open(path));
}
BENCHMARK(BM_IndexOpen)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainwatch::index
