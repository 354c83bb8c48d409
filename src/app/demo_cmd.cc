#include "app/demo_cmd.h"

#include <httplib.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <numbers>
#include <string_view>
#include <vector>

#include "app/api_client.h"
#include "app/collect_loop.h"
#include "app/wiring.h"
#include "base/clock.h"
#include "remote/proto.h"
#include "trainwatch/client.h"

namespace trainwatch::app {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kPeakLr = 3e-4;
constexpr double kBatch = 256;

std::string RunName() {
  std::time_t t = static_cast<std::time_t>(NowMillis() / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "live-%Y%m%d-%H%M%S", &tm);
  return buf;
}

std::string Config(const DemoOptions& o, double peak_lr) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                R"({"model": "demo-transformer-125m", "optimizer": {"name": "adamw", "lr": %g, "betas": [0.9, 0.95],)"
                R"( "weight_decay": 0.1}, "batch_size": %d, "world_size": %d, "schedule": "warmup+cosine", "steps": %lld})",
                peak_lr, static_cast<int>(kBatch), o.ranks, static_cast<long long>(o.steps));
  return buf;
}

// A rank's step slower than this is a throttled GPU (the straggler's).
bool Throttled(const DemoModel::Values& v) { return v.samples_per_sec < 1700; }

// The simulated GPU's power draw: idle, computing, or throttled.
double FakePowerW(const DemoModel::Values* v) {
  if (v == nullptr) return 68;
  return Throttled(*v) ? 610 : 690;
}

// The fake NVML file kept by --fake-gpus: rewritten (whole, by rename) at
// most once a second with the ranks' latest step, energy counters going on.
class FakeGpus {
 public:
  FakeGpus(std::string path, int ranks) : path_(std::move(path)), ranks_(ranks), energy_mj_(ranks, 0) {}
  // `busy`: the latest values of each rank; null: idle (between runs).
  void Write(const std::vector<DemoModel::Values>* busy, bool force = false) {
    const int64_t now = NowMillis();
    if (!force && now - last_ms_ < 1000) return;
    const double dt = last_ms_ == 0 ? 0 : static_cast<double>(now - last_ms_) / 1000.0;
    for (int i = 0; i < ranks_; i++) {
      const DemoModel::Values* v = busy != nullptr && static_cast<size_t>(i) < busy->size() ? &(*busy)[i] : nullptr;
      energy_mj_[i] += FakePowerW(v) * dt * 1000;
    }
    last_ms_ = now;
    const std::string tmp = path_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << FakeNvmlConfig(ranks_, busy, static_cast<uint32_t>(::getpid()), energy_mj_);
      if (!out) {
        if (!warned_) std::cerr << "trainwatch demo: cannot write " << tmp << "\n";
        warned_ = true;
        return;
      }
    }
    std::rename(tmp.c_str(), path_.c_str());
  }

 private:
  std::string path_;
  int ranks_;
  std::vector<double> energy_mj_;
  int64_t last_ms_ = 0;
  bool warned_ = false;
};

