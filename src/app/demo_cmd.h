#pragma once
// `trainwatch demo`: a simulated training job (several ranks, loss curve with
// noise and one spike, warm-up + cosine learning rate, throughput) driven
// through the real C++ client (clients/cpp/trainwatch/client.h) against a
// running server, one run after another, so a fresh server shows live data.

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace trainwatch::app {

struct DemoOptions {
  std::string url = "http://127.0.0.1:9800";
  std::string project = "demo";
  int64_t steps = 36000;   // total steps of each run
  double rate = 10;        // steps per second
  int ranks = 4;
  int runs = 0;            // runs to do, then exit (0: forever)
  double pause_s = 10;     // between runs
  bool baseline = true;    // first a finished run "baseline" (id demo-baseline), once per server
  std::string spool_dir;   // client spool root (empty: the client's default)
  // Simulated GPUs: the demo keeps this file of the fake NVML library
  // (tests/fake_nvml, `reload` mode) up to date, one GPU per rank with this
  // process on it, so a server whose --collect.nvml-path is that library and
  // FAKE_NVML_CONFIG this file shows GPUs through the real collector (make
  // run does this where no real NVML loads). The ranks then report this
  // host's name, so the GPUs are attributed to the run. Empty: none.
  std::string fake_gpus;
};

// The simulated metrics of one rank of a run; deterministic per seed.
class DemoModel {
 public:
  DemoModel(int64_t total_steps, int rank, uint64_t seed, double base_loss = 2.6, double floor = 0.35);
  int64_t total() const { return total_; }
  double Lr(int64_t step) const;            // linear warm-up over 2% of the steps, then cosine to 10%
  int64_t SpikeStep() const { return spike_step_; }  // where the loss spike starts
  // Rank 3 is a straggler, 30 % slower, over [StragglerFrom, StragglerTo):
  // from 1 % of the run for a quarter of it (TrainingStragglerRank fires).
  int64_t StragglerFrom() const { return total_ / 100; }
  int64_t StragglerTo() const { return total_ / 100 + total_ / 4; }
  // Rank 2 prints a CUDA error (what PyTorch prints on a GPU fault) at 1/12
  // of the run, 5 minutes into `make run`'s hour-long run: the log pattern
  // rule TrainingLogFailure fires on it.
  int64_t CudaErrorStep() const { return total_ / 12; }
  // Rank 0 prints a progress line every this many steps.
  int64_t LogEvery() const { return std::max<int64_t>(1, total_ / 100); }
  // Rank 0 logs rich values (weight and gradient histograms, a sample
  // image, generated text, an evaluation table) every this many steps and
  // at the last: about 40 snapshots a run, for the Run page's histograms
  // and media slider.
  int64_t MediaEvery() const { return std::max<int64_t>(1, total_ / 40); }
  // How far the simulated model is from good, 1 at the start to 0 at the
  // loss floor: the rich values get sharper as it falls.
  double Badness(double loss) const { return std::clamp((loss - floor_) / (base_loss_ - floor_), 0.0, 1.0); }
  // loss, lr, grad_norm, samples_per_sec, step_time_seconds at `step`, and
  // where the step's time goes (step_phase/<phase>, what the clients' phase
  // timers log): they add up to step_time_seconds, and a straggler's extra
  // time is in forward and backward (a throttling GPU computes slower).
  struct Values {
    double loss, lr, grad_norm, samples_per_sec, step_time_seconds;
    double data, forward, backward, optimizer, comm;
  };
  Values At(int64_t step);

 private:
  int64_t total_;
  int rank_;
  double base_loss_, floor_;
  int64_t spike_step_;
  std::mt19937_64 rng_;
};

// The fake NVML library's file for `ranks` GPUs (docs in tests/fake_nvml):
// with `busy` (one Values per rank) each GPU runs process `pid` at the
// utilisation, power, temperature and clocks the rank's step implies (the
// straggler throttles: hot, lower clocks and power); without, idle. Energy
// counters (mJ) are in `energy_mj`, one per GPU, and go on from there.
std::string FakeNvmlConfig(int ranks, const std::vector<DemoModel::Values>* busy, uint32_t pid,
                           const std::vector<double>& energy_mj);

// A PNG image of `width` x `height` 8-bit RGB pixels (`rgb`, row by row,
// 3 bytes a pixel), deflated with zlib: what the demo logs as its sample.
std::string EncodePng(int width, int height, const std::vector<uint8_t>& rgb);

// The demo's step durations (every rank's steps of the live runs) as one
// Prometheus native histogram, train_step_duration_seconds{job="trainwatch-demo"}:
// cumulative, exponential schema 3 (buckets grow by 2^(1/8)), no negative
// observations. Sent through POST /api/v1/write. Not thread-safe.
class StepDurations {
 public:
  static constexpr int kSchema = 3;
  void Observe(double seconds);
  // A remote-write 1.0 WriteRequest (before snappy) of the histogram at t_ms:
  // one TimeSeries with one Histogram (integer counts, delta-coded buckets).
  std::string WriteRequest(int64_t t_ms) const;
  uint64_t count() const { return count_; }

 private:
  std::map<int32_t, uint64_t> buckets_;  // bucket index: (2^((i-1)/8), 2^(i/8)]
  uint64_t count_ = 0, zero_count_ = 0;   // zero_count_: observations <= kZeroThreshold
  double sum_ = 0;
};

// Validates the options: InvalidArgument-style message naming the flag, or "".
std::string ValidateDemoOptions(const DemoOptions& o);

// Runs the demo until `runs` runs are done or SIGINT/SIGTERM (blocked by
// the caller, see BlockTerminationSignals). Returns the exit code.
int RunDemo(const DemoOptions& o);

}  // namespace trainwatch::app
