// A 90-day range over many series, answered from the tiers (a 6 h step: the
// 6 h tier, and the 1 h and 5 m tiers for its last window; a 3 h or 2 h
// step: the 1 h tier) and from raw blocks (the 6 h query 1 ms off the grid,
// which tiers cannot answer).
// Figures: docs/performance.md. Run:
//   TW_DS_SERIES=2000 [TW_DS_RETENTION_DAYS=15] [TW_DS_INTERVAL_S=15] [TW_DS_DIR=/tmp/ds] build/release/src/tsdb/downsample_bench
// Building the data dir (90 days of one sample per 5 minutes per series by default,
// compacted and downsampled) happens once, before the first benchmark. With
// TW_DS_DIR the data dir is kept there, and a later run with the same
// settings opens it instead of building it again (for profiling: building
// 400 series of 15 s samples takes minutes).

#include <benchmark/benchmark.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/file.h"
#include "promql/engine.h"
#include "tsdb/db.h"

namespace trainwatch::tsdb {
namespace {

constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDays = 90;
constexpr int64_t kEnd = 1'700'000'000'000 / (24 * kHour) * (24 * kHour);
constexpr int64_t kStart = kEnd - kDays * 24 * kHour;

struct Data {
  std::string dir;
  std::unique_ptr<DB> db;
  size_t series = 0;
  int64_t retention_days = 0;
  int64_t interval = 5 * 60'000;  // between a series' samples; TW_DS_INTERVAL_S
  std::atomic<int64_t> now{0};
};

Data* Get() {
  static Data* d = [] {
    auto* out = new Data();
    const char* env = std::getenv("TW_DS_SERIES");
    out->series = env != nullptr ? static_cast<size_t>(std::atoll(env)) : 1000;
    if (const char* iv = std::getenv("TW_DS_INTERVAL_S"); iv != nullptr) out->interval = std::atoll(iv) * 1000;
    const char* days = std::getenv("TW_DS_RETENTION_DAYS");
    out->retention_days = days != nullptr ? std::atoll(days) : 0;
    const char* keep = std::getenv("TW_DS_DIR");
    out->dir = keep != nullptr ? std::string(keep)
                               : std::string(std::filesystem::temp_directory_path() /
                                             ("tw_ds_bench_" + std::to_string(::getpid())));
    // Written once the data is complete: the settings it was built with.
    const std::string built = out->dir + "/built";
    const std::string settings = std::to_string(out->series) + " series, a sample every " +
                                 std::to_string(out->interval) + " ms, retention " +
                                 std::to_string(out->retention_days) + " d";
    const bool reuse = keep != nullptr && file::Exists(built);
    std::string was;
    if (reuse && (!file::ReadFile(built, &was).ok() || was != settings)) {
      std::fprintf(stderr, "%s was built with other settings (%s): remove it or pick another TW_DS_DIR\n",
                   out->dir.c_str(), built.c_str());
      std::exit(2);
    }
    if (!reuse) (void)file::RemoveAll(out->dir);
    Options o;
    o.dir = out->dir;
    o.background = false;
    // TW_DS_RETENTION_DAYS=15: --retention.time as `serve`'s default, the
    // clock at the last sample: raw data of the last 15 days, tiers of
    // every block. Unset: raw data kept, the clock a month past the last
    // sample.
    o.retention_ms = out->retention_days * 24 * kHour;
    o.wal_sync = WalSync::kInterval;
    out->now = out->retention_days > 0 ? (reuse ? kEnd : kStart) : kEnd + 32 * 24 * kHour;
    o.now_ms = [out] { return out->now.load(); };
    out->db = std::move(DB::Open(o).value());
    if (reuse) {
      // One flush, so this build's maintenance (compaction, tiers) has run.
      const int64_t t0 = MonoNanos();
      if (!out->db->Flush().ok()) std::abort();
      const Stats st = out->db->GetStats();
      std::fprintf(stderr, "opened %s, built before: %s; flush %.1f s; raw %llu blocks, tiers %llu blocks %.1f MiB\n",
                   out->dir.c_str(), settings.c_str(), static_cast<double>(MonoNanos() - t0) / 1e9,
                   static_cast<unsigned long long>(st.blocks), static_cast<unsigned long long>(st.tier_blocks),
                   static_cast<double>(st.tier_bytes) / (1 << 20));
      return out;
    }
    // The data dir goes with the process (it was left in /tmp, one per
    // run), unless TW_DS_DIR asks to keep it.
    if (keep == nullptr) {
      std::atexit([] {
        Data* d = Get();
        d->db.reset();
        (void)file::RemoveAll(d->dir);
      });
    }
    const int64_t t0 = MonoNanos();
    // A day at a time, so the head never holds more than one day's chunks
    // open per series (as a server that persists every 2 h would).
    for (int64_t day = kStart; day < kEnd; day += 24 * kHour) {
      // With a retention, the clock follows the data (retention refuses
      // samples older than it).
      if (out->retention_days > 0) out->now = day + 24 * kHour;
      auto app = out->db->NewAppender();
      for (size_t s = 0; s < out->series; ++s) {
        model::Labels l{{"__name__", "gpu_util"}, {"gpu", std::to_string(s % 8)}, {"host", std::to_string(s / 8)}};
        storage::SeriesRef ref = 0;
        for (int64_t t = day; t < day + 24 * kHour; t += out->interval) {
          const double v = static_cast<double>((t / out->interval + static_cast<int64_t>(s)) % 101);
          ref = app->Append(ref, l, t, v).value();
        }
      }
      if (!app->Commit().ok()) std::abort();
      // Persisted and compacted day by day, as the background loop would
      // (one flush compacts at most 64 merges).
      if (!out->db->Flush().ok()) std::abort();
    }
    const int64_t t1 = MonoNanos();
    if (!out->db->Flush().ok()) std::abort();
    const Stats st = out->db->GetStats();
    std::fprintf(stderr, "built %zu series x %lld days: append+flush+compact+downsample %.1f s, last flush %.1f s; raw %llu blocks "
                 "%.1f MiB, tiers %llu blocks %.1f MiB\n",
                 out->series, static_cast<long long>(kDays), static_cast<double>(t1 - t0) / 1e9,
                 static_cast<double>(MonoNanos() - t1) / 1e9, static_cast<unsigned long long>(st.blocks),
                 static_cast<double>(st.block_bytes) / (1 << 20), static_cast<unsigned long long>(st.tier_blocks),
                 static_cast<double>(st.tier_bytes) / (1 << 20));
    if (keep != nullptr && !file::WriteFileAtomic(built, settings).ok()) std::abort();
    return out;
  }();
  return d;
}

// range(0): 1 = a 6 h step on the grid (the tiers answer), 0 = the same
// 1 ms off it (raw), 2 = a 3 h step on the grid (the 1 h tier answers), 3 =
// a 2 h step (the 1 h tier; Grafana's $__interval for 90 days on a panel
// about 1,000 points wide).
void Run(benchmark::State& state, const std::string& func) {
  Data* d = Get();
  promql::Engine engine{promql::EngineOptions{}};
  const int64_t off = state.range(0) == 0 ? 1 : 0;
  const int64_t hours = state.range(0) == 2 ? 3 : state.range(0) == 3 ? 2 : 6;
  const int64_t step = hours * kHour;
  const std::string range = "[" + std::to_string(hours) + "h]";
  const std::string expr = func == "avg" ? "sum by (gpu) (avg_over_time(gpu_util" + range + "))"
                                         : "max_over_time(gpu_util" + range + ")";
  // TW_DS_TRIM=1: malloc_trim(0) before each query (untimed), as `serve`
  // did every 5 s while users queried: the query's buffers are page-faulted
  // in again (base/memory.h, ShouldTrim).
  const bool trim = std::getenv("TW_DS_TRIM") != nullptr;
  for (auto _ : state) {
    if (trim) {
      state.PauseTiming();
      ::malloc_trim(0);
      state.ResumeTiming();
    }
    auto r = engine.Range(*d->db, expr, kStart + 24 * kHour + off, kEnd + off, step);
    if (!r.ok() || r->matrix.empty()) state.SkipWithError("query failed");
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel(std::to_string(d->series) + " series, 89 days, step " + std::to_string(hours) + "h" +
                 (d->retention_days > 0 ? ", retention " + std::to_string(d->retention_days) + "d" : "") +
                 ", a sample every " + std::to_string(d->interval / 1000) + " s");
}

void BM_SumAvgOverTime90d(benchmark::State& state) { Run(state, "avg"); }
void BM_MaxOverTime90d(benchmark::State& state) { Run(state, "max"); }

BENCHMARK(BM_SumAvgOverTime90d)->Arg(1)->Arg(2)->Arg(3)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaxOverTime90d)->Arg(1)->Arg(2)->Arg(3)->Arg(0)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainwatch::tsdb