// The rich values a training script logs next to its scalars (rank 0,
// every MediaEvery() steps): the distributions of a layer's weights (which
// widen as it trains) and gradients (which follow grad_norm, spike
// included), a generated sample whose noise falls with the loss, a text
// sample whose words get right, and an evaluation table of predictions.
client::Run::RichValues DemoMedia(const DemoModel& model, int64_t step, const DemoModel::Values& v,
                                  std::mt19937_64* rng) {
  const double bad = model.Badness(v.loss);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> uniform(0, 1);
  constexpr int kValues = 4096;
  const double progress = static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, model.total()));
  std::vector<double> weights(kValues), grads(kValues);
  for (double& w : weights) w = (0.02 + 0.03 * progress) * normal(*rng);
  // Gradients: heavy-tailed (a Student-t-like mixture), scaled by the norm.
  for (double& g : grads) g = 1e-3 * v.grad_norm * normal(*rng) * (uniform(*rng) < 0.05 ? 4 : 1);

  // A 64 x 64 sample: colour rings blurred by noise in proportion to the loss.
  constexpr int kSide = 64;
  std::vector<uint8_t> rgb(kSide * kSide * 3);
  for (int y = 0; y < kSide; y++) {
    for (int x = 0; x < kSide; x++) {
      const double r = std::hypot(x - kSide / 2.0, y - kSide / 2.0) / (kSide / 2.0);
      const double ring = 0.5 + 0.5 * std::cos(r * 3 * std::numbers::pi);
      const double target[3] = {ring, 0.5 + 0.5 * std::sin(r * 5), 1 - ring * 0.7};
      for (int c = 0; c < 3; c++) {
        const double px = (1 - bad) * target[c] + bad * uniform(*rng);
        rgb[(y * kSide + x) * 3 + c] = static_cast<uint8_t>(std::clamp(px, 0.0, 1.0) * 255 + 0.5);
      }
    }
  }
  char caption[64];
  std::snprintf(caption, sizeof caption, "step %lld, loss %.3f", static_cast<long long>(step), v.loss);

  // Generated text: each word right with the model's skill, else garbled.
  static constexpr std::string_view kSentence[] = {"the", "GPU", "finished", "the", "epoch", "and", "the",
                                                  "loss", "kept", "falling", "towards", "its", "floor"};
  std::string text = "**step " + std::to_string(step) + "** · prompt: *the GPU*\n\n> ";
  for (size_t i = 0; i < std::size(kSentence); i++) {
    if (i > 0) text += ' ';
    if (uniform(*rng) >= bad) {
      text += kSentence[i];
    } else {
      for (size_t k = 0; k < kSentence[i].size(); k++) text += static_cast<char>('a' + (*rng)() % 26);
    }
  }

  // Evaluation: eight samples, right with the model's skill.
  static constexpr const char* kClasses[] = {"cat", "dog", "car", "ship"};
  std::vector<std::vector<client::Cell>> rows;
  for (int i = 0; i < 8; i++) {
    const int label = i % 4;
    const bool right = uniform(*rng) >= 0.75 * bad;
    const int predicted = right ? label : (label + 1 + static_cast<int>((*rng)() % 3)) % 4;
    const double confidence = right ? 0.5 + 0.5 * (1 - bad) * uniform(*rng) : 0.25 + 0.4 * uniform(*rng);
    rows.push_back({"sample-" + std::to_string(i), kClasses[label], kClasses[predicted],
                    std::round(confidence * 1000) / 1000, right});
  }
  return {{"weights/fc1", client::Histogram(weights, 64)},
          {"gradients/fc1", client::Histogram(grads, 64)},
          {"samples/generated", client::Image(EncodePng(kSide, kSide, rgb), caption)},
          {"samples/text", client::Text(text)},
          {"eval/predictions", client::Table({"input", "label", "prediction", "confidence", "correct"}, rows)}};
}

