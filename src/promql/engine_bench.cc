// PromQL engine benchmark on the side-by-side benchmark's workload and query
// set (shared/bench/peers: workload.py, peerbench.py query_set): 250 GPU nodes
// x 405 series (101,250) x 240 samples at 15 s, one core.
//
// The data sits in 120-sample Gorilla XOR chunks and is read through tsdb's
// ChunkListIterator (a virtual Next()/At() per sample, as the head and blocks
// serve it), so decoding costs what it costs in the server; series selection
// is a name postings list plus matcher checks, cheaper than the head's.
//
// Env: TW_BENCH_TARGETS (default 250) shrinks the data (e.g. for callgrind);
// TW_BENCH_DUMP=path writes every query's full result (%.17g) to compare runs;
// TW_BENCH_STORAGE=head loads the same data into a tsdb::Head and queries
// that instead (its Select copies every series' chunk list and labels up front).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/check.h"
#include "promql/engine.h"
#include "tsdb/chunk_series.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/head.h"

namespace trainwatch::promql {
namespace {

constexpr int64_t kIntervalMs = 15'000;
constexpr int kSteps = 240;
constexpr int kChunkSamples = 120;
constexpr int64_t kT0 = 1'700'000'040'000;  // multiple of 60 s

// splitmix64: deterministic, fast.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  int64_t Int(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1)); }
  double Gauss(double mean, double sd) {
    double u1 = std::max(Uniform(), 1e-300), u2 = Uniform();
    return mean + sd * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  }

 private:
  uint64_t s_;
};

struct BenchSeries {
  model::Labels labels;
  std::vector<tsdb::ChunkRefData> chunks;  // views into `bytes`
  std::vector<std::string> bytes;
};

bool MatchesAll(const model::Labels& l, const model::Matchers& ms) {
  for (const auto& m : ms) {
    if (!m.Matches(l.Get(m.name()))) return false;
  }
  return true;
}

class BenchDb : public storage::Queryable {
 public:
  explicit BenchDb(int targets);
  Result<std::unique_ptr<storage::Querier>> NewQuerier(int64_t mint, int64_t maxt) override;

  const std::vector<BenchSeries>& series() const { return series_; }
  const std::vector<uint32_t>* Postings(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : &it->second;
  }
  const std::vector<uint32_t>& all() const { return all_; }
  int64_t end_ms() const { return kT0 + (kSteps - 1) * kIntervalMs + kIntervalMs - 1; }
  int64_t samples() const { return static_cast<int64_t>(series_.size()) * kSteps; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [n, _] : by_name_) out.push_back(n);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  void Add(model::Labels l, int64_t offset_ms, const std::vector<double>& v);
  void Target(int idx);

