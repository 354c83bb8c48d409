// Micro-benchmarks: WAL Log throughput with head-sized records, group commit,
// and the samples record codec.
//
//   build/release/src/tsdb/wal/wal_bench
// Set TMPDIR to put the log on the disk under test.

#include <benchmark/benchmark.h>

#include <random>
#include <thread>

#include "tsdb/wal/records.h"
#include "tsdb/wal/wal.h"
#include "tsdb/wal/wal_test_util.h"

namespace trainwatch::wal {
namespace {

// One HTTP push: 5000 samples of distinct series, one timestamp.
std::vector<RefSample> PushBatch(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<RefSample> b;
  b.reserve(5000);
  int64_t t = 1700000000000 + static_cast<int64_t>(seed) * 15000;
  for (uint64_t i = 0; i < 5000; i++) {
    b.push_back({1000 + i * 3 + rng() % 3, t, static_cast<double>(rng() % 100000) / 7.0});
  }
  return b;
}

void BM_EncodeSamples(benchmark::State& state) {
  auto batch = PushBatch(1);
  std::string rec;
  for (auto _ : state) {
    EncodeSamples(batch, &rec);
    benchmark::DoNotOptimize(rec.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch.size()));
  state.counters["bytes_per_sample"] = static_cast<double>(rec.size()) / static_cast<double>(batch.size());
}
BENCHMARK(BM_EncodeSamples);

void BM_DecodeSamples(benchmark::State& state) {
  auto batch = PushBatch(1);
  std::string rec;
  EncodeSamples(batch, &rec);
  std::vector<RefSample> out;
  for (auto _ : state) {
    if (!DecodeSamples(rec, &out).ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch.size()));
}
BENCHMARK(BM_DecodeSamples);

// Log of ~50 KB samples records from state.threads() threads, no Sync.
void BM_LogSamplesRecord(benchmark::State& state) {
  static testing::ScratchDir* dir;
  static std::unique_ptr<Writer> w;
  if (state.thread_index() == 0) {
    dir = new testing::ScratchDir();
    w = Writer::Open({.dir = dir->path()}).value();
  }
  std::string rec;
  EncodeSamples(PushBatch(static_cast<uint64_t>(state.thread_index())), &rec);
  for (auto _ : state) {
    if (!w->Log(rec).ok()) state.SkipWithError("log failed");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(rec.size()));
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    (void)w->Close();
    w.reset();
    delete dir;
  }
}
BENCHMARK(BM_LogSamplesRecord)->Threads(1)->Threads(4)->UseRealTime();

// Log + Sync per record from N threads: group commit shares fdatasyncs.
void BM_LogAndSync(benchmark::State& state) {
  static testing::ScratchDir* dir;
  static std::unique_ptr<Writer> w;
  if (state.thread_index() == 0) {
    dir = new testing::ScratchDir();
    w = Writer::Open({.dir = dir->path()}).value();
  }
  std::string rec;
  EncodeSamples(PushBatch(static_cast<uint64_t>(state.thread_index())), &rec);
  for (auto _ : state) {
    if (!w->Log(rec).ok() || !w->Sync().ok()) state.SkipWithError("log/sync failed");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(rec.size()));
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    state.counters["syncs_per_round"] =
        static_cast<double>(state.iterations() * state.threads()) / static_cast<double>(w->SyncRounds());
    (void)w->Close();
    w.reset();
    delete dir;
  }
}
BENCHMARK(BM_LogAndSync)->Threads(1)->Threads(4)->Threads(16)->UseRealTime();

}  // namespace
}  // namespace trainwatch::wal