// Sends the step durations' histogram every few seconds (and at the end of
// a run) through remote write; a refusal is reported once, the demo goes on.
class StepDurationsSender {
 public:
  explicit StepDurationsSender(std::string url) : url_(std::move(url)) {}
  StepDurations* hist() { return &hist_; }
  void MaybeSend(bool force = false) {
    const int64_t now = NowMillis();
    if (hist_.count() == 0 || (!force && now - last_ms_ < 5000)) return;
    last_ms_ = now;
    auto c = NewApiClient(url_);
    if (!c.ok()) return;
    std::string body;
    remote::SnappyCompress(hist_.WriteRequest(now), &body);
    httplib::Headers headers = {{"Content-Encoding", "snappy"}, {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
    c->http->set_connection_timeout(2);
    auto res = c->http->Post(c->prefix + "/api/v1/write", headers, body, "application/x-protobuf");
    if ((!res || res->status / 100 != 2) && !warned_) {
      warned_ = true;
      std::cerr << "trainwatch demo: remote write of train_step_duration_seconds: "
                << (res ? "HTTP " + std::to_string(res->status) + " " + res->body : std::string("server unreachable")) << "\n";
    }
  }

 private:
  std::string url_;
  StepDurations hist_;
  int64_t last_ms_ = 0;
  bool warned_ = false;
};

// One run: `ranks` clients logging `steps` steps at `rate` (inf: as fast as
// possible). False when interrupted (the run is then marked failed).
bool DoRun(const DemoOptions& o, const std::string& id, const std::string& name, int64_t steps, double rate,
           uint64_t seed, double base_loss, FakeGpus* gpus, StepDurationsSender* durations) {
  std::vector<std::unique_ptr<client::Run>> runs;
  std::vector<DemoModel> models;
  for (int r = 0; r < o.ranks; r++) {
    client::Options co;
    co.url = o.url;
    co.project = o.project;
    co.name = name;
    co.id = id;
    co.rank = r;
    co.world_size = o.ranks;
    // Simulated GPUs are this host's (the collector attributes them by pid
    // to runs of its own host); else two ranks per simulated node.
    co.host = gpus != nullptr ? HostName() : "demo-node-" + std::to_string(r / 2);
    co.total_steps = steps;
    co.config_json = Config(o, kPeakLr);
    co.tags = {"demo", "simulated"};
    co.command = "trainwatch demo";
    co.spool_dir = o.spool_dir;
    co.finish_timeout_s = 10;  // Ctrl-C of `make run` stops the server too
    // Points carry server time (base/clock.h); under a warped clock the
    // client's intervals shrink with it, so a run's heartbeats stay as
    // frequent in server time as at speed 1.
    co.now_ms = [] { return NowMillis(); };
    if (ClockWarped()) {
      co.flush_interval_s = std::max(0.02, co.flush_interval_s / ClockSpeed());
      co.heartbeat_interval_s = std::max(0.05, co.heartbeat_interval_s / ClockSpeed());
    }
    std::string err;
    auto run = client::Run::Init(co, &err);
    if (!run) {
      std::cerr << "trainwatch demo: " << err << "\n";
      return false;
    }
    runs.push_back(std::move(run));
    models.emplace_back(steps, r, seed + static_cast<uint64_t>(r), base_loss);
  }
  std::mt19937_64 media_rng(seed ^ 0x6d65646961ULL);  // its own stream: the scalars stay as they were
  std::cout << "trainwatch demo: run " << o.project << "/" << runs[0]->name() << " (id " << id << "), " << steps
            << " steps x " << o.ranks << " ranks" << (std::isinf(rate) ? std::string() : " at " + std::to_string(rate) + " steps/s")
            << ", sending to " << o.url << std::endl;
  int64_t step = 0;
  auto t0 = Clock::now();
  bool interrupted = false;
  double last_loss = 0;
  std::vector<DemoModel::Values> latest;  // each rank's last step, for the simulated GPUs
  while (step < steps && !interrupted) {
    int64_t target = steps;
    if (!std::isinf(rate)) {
      double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      target = std::min<int64_t>(steps, static_cast<int64_t>(elapsed * rate) + 1);
    }
    for (; step < target; step++) {
      for (int r = 0; r < o.ranks; r++) {
        DemoModel::Values v = models[r].At(step);
        if (gpus != nullptr) {
          if (latest.size() <= static_cast<size_t>(r)) latest.resize(r + 1);
          latest[r] = v;
        }
        runs[r]->Log({{"loss", v.loss},
                      {"lr", v.lr},
                      {"grad_norm", v.grad_norm},
                      {"samples_per_sec", v.samples_per_sec},
                      {"step_time_seconds", v.step_time_seconds},
                      {"step_phase/data", v.data},
                      {"step_phase/forward", v.forward},
                      {"step_phase/backward", v.backward},
                      {"step_phase/optimizer", v.optimizer},
                      {"step_phase/comm", v.comm}},
                     step);
        if (durations != nullptr) durations->hist()->Observe(v.step_time_seconds);
        if (r == 0) last_loss = v.loss;
        if (r == 0 && (step % models[r].MediaEvery() == 0 || step == steps - 1)) {
          runs[r]->Log(client::Run::Values(), DemoMedia(models[r], step, v, &media_rng), step);
        }
        // The logs a training script prints, through the same client.
        if (r == 0 && step % models[r].LogEvery() == 0) {
          char line[160];
          std::snprintf(line, sizeof line, "step %lld/%lld loss %.4f lr %.3g %.0f samples/s",
                        static_cast<long long>(step), static_cast<long long>(steps), v.loss, v.lr, v.samples_per_sec);
          runs[r]->LogLine(line);
        }
        if (r == 2 && step == models[r].CudaErrorStep()) {
          runs[r]->LogLine("RuntimeError: CUDA error: an illegal memory access was encountered (simulated by the demo)");
        }
      }
    }
    if (gpus != nullptr) gpus->Write(&latest);
    if (durations != nullptr) durations->MaybeSend();
    if (step < steps) interrupted = StopSignalWithin(0.1);
  }
  if (gpus != nullptr) gpus->Write(nullptr, true);  // idle until the next run
  if (durations != nullptr) durations->MaybeSend(true);
  runs[0]->SetSummary("final_loss", last_loss);
  if (!interrupted && step >= steps / 2) runs[0]->Alert("demo checkpoint", "the demo run saved a checkpoint", "info");
  bool ok = true;
  // Rank 0 last: it sets the status once the other ranks have flushed.
  for (int r = o.ranks - 1; r >= 0; r--) ok = runs[r]->Finish(interrupted ? "failed" : "finished") && ok;
  std::cout << "trainwatch demo: run " << runs[0]->name() << (interrupted ? " stopped" : " finished")
            << (ok ? "" : " (some batches left spooled: server unreachable)") << std::endl;
  return !interrupted;
}

bool BaselineExists(const DemoOptions& o) {
  auto c = NewApiClient(o.url);  // the URL's or the environment's credentials, as the C++ client
  if (!c.ok()) return false;
  httplib::Client& cli = *c->http;
  cli.set_connection_timeout(5);
  auto res = cli.Get(c->prefix + "/api/v1/runs/demo-baseline");
  return res && res->status == 200;
}

}  // namespace

DemoModel::DemoModel(int64_t total_steps, int rank, uint64_t seed, double base_loss, double floor)
    : total_(std::max<int64_t>(1, total_steps)),
      rank_(rank),
      base_loss_(base_loss),
      floor_(floor),
      spike_step_(total_ * 3 / 5),
      rng_(seed) {}

double DemoModel::Lr(int64_t step) const {
  int64_t warmup = std::max<int64_t>(1, total_ / 50);
  if (step < warmup) return kPeakLr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  double p = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total_ - warmup)));
  return kPeakLr * (0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * p)));
}

