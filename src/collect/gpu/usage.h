#pragma once
// GPU time, energy and cost per training run (issue 19), from the GPU
// collector's families: every collection, each GPU running processes of
// runs adds the time since the previous collection to those runs (split
// evenly where several runs share a GPU), with the energy it used over that
// time (DCGM's total energy counter; power x time where the GPU has none),
// the share of that time it spent at low utilisation, and the cost at the
// price per GPU-hour of its model.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "collect/family.h"

namespace trainwatch::collect::gpu {

// Price per GPU-hour by GPU model: `--runs.gpu-hour-price` as
// "H100=4.5,A100=2.2,1.5": a model whose modelName contains the text
// (case-insensitive; the first that matches) has that price; a bare number
// is the price of any other model (none: 0).
class PriceTable {
 public:
  static Result<PriceTable> Parse(std::string_view spec);
  double For(std::string_view model_name) const;
  bool empty() const { return by_model_.empty() && fallback_ == 0; }

 private:
  std::vector<std::pair<std::string, double>> by_model_;  // lower-case text, price
  double fallback_ = 0;
};

struct RunUsage {
  std::string project, run;
  double gpu_seconds = 0;
  double energy_joules = 0;
  double idle_seconds = 0;  // of gpu_seconds, at utilisation below the idle threshold
  double cost = 0;          // gpu_seconds at the price of each GPU's model
};

struct UsageOptions {
  double idle_util_percent = 20;  // below this DCGM_FI_DEV_GPU_UTIL a held GPU counts as idle
  // A gap longer than this between two collections (the server was down) is
  // not counted: the runs may not have held the GPUs through it.
  int64_t max_gap_ms = 60000;
  PriceTable prices;
};

class UsageMeter {
 public:
  explicit UsageMeter(UsageOptions o) : o_(std::move(o)) {}

  // The usage since the previous call, per run, from one collection's
  // families (DCGM_FI_DEV_GPU_UTIL, _POWER_USAGE, _TOTAL_ENERGY_CONSUMPTION
  // and the process series' project/run labels). The first call, and a GPU
  // first seen, only set the baseline.
  std::vector<RunUsage> Add(const Families& gpu, int64_t now_ms);

 private:
  struct Last {
    int64_t t = 0;
    double energy_mj = -1;  // < 0: no counter
  };
  UsageOptions o_;
  std::unordered_map<std::string, Last> last_;  // by Hostname/UUID (or gpu index)
};

}  // namespace trainwatch::collect::gpu