  std::vector<BenchSeries> series_;
  std::unordered_map<std::string, std::vector<uint32_t>> by_name_;
  std::vector<uint32_t> all_;
};

void BenchDb::Add(model::Labels l, int64_t offset_ms, const std::vector<double>& v) {
  BenchSeries s;
  s.labels = std::move(l);
  int64_t ts[kSteps];
  for (int k = 0; k < kSteps; ++k) ts[k] = kT0 + k * kIntervalMs + offset_ms;
  for (int k = 0; k < kSteps; k += kChunkSamples) {
    std::string b;
    chunkenc::EncodeXor(ts + k, v.data() + k, kChunkSamples, &b);
    s.bytes.push_back(std::move(b));
  }
  for (size_t c = 0; c < s.bytes.size(); ++c) {
    s.chunks.push_back({ts[c * kChunkSamples], ts[c * kChunkSamples + kChunkSamples - 1], chunkenc::Encoding::kXor,
                        s.bytes[c]});
  }
  series_.push_back(std::move(s));
}

// Value shapes follow workload.py: integer gauges walking inside bounds,
// rounded float gauges, integer and tick counters, a 12-bucket histogram.
std::vector<double> WalkInt(Rng& r, double v, double lo, double hi, double p, int step, double quant = 1) {
  std::vector<double> out(kSteps);
  for (double& x : out) {
    if (r.Uniform() < p) v = std::clamp(v + static_cast<double>(r.Int(-step, step)) * quant, lo, hi);
    x = v;
  }
  return out;
}
std::vector<double> WalkFloat(Rng& r, double v, double lo, double hi, double sigma, int dec, double pull = 0) {
  std::vector<double> out(kSteps);
  double mean = v, scale = std::pow(10.0, dec);
  for (double& x : out) {
    v = std::clamp(v + r.Gauss(0, sigma) + pull * (mean - v), lo, hi);
    x = dec < 0 ? v : std::round(v * scale) / scale;
  }
  return out;
}
std::vector<double> Counter(Rng& r, double v, double mean, double sd, double div = 1, double quant = 1) {
  std::vector<double> out(kSteps);
  for (double& x : out) {
    double inc = std::floor(r.Gauss(mean, sd));
    if (inc > 0) v += inc - std::fmod(inc, quant);
    x = v / div;
  }
  return out;
}
std::vector<double> Const(double v) { return std::vector<double>(kSteps, v); }

void BenchDb::Target(int idx) {
  Rng r(0x7472616e + static_cast<uint64_t>(idx) * 7919);
  char host[32], ip[32];
  std::snprintf(host, sizeof(host), "gpu-node-%04d", idx);
  std::snprintf(ip, sizeof(ip), "10.%d.%d.%d", idx / 65536 % 256, idx / 256 % 256, idx % 256);
  int64_t offset = r.Int(0, kIntervalMs - 1);
  bool busy = r.Uniform() < 0.92;
  const std::string sip = ip;
  // dcgm-exporter: 8 GPUs x 20 fields.
  static const char* kFields[] = {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP",
                                  "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                                  "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                                  "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL",
                                  "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE",
                                  "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
                                  "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                                  "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES",
                                  "DCGM_FI_PROF_PCIE_RX_BYTES"};
  for (int g = 0; g < 8; ++g) {
    char uuid[64], pci[32];
    std::snprintf(uuid, sizeof(uuid), "GPU-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(r.Next()),
                  static_cast<unsigned>(r.Next() & 0xffff), static_cast<unsigned>(r.Next() & 0xffff),
                  static_cast<unsigned>(r.Next() & 0xffff), static_cast<unsigned long long>(r.Next() >> 16));
    std::snprintf(pci, sizeof(pci), "00000000:%02X:00.0", 0x18 + 0x10 * g);
    std::vector<double> power = WalkFloat(r, busy ? r.Uniform(560, 680) : 72.0, busy ? 400 : 60, busy ? 700 : 90,
                                          busy ? 12.0 : 0.8, 3, 0.2);
    std::vector<double> energy(kSteps);
    double e = static_cast<double>(r.Int(100'000'000'000, 1'000'000'000'000));
    for (int k = 0; k < kSteps; ++k) energy[k] = e += std::floor(power[k] * 15 * 1000);
    double used = busy ? static_cast<double>(r.Int(60000, 78000)) : 1;
    std::vector<double> vals[20] = {
        WalkInt(r, busy ? 1980 : 345, busy ? 1755 : 345, busy ? 1980 : 345, 0.15, 1, 15),
        Const(2619),
        WalkInt(r, busy ? static_cast<double>(r.Int(55, 68)) : 34, 30, 85, 0.35, 1),
        WalkInt(r, busy ? static_cast<double>(r.Int(50, 64)) : 31, 28, 84, 0.35, 1),
        power,
        energy,
        Counter(r, static_cast<double>(r.Int(0, 3)), 0.001, 0.04),
        WalkInt(r, busy ? static_cast<double>(r.Int(93, 100)) : 0, busy ? 85 : 0, busy ? 100 : 3, 0.6, 3),
        WalkInt(r, busy ? static_cast<double>(r.Int(30, 60)) : 0, 0, 100, 0.7, 6),
        Const(0),
        Const(0),
        Const(0),
        Const(81559 - used - 512),
        WalkInt(r, used, 1, 79000, 0.05, 2, 2),
        Counter(r, static_cast<double>(r.Int(1'000'000'000'000, 10'000'000'000'000)), busy ? 4.5e10 : 1e3,
                busy ? 4e9 : 1e2),
        WalkFloat(r, busy ? r.Uniform(0.85, 0.98) : 0, 0, 1, busy ? 0.02 : 0, 6, 0.3),
        WalkFloat(r, busy ? r.Uniform(0.35, 0.6) : 0, 0, 1, busy ? 0.03 : 0, 6, 0.3),
        WalkFloat(r, busy ? r.Uniform(0.3, 0.5) : 0, 0, 1, busy ? 0.03 : 0, 6, 0.3),
        WalkInt(r, busy ? static_cast<double>(r.Int(100'000'000, 1'000'000'000)) : 1e5, 1e5, 5e9, 0.9, 1, 1e7),
        WalkInt(r, busy ? static_cast<double>(r.Int(100'000'000, 1'000'000'000)) : 1e5, 1e5, 5e9, 0.9, 1, 1e7),
    };
    for (int f = 0; f < 20; ++f) {
      Add(model::Labels{{"__name__", kFields[f]},
                        {"Hostname", host},
                        {"modelName", "NVIDIA H100 80GB HBM3"},
                        {"DCGM_FI_DRIVER_VERSION", "535.129.03"},
                        {"instance", sip + ":9400"},
                        {"job", "dcgm-exporter"},
                        {"cluster", "train-a"},
                        {"gpu", std::to_string(g)},
                        {"UUID", uuid},
                        {"device", "nvidia" + std::to_string(g)},
                        {"pci_bus_id", pci}},
          offset, vals[f]);
    }
  }
  // node-exporter: 101 series.
  const std::string ni = sip + ":9100";
  auto node = [&](std::initializer_list<std::pair<std::string_view, std::string_view>> extra, std::string_view name,
                  const std::vector<double>& v) {
    std::vector<model::Label> ls = {{"__name__", std::string(name)}, {"instance", ni}, {"job", "node-exporter"},
                                    {"cluster", "train-a"}};
    for (const auto& [n, val] : extra) ls.push_back({std::string(n), std::string(val)});
    Add(model::Labels(std::move(ls)), offset, v);
  };
  static const char* kModes[] = {"idle", "user", "system", "iowait", "irq", "softirq", "steal", "nice"};
  for (int c = 0; c < 8; ++c) {
    double shares[8] = {0, busy ? 0.55 : 0.02, busy ? 0.12 : 0.01, 0.01, 0.002, busy ? 0.02 : 0.001, 0, 0};
    double rest = 1;
    for (int m = 1; m < 8; ++m) rest -= shares[m];
    shares[0] = std::max(0.0, rest);
    for (int m = 0; m < 8; ++m) {
      double mean = 1500 * shares[m];
      std::string cpu = std::to_string(c);
      node({{"cpu", cpu}, {"mode", kModes[m]}}, "node_cpu_seconds_total",
           Counter(r, mean > 0 ? static_cast<double>(r.Int(1'000'000, 100'000'000)) : 0, mean,
                   mean > 0 ? std::sqrt(mean) * 2 : 0, 100));
    }
  }
  const double mem_total = 2'164'000'000'000;
  node({}, "node_memory_MemTotal_bytes", Const(mem_total));
  static const std::pair<const char*, double> kMem[] = {{"node_memory_MemAvailable_bytes", 0.6},
                                                        {"node_memory_MemFree_bytes", 0.25},
                                                        {"node_memory_Cached_bytes", 0.3},
                                                        {"node_memory_Buffers_bytes", 0.004}};
  for (const auto& [name, start] : kMem) {
    double v = std::floor(mem_total * start / 4096) * 4096;
    node({}, name, WalkInt(r, v, v / 2, std::min(mem_total, v * 2), 0.95, 200000, 4096));
  }
  for (const char* name : {"node_load1", "node_load5", "node_load15"}) {
    node({}, name, WalkFloat(r, busy ? r.Uniform(40, 90) : 0.5, 0, 400, name[9] == '1' && name[10] == 0 ? 2.0 : 0.7, 2, 0.1));
  }
  for (const char* dev : {"eth0", "ib0", "ib1", "ib2"}) {
    bool ib = dev[0] == 'i';
    double rate = busy ? (ib ? 2.0e9 : 2.0e7) : 2.0e4;
    static const std::pair<const char*, double> kNet[] = {{"node_network_receive_bytes_total", 15},
                                                          {"node_network_transmit_bytes_total", 15},
                                                          {"node_network_receive_packets_total", 15.0 / 4096},
                                                          {"node_network_transmit_packets_total", 15.0 / 4096}};
    for (const auto& [name, f] : kNet) {
      double mean = rate * f;
      node({{"device", dev}}, name,
           Counter(r, static_cast<double>(r.Int(1'000'000'000, 10'000'000'000'000)), mean, mean * 0.15));
    }
  }
  for (const char* d : {"nvme0n1", "nvme1n1"}) {
    node({{"device", d}}, "node_disk_read_bytes_total",
         Counter(r, static_cast<double>(r.Int(10'000'000'000, 10'000'000'000'000)), busy ? 2e8 : 1e5,
                 busy ? 5e7 : 5e4, 1, 512));
    node({{"device", d}}, "node_disk_written_bytes_total",
         Counter(r, static_cast<double>(r.Int(10'000'000'000, 10'000'000'000'000)), busy ? 5e7 : 1e5,
                 busy ? 2e7 : 5e4, 1, 512));
    node({{"device", d}}, "node_disk_io_time_seconds_total",
         Counter(r, static_cast<double>(r.Int(10'000'000, 1'000'000'000)), busy ? 2000 : 20, busy ? 300 : 5, 1000));
  }
  static const struct {
    const char *mnt, *dev, *fstype;
    double size;
  } kFs[] = {{"/", "/dev/nvme0n1p2", "ext4", 1'888'000'000'000}, {"/data", "/dev/nvme1n1", "xfs", 7'680'000'000'000}};
  for (const auto& fs : kFs) {
    double avail = std::floor(fs.size * r.Uniform(0.2, 0.8) / 4096) * 4096;
    node({{"mountpoint", fs.mnt}, {"device", fs.dev}, {"fstype", fs.fstype}}, "node_filesystem_size_bytes",
         Const(fs.size));
    node({{"mountpoint", fs.mnt}, {"device", fs.dev}, {"fstype", fs.fstype}}, "node_filesystem_avail_bytes",
         WalkInt(r, avail, avail / 2, fs.size, 0.3, 2000, 4096));
  }
  node({}, "node_context_switches_total",
       Counter(r, static_cast<double>(r.Int(1'000'000'000, 100'000'000'000)), busy ? 3e6 : 3e4, busy ? 3e5 : 3e3));
  node({}, "node_intr_total",
       Counter(r, static_cast<double>(r.Int(1'000'000'000, 100'000'000'000)), busy ? 5e6 : 5e4, busy ? 5e5 : 5e3));
  node({}, "node_procs_running", WalkInt(r, busy ? static_cast<double>(r.Int(8, 20)) : 1, 1, 200, 0.8, 3));
  // Trainer: 8 ranks x 18 series.
  int run = idx / 64;
  char run_id[16];
  std::snprintf(run_id, sizeof(run_id), "run-%03d", run);
  static const char* kModels[] = {"llama-70b", "llama-8b", "mixtral-8x7b"};
  static const char* kLe[] = {"0.05", "0.1", "0.2", "0.3", "0.4", "0.5", "0.75", "1", "1.5", "2", "5", "+Inf"};
  static const double kBuckets[] = {0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 5.0};
  const std::string ti = sip + ":8000";
  for (int g = 0; g < 8; ++g) {
    std::string rank = std::to_string((idx % 64) * 8 + g), local = std::to_string(g);
    auto train = [&](std::string_view name, const std::vector<double>& v, const char* le = nullptr) {
      std::vector<model::Label> ls = {{"__name__", std::string(name)}, {"instance", ti},
                                      {"job", "trainer"},              {"cluster", "train-a"},
                                      {"run_id", run_id},              {"model", kModels[run % 3]},
                                      {"rank", rank},                  {"local_rank", local}};
      if (le != nullptr) ls.push_back({"le", le});
      Add(model::Labels(std::move(ls)), offset, v);
    };
    double median = r.Uniform(0.30, 0.55), sigma = r.Uniform(0.08, 0.25);
    double p[12];
    double prev = 0;
    for (int b = 0; b < 11; ++b) {
      double cdf = 0.5 * (1 + std::erf(std::log(kBuckets[b] / median) / (sigma * std::sqrt(2.0))));
      p[b] = cdf - prev;
      prev = cdf;
    }
    p[11] = 1 - prev;
    double step_rate = std::max(1.0, std::round(15 / median));
    std::vector<double> loss(kSteps), grad = WalkFloat(r, r.Uniform(0.6, 1.2), 0.05, 50, 0.08, -1, 0.2), lr(kSteps);
    double k = static_cast<double>(r.Int(2000, 20000)), a = r.Uniform(1.6, 2.2), bb = r.Uniform(2, 4),
           tau = r.Uniform(8000, 30000), noise = r.Uniform(0.01, 0.04);
    for (int s = 0; s < kSteps; ++s) {
      k += step_rate;
      loss[s] = a + bb * std::exp(-k / tau) + r.Gauss(0, noise);
      lr[s] = 3e-4 * 0.5 * (1 + std::cos(M_PI * std::min(1.0, k / 100000)));
    }
    train("training_loss", loss);
    train("training_grad_norm", grad);
    train("training_learning_rate", lr);
    train("training_samples_total", Counter(r, static_cast<double>(r.Int(1'000'000, 100'000'000)), step_rate * 16, 16, 1, 16));
    std::vector<std::vector<double>> cum(12, std::vector<double>(kSteps));
    std::vector<double> sum(kSteps), count(kSteps);
    double c[12];
    double hist = static_cast<double>(r.Int(5000, 50000)), acc = 0;
    for (int b = 0; b < 12; ++b) c[b] = acc += std::floor(hist * p[b]);
    double total = c[11], hsum = total * median;
    for (int s = 0; s < kSteps; ++s) {
      double n = std::max(0.0, std::floor(r.Gauss(15 / median, 1.5)));
      double add = 0;
      for (int b = 0; b < 12; ++b) {
        double mu = n * p[b];
        double x = std::round(r.Gauss(mu, mu > 0 ? std::sqrt(mu * (1 - p[b])) : 0));
        if (x > 0) add += x;
        c[b] += add;
        cum[b][s] = c[b];
      }
      hsum += (c[11] - total) * median * r.Uniform(0.97, 1.03);
      total = c[11];
      sum[s] = hsum;
      count[s] = total;
    }
    for (int b = 0; b < 12; ++b) train("training_step_duration_seconds_bucket", cum[b], kLe[b]);
    train("training_step_duration_seconds_sum", sum);
    train("training_step_duration_seconds_count", count);
  }
}

BenchDb::BenchDb(int targets) {
  series_.reserve(static_cast<size_t>(targets) * 405);
  for (int i = 0; i < targets; ++i) Target(i);
  std::sort(series_.begin(), series_.end(),
            [](const BenchSeries& a, const BenchSeries& b) { return a.labels < b.labels; });
  for (uint32_t i = 0; i < series_.size(); ++i) {
    by_name_[std::string(series_[i].labels.MetricName())].push_back(i);
    all_.push_back(i);
  }
}

// Yields matching series lazily, each as a ChunkSeries with its labels copied
// (what the head's querier does).
class BenchSet : public storage::SeriesSet {
 public:
  // `ms` are the matchers the postings `ids` do not answer yet.
  BenchSet(const BenchDb* db, const std::vector<uint32_t>* ids, model::Matchers ms, int64_t mint, int64_t maxt)
      : db_(db), ids_(ids), ms_(std::move(ms)), mint_(mint), maxt_(maxt) {}
  bool Next() override {
    while (ids_ != nullptr && pos_ < ids_->size()) {
      const BenchSeries& s = db_->series()[(*ids_)[pos_++]];
      if (!MatchesAll(s.labels, ms_)) continue;
      cur_ = std::make_unique<tsdb::ChunkSeries>(s.labels, s.chunks, nullptr, mint_, maxt_, nullptr);
      return true;
    }
    return false;
  }
  const storage::Series& At() const override { return *cur_; }
  Status Err() const override { return Status::OK(); }

 private:
  const BenchDb* db_;
  const std::vector<uint32_t>* ids_;
  model::Matchers ms_;
  int64_t mint_, maxt_;
  size_t pos_ = 0;
  std::unique_ptr<tsdb::ChunkSeries> cur_;
};

class BenchQuerier : public storage::Querier {
 public:
  BenchQuerier(const BenchDb* db, int64_t mint, int64_t maxt) : db_(db), mint_(mint), maxt_(maxt) {}
  std::unique_ptr<storage::SeriesSet> Select(bool, const storage::SelectHints& hints,
                                             const model::Matchers& ms) override {
    const std::vector<uint32_t>* ids = &db_->all();
    model::Matchers rest;
    for (const auto& m : ms) {
      if (m.name() == model::kMetricName && m.type() == model::MatchType::kEqual) {
        ids = db_->Postings(m.value());
      } else {
        rest.push_back(m);
      }
    }
    return std::make_unique<BenchSet>(db_, ids, std::move(rest), std::max(mint_, hints.start),
                                      std::min(maxt_, hints.end));
  }
  Result<std::vector<std::string>> LabelValues(std::string_view name, const model::Matchers&) override {
    if (name == model::kMetricName) return db_->names();
    return Status::NotSupported("bench querier: label values");
  }
  Result<std::vector<std::string>> LabelNames(const model::Matchers&) override {
    return Status::NotSupported("bench querier: label names");
  }

 private:
  const BenchDb* db_;
  int64_t mint_, maxt_;
};

Result<std::unique_ptr<storage::Querier>> BenchDb::NewQuerier(int64_t mint, int64_t maxt) {
  return std::unique_ptr<storage::Querier>(std::make_unique<BenchQuerier>(this, mint, maxt));
}

void DumpIfAsked();
BenchDb& Db();

// What the queries run against: the bench store, or a Head holding the same data.
storage::Queryable& Store() {
  static storage::Queryable* store = []() -> storage::Queryable* {
    BenchDb& db = Db();
    const char* kind = std::getenv("TW_BENCH_STORAGE");
    if (kind == nullptr || std::string_view(kind) != "head") return &db;
    auto* head = new tsdb::Head(tsdb::HeadOptions{});
    std::vector<int64_t> ts;
    std::vector<double> vs;
    auto app = head->NewAppender();
    size_t pending = 0;
    for (const auto& s : db.series()) {
      ts.clear();
      vs.clear();
      for (const auto& c : s.chunks) CHECK(chunkenc::DecodeAll(c.enc, c.data, &ts, &vs).ok(), "BUG: bench chunk");
      storage::SeriesRef ref = 0;
      for (size_t i = 0; i < ts.size(); ++i) ref = *app->Append(ref, s.labels, ts[i], vs[i]);
      if ((pending += ts.size()) > 200'000) {
        CHECK(app->Commit().ok(), "BUG: bench commit");
        pending = 0;
      }
    }
    CHECK(app->Commit().ok(), "BUG: bench commit");
    return head;
  }();
  return *store;
}

// Built on first use, outside any timing loop.
BenchDb& Db() {
  static BenchDb* db = [] {
    const char* n = std::getenv("TW_BENCH_TARGETS");
    return new BenchDb(n != nullptr ? std::atoi(n) : 250);
  }();
  return *db;
}

// Builds the data and writes the dump, once, before the first timing loop.
void Prepare() {
  static const bool done = [] {
    (void)Store();
    DumpIfAsked();
    return true;
  }();
  (void)done;
}

struct BenchQuery {
  const char* name;
  bool range;
  std::string expr;
};

std::vector<BenchQuery> Queries() {
  int targets = static_cast<int>(Db().series().size() / 405);
  char host[32];
  std::snprintf(host, sizeof(host), "gpu-node-%04d", std::min(7, targets - 1));
  return {
      {"rate_sum_by_instance", true, R"(sum by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[5m])))"},
      {"rate_sum_by_run", true, "sum by (run_id) (rate(training_samples_total[5m]))"},
      {"avg_over_time_by_host", true, "avg by (Hostname) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m]))"},
      {"histogram_quantile_p95", true,
       "histogram_quantile(0.95, sum by (le) (rate(training_step_duration_seconds_bucket[5m])))"},
      {"one_host_gpu_temp", true, std::string(R"(max_over_time(DCGM_FI_DEV_GPU_TEMP{Hostname=")") + host + "\"}[5m])"},
      {"topk_avg_power_1h", false, "topk(10, avg_over_time(DCGM_FI_DEV_POWER_USAGE[1h]))"},
      {"count_cpu_samples", false, "sum(count_over_time(node_cpu_seconds_total[3630s]))"},
  };
}

Result<QueryResult> Run(Engine& eng, const BenchQuery& q) {
  storage::Queryable& store = Store();
  int64_t t_last = Db().end_ms();
  if (q.range) {
    int64_t start = (kT0 / 1000 + 600 + 59) / 60 * 60, end = t_last / 1000 / 60 * 60;
    return eng.Range(store, q.expr, start * 1000, end * 1000, 60'000);
  }
  return eng.Instant(store, q.expr, t_last + kIntervalMs);
}

void Digest(const QueryResult& r, benchmark::State& state) {
  double sum = 0, points = 0;
  for (const auto& s : r.matrix) {
    for (const auto& p : s.points) sum += std::isfinite(p.v) ? p.v : 0, points++;
  }
  for (const auto& s : r.vector) sum += std::isfinite(s.v) ? s.v : 0, points++;
  state.counters["series"] = static_cast<double>(r.matrix.size() + r.vector.size());
  state.counters["points"] = points;
  state.counters["sum"] = sum;
}

void BM_Query(benchmark::State& state, size_t qi) {
  Prepare();
  Engine eng(EngineOptions{});
  BenchQuery q = Queries()[qi];
  QueryResult last;
  for (auto _ : state) {
    auto r = Run(eng, q);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    last = std::move(*r);
  }
  Digest(last, state);
}

// The verification scan: sum(count_over_time(<name>[duration+2*interval])) per name.
void BM_FullScan(benchmark::State& state) {
  Prepare();
  Engine eng(EngineOptions{});
  BenchDb& db = Db();
  std::vector<std::string> names = db.names();
  double total = 0;
  for (auto _ : state) {
    total = 0;
    for (const auto& n : names) {
      auto r = Run(eng, {"scan", false, "sum(count_over_time(" + n + "[3630s]))"});
      if (!r.ok()) {
        state.SkipWithError(r.status().ToString().c_str());
        return;
      }
      for (const auto& s : r->vector) total += s.v;
    }
  }
  state.counters["names"] = static_cast<double>(names.size());
  state.counters["samples"] = total;
  state.counters["expected"] = static_cast<double>(db.samples());
}

void DumpIfAsked() {
  const char* path = std::getenv("TW_BENCH_DUMP");
  if (path == nullptr) return;
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return;
  Engine eng(EngineOptions{});
  for (const auto& q : Queries()) {
    auto r = Run(eng, q);
    std::fprintf(f, "# %s %s\n", q.name, q.expr.c_str());
    if (!r.ok()) {
      std::fprintf(f, "error %s\n", r.status().ToString().c_str());
      continue;
    }
    for (const auto& s : r->matrix) {
      std::fprintf(f, "%s", s.labels.ToString().c_str());
      for (const auto& p : s.points) std::fprintf(f, " %lld:%.17g", static_cast<long long>(p.t), p.v);
      std::fprintf(f, "\n");
    }
    for (const auto& s : r->vector) {
      std::fprintf(f, "%s %lld:%.17g\n", s.labels.ToString().c_str(), static_cast<long long>(s.t), s.v);
    }
  }
  std::fclose(f);
}

// With --benchmark_repetitions: the least disturbed run (the box is shared).
double MinOf(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

[[maybe_unused]] const bool kRegistered = [] {
  static const char* kNames[] = {"rate_sum_by_instance", "rate_sum_by_run",   "avg_over_time_by_host",
                                 "histogram_quantile_p95", "one_host_gpu_temp", "topk_avg_power_1h",
                                 "count_cpu_samples"};
  for (size_t i = 0; i < std::size(kNames); ++i) {
    benchmark::RegisterBenchmark((std::string("BM_Query/") + kNames[i]).c_str(),
                                 [i](benchmark::State& s) { BM_Query(s, i); })
        ->Unit(benchmark::kMillisecond)
        ->ComputeStatistics("min", MinOf);
  }
  benchmark::RegisterBenchmark("BM_FullScan", BM_FullScan)->Unit(benchmark::kMillisecond)->ComputeStatistics("min", MinOf);
  return true;
}();

}  // namespace
}  // namespace trainwatch::promql