DemoModel::Values DemoModel::At(int64_t step) {
  std::normal_distribution<double> noise(0, 1);
  double scale = static_cast<double>(total_) / 90.0;
  double loss = floor_ + (base_loss_ - floor_) * std::pow(1 + static_cast<double>(step) / scale, -0.7);
  loss *= std::exp(0.03 * noise(rng_));
  double grad = 1.5 * std::pow(1 + static_cast<double>(step) / (scale * 2), -0.3) * std::exp(0.15 * noise(rng_));
  // The spike: a bad batch around 60% of the run, decaying over ~1% of it.
  int64_t len = std::max<int64_t>(3, total_ / 100);
  if (step >= spike_step_ && step < spike_step_ + len) {
    double decay = 1.0 - static_cast<double>(step - spike_step_) / static_cast<double>(len);
    loss *= 1 + 1.8 * decay;
    grad *= 1 + 9 * decay;
  }
  // Rank 3 is a slightly slower GPU (the ranks view shows it), and for a
  // while a straggler 30 % slower (a throttling GPU: the rule pack's
  // TrainingStragglerRank fires within minutes of the start).
  double sps = 1850;
  if (rank_ == 3) sps = step >= StragglerFrom() && step < StragglerTo() ? 1850 / 1.3 : 1790;
  sps += 40 * noise(rng_);
  const double step_time = kBatch / sps;
  // Data loading, the optimizer step and the all-reduce take about the same
  // on every rank; the GPU's forward and backward take the rest, 36:64.
  const double base = kBatch / 1850;
  const double data = 0.08 * base, optimizer = 0.06 * base, comm = 0.08 * base;
  const double compute = step_time - data - optimizer - comm;
  return Values{loss, Lr(step), grad, sps, step_time, data, 0.36 * compute, 0.64 * compute, optimizer, comm};
}

namespace {

constexpr double kZeroThreshold = 2.938735877055719e-39;  // Prometheus's default

void PutVarint(uint64_t v, std::string* out) {
  for (; v >= 0x80; v >>= 7) out->push_back(static_cast<char>((v & 0x7f) | 0x80));
  out->push_back(static_cast<char>(v));
}
uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
void PutTag(int field, int wire_type, std::string* out) { PutVarint(static_cast<uint64_t>(field) << 3 | wire_type, out); }
void PutDouble(int field, double v, std::string* out) {
  PutTag(field, 1, out);
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  for (int i = 0; i < 8; i++) out->push_back(static_cast<char>(bits >> (8 * i)));
}
void PutBytes(int field, std::string_view v, std::string* out) {
  PutTag(field, 2, out);
  PutVarint(v.size(), out);
  out->append(v);
}

}  // namespace

void StepDurations::Observe(double seconds) {
  if (!(seconds >= 0) || std::isinf(seconds)) return;
  count_++;
  sum_ += seconds;
  if (seconds <= kZeroThreshold) {
    zero_count_++;
    return;
  }
  // Bucket i holds (2^((i-1)/8), 2^(i/8)].
  buckets_[static_cast<int32_t>(std::ceil(std::log2(seconds) * (1 << kSchema)))]++;
}

std::string StepDurations::WriteRequest(int64_t t_ms) const {
  // prompb types.proto: Histogram{count_int 1, sum 3, schema 4, zero_threshold 5,
  // zero_count_int 6, positive_spans 11 {offset 1, length 2}, positive_deltas 12, timestamp 15}.
  std::string h;
  PutTag(1, 0, &h);
  PutVarint(count_, &h);
  PutDouble(3, sum_, &h);
  PutTag(4, 0, &h);
  PutVarint(ZigZag(kSchema), &h);
  PutDouble(5, kZeroThreshold, &h);
  PutTag(6, 0, &h);
  PutVarint(zero_count_, &h);
  std::string deltas;
  int64_t prev_count = 0;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    // A span of consecutive buckets; its offset is the gap from the last one.
    const int32_t first = it->first;
    const int32_t offset = it == buckets_.begin() ? first : first - (std::prev(it)->first + 1);
    uint32_t length = 0;
    for (int32_t next = first; it != buckets_.end() && it->first == next; ++it, ++next, ++length) {
      PutVarint(ZigZag(static_cast<int64_t>(it->second) - prev_count), &deltas);
      prev_count = static_cast<int64_t>(it->second);
    }
    std::string span;
    PutTag(1, 0, &span);
    PutVarint(ZigZag(offset), &span);
    PutTag(2, 0, &span);
    PutVarint(length, &span);
    PutBytes(11, span, &h);
  }
  if (!deltas.empty()) PutBytes(12, deltas, &h);
  PutTag(15, 0, &h);
  PutVarint(static_cast<uint64_t>(t_ms), &h);

  std::string series;
  for (auto [name, value] : {std::pair<std::string_view, std::string_view>{"__name__", "train_step_duration_seconds"},
                             {"job", "trainwatch-demo"}}) {
    std::string label;
    PutBytes(1, name, &label);
    PutBytes(2, value, &label);
    PutBytes(1, label, &series);
  }
  PutBytes(4, h, &series);
  std::string req;
  PutBytes(1, series, &req);
  return req;
}

std::string EncodePng(int width, int height, const std::vector<uint8_t>& rgb) {
  // Each scanline: filter type 0 (none), then its pixels.
  std::string raw;
  raw.reserve(static_cast<size_t>(height) * (1 + 3 * static_cast<size_t>(width)));
  for (int y = 0; y < height; y++) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(rgb.data()) + static_cast<size_t>(y) * width * 3,
               static_cast<size_t>(width) * 3);
  }
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::string z(zlen, '\0');
  compress2(reinterpret_cast<Bytef*>(z.data()), &zlen, reinterpret_cast<const Bytef*>(raw.data()),
            static_cast<uLong>(raw.size()), Z_BEST_COMPRESSION);
  z.resize(zlen);
  auto be32 = [](std::string* out, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((v >> shift) & 0xff));
  };
  std::string png("\x89PNG\r\n\x1a\n", 8);
  auto chunk = [&](const char* type, const std::string& data) {
    be32(&png, static_cast<uint32_t>(data.size()));
    const std::string body = std::string(type, 4) + data;
    png += body;
    be32(&png, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
  };
  std::string ihdr;
  be32(&ihdr, static_cast<uint32_t>(width));
  be32(&ihdr, static_cast<uint32_t>(height));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, adaptive filtering, no interlace
  chunk("IHDR", ihdr);
  chunk("IDAT", z);
  chunk("IEND", "");
  return png;
}

std::string FakeNvmlConfig(int ranks, const std::vector<DemoModel::Values>* busy, uint32_t pid,
                           const std::vector<double>& energy_mj) {
  std::string out = "# written by `trainwatch demo --fake-gpus`: simulated GPUs for the fake NVML library\nreload\n";
  out += "gpus " + std::to_string(ranks) + "\n";
  constexpr double kMiB = 1 << 20;
  char line[512];
  for (int i = 0; i < ranks; i++) {
    const bool on = busy != nullptr && static_cast<size_t>(i) < busy->size();
    double util = 0, power_w = 68, temp = 34, sm_clock = 345, fb_used_mib = 512;
    if (on) {
      const DemoModel::Values& v = (*busy)[i];
      // The GPU computes during forward and backward; a slow step means a throttled GPU.
      const double compute = (v.forward + v.backward) / v.step_time_seconds;
      const bool throttled = Throttled(v);
      util = std::min(100.0, 100 * compute + 5);
      power_w = FakePowerW(&v);
      temp = throttled ? 88 : 71;
      sm_clock = throttled ? 1410 : 1980;
      fb_used_mib = 61440 + 512 * i;
    }
    std::snprintf(line, sizeof line,
                  "gpu %d name NVIDIA H100 80GB HBM3\ngpu %d util_gpu %.0f\ngpu %d util_mem %.0f\ngpu %d temp %.0f\n"
                  "gpu %d power_mw %.0f\ngpu %d sm_clock %.0f\ngpu %d mem_clock 2619\ngpu %d fb_total %.0f\n"
                  "gpu %d fb_used %.0f\ngpu %d fb_free %.0f\ngpu %d field:83 %.0f\n",
                  i, i, util, i, util * 0.6, i, temp, i, power_w * 1000, i, sm_clock, i, i, 81559.0 * kMiB, i,
                  fb_used_mib * kMiB, i, (81559 - fb_used_mib) * kMiB, i,
                  static_cast<size_t>(i) < energy_mj.size() ? energy_mj[i] : 0.0);
    out += line;
    if (on) {
      std::snprintf(line, sizeof line, "gpu %d process %u %llu\n", i, pid,
                    static_cast<unsigned long long>(fb_used_mib - 512) << 20);
      out += line;
    }
  }
  return out;
}

std::string ValidateDemoOptions(const DemoOptions& o) {
  if (o.steps < 1) return "--steps: must be at least 1";
  if (!(o.rate > 0)) return "--rate: must be positive";
  if (o.ranks < 1 || o.ranks > 1024) return "--ranks: must be 1-1024";
  if (o.runs < 0) return "--runs: must not be negative";
  if (o.pause_s < 0) return "--pause: must not be negative";
  if (!client::detail::ParseUrl(o.url).ok) return "--url: expected http://host:port";
  return "";
}

int RunDemo(const DemoOptions& o) {
  std::string err = ValidateDemoOptions(o);
  if (!err.empty()) {
    std::cerr << "trainwatch demo: " << err << "\n";
    return 2;
  }
  // The simulated GPUs' file first: make run starts the server on it.
  std::unique_ptr<FakeGpus> gpus;
  if (!o.fake_gpus.empty()) {
    gpus = std::make_unique<FakeGpus>(o.fake_gpus, o.ranks);
    gpus->Write(nullptr, true);
  }
  // Wait for the server (make run starts both at once).
  for (int i = 0; i < 300; i++) {
    auto c = NewApiClient(o.url);
    if (!c.ok()) return 2;
    httplib::Client& cli = *c->http;
    cli.set_connection_timeout(1);
    auto res = cli.Get(c->prefix + "/-/ready");
    if (res && res->status == 200) break;
    if (StopSignalWithin(0.2)) return 0;
  }
  std::random_device rd;
  if (o.baseline && !BaselineExists(o)) {
    if (!DoRun(o, "demo-baseline", "baseline", std::min<int64_t>(o.steps, 2000), INFINITY, 1, 2.7, nullptr, nullptr)) return 0;
  }
  StepDurationsSender durations(o.url);  // the live runs' steps, all runs in one cumulative histogram
  for (int n = 0; o.runs == 0 || n < o.runs; n++) {
    std::string id;
    for (int i = 0; i < 16; i++) id.push_back("0123456789abcdef"[rd() % 16]);
    if (!DoRun(o, id, RunName(), o.steps, o.rate, rd(), 2.6, gpus.get(), &durations)) return 0;
    if ((o.runs == 0 || n + 1 < o.runs) && StopSignalWithin(o.pause_s)) return 0;
  }
  return 0;
}

}  // namespace trainwatch::app
