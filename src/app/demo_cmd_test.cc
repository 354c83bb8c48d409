#include "app/demo_cmd.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "app/flags.h"

namespace trainwatch::app {
namespace {

TEST(DemoTest, FlagsParse) {
  std::vector<const char*> args = {"trainwatch", "demo", "--url", "http://127.0.0.1:9", "--steps", "500",
                                   "--rate", "50", "--ranks", "2", "--runs", "1", "--baseline", "false"};
  auto c = ParseCommandLine(static_cast<int>(args.size()), args.data());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kDemo);
  EXPECT_EQ(c->demo.url, "http://127.0.0.1:9");
  EXPECT_EQ(c->demo.steps, 500);
  EXPECT_EQ(c->demo.rate, 50);
  EXPECT_EQ(c->demo.ranks, 2);
  EXPECT_EQ(c->demo.runs, 1);
  EXPECT_FALSE(c->demo.baseline);
  EXPECT_EQ(ValidateDemoOptions(c->demo), "");
}

TEST(DemoTest, BadOptionsNameTheFlag) {
  DemoOptions o;
  o.steps = 0;
  EXPECT_NE(ValidateDemoOptions(o).find("--steps"), std::string::npos);
  o = DemoOptions{};
  o.rate = 0;
  EXPECT_NE(ValidateDemoOptions(o).find("--rate"), std::string::npos);
  o = DemoOptions{};
  o.url = "https://x";
  EXPECT_NE(ValidateDemoOptions(o).find("--url"), std::string::npos);
}

TEST(DemoTest, ScheduleSpikeAndDeterminism) {
  DemoModel m(1000, 0, 7), same(1000, 0, 7);
  EXPECT_LT(m.Lr(0), m.Lr(19));      // warm-up over 2% of the steps
  EXPECT_DOUBLE_EQ(m.Lr(20), 3e-4);  // peak
  EXPECT_NEAR(m.Lr(999), 3e-5, 1e-6);  // cosine down to 10%
  EXPECT_EQ(m.SpikeStep(), 600);
  std::vector<double> loss;
  for (int s = 0; s < 1000; s++) {
    DemoModel::Values v = m.At(s);
    EXPECT_EQ(v.loss, same.At(s).loss);
    EXPECT_NEAR(v.step_time_seconds * v.samples_per_sec, 256, 1e-9);
    EXPECT_NEAR(v.data + v.forward + v.backward + v.optimizer + v.comm, v.step_time_seconds, 1e-12);
    EXPECT_GT(v.forward, 0);
    loss.push_back(v.loss);
  }
  EXPECT_LT(loss[999], loss[0] / 2);          // it learns
  EXPECT_GT(loss[600], 1.8 * loss[595]);      // the spike
  EXPECT_LT(loss[620], 1.2 * loss[595]);      // and recovery
}

// Issue 19: rank 3 straggles (30 % slower) for a quarter of the run from 1 %
// of it, by more than TrainingStragglerRank's 1.2 times the median; before
// and after, it is within it.
TEST(DemoTest, RankThreeStragglesForAWhile) {
  std::vector<DemoModel> ranks;
  for (int r = 0; r < 4; r++) ranks.emplace_back(1000, r, 11 + r);
  EXPECT_EQ(ranks[3].StragglerFrom(), 10);
  EXPECT_EQ(ranks[3].StragglerTo(), 260);
  EXPECT_EQ(ranks[2].CudaErrorStep(), 83);  // within the first twelfth: 5 minutes of `make run`'s hour
  EXPECT_EQ(ranks[0].LogEvery(), 10);
  auto mean_step_time = [&](int r, int64_t from, int64_t to) {
    double sum = 0;
    for (int64_t s = from; s < to; s++) sum += ranks[r].At(s).step_time_seconds;
    return sum / static_cast<double>(to - from);
  };
  for (auto [from, to, slow] : {std::tuple{0, 10, false}, std::tuple{10, 260, true}, std::tuple{260, 1000, false}}) {
    double others = (mean_step_time(0, from, to) + mean_step_time(1, from, to) + mean_step_time(2, from, to)) / 3;
    double r3 = mean_step_time(3, from, to);
    if (slow) {
      EXPECT_GT(r3, 1.25 * others) << from;
      // The straggler's extra time is compute, not data or the all-reduce.
      DemoModel::Values v3 = ranks[3].At(from), v0 = ranks[0].At(from);
      EXPECT_GT(v3.forward + v3.backward, 1.2 * (v0.forward + v0.backward)) << from;
      EXPECT_DOUBLE_EQ(v3.data, v0.data);
    } else {
      EXPECT_LT(r3, 1.1 * others) << from;
    }
  }
}

// Issue 19: `make run` without a GPU simulates one per rank through the fake
// NVML library's file: busy GPUs run the demo's process, the straggler's
// throttles, idle ones run nothing.
TEST(DemoTest, FakeGpusFollowTheRanks) {
  std::vector<DemoModel> ranks;
  for (int r = 0; r < 4; r++) ranks.emplace_back(1000, r, 5 + r);
  std::vector<DemoModel::Values> v;
  for (int r = 0; r < 4; r++) v.push_back(ranks[r].At(100));  // rank 3 straggles at step 100
  std::string cfg = FakeNvmlConfig(4, &v, 4242, {1000, 2000, 3000, 4000});
  EXPECT_TRUE(cfg.find("reload\ngpus 4\n") != std::string::npos) << cfg;
  for (int r = 0; r < 4; r++) {
    EXPECT_NE(cfg.find("gpu " + std::to_string(r) + " process 4242 "), std::string::npos) << cfg;
  }
  EXPECT_NE(cfg.find("gpu 0 power_mw 690000\n"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("gpu 3 power_mw 610000\n"), std::string::npos) << cfg;  // throttled
  EXPECT_NE(cfg.find("gpu 3 temp 88\n"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("gpu 2 field:83 3000\n"), std::string::npos) << cfg;
  std::string idle = FakeNvmlConfig(4, nullptr, 4242, {0, 0, 0, 0});
  EXPECT_EQ(idle.find("process"), std::string::npos);
  EXPECT_NE(idle.find("gpu 1 util_gpu 0\n"), std::string::npos) << idle;
}

// The demo's sample image is a PNG any viewer reads: signature, IHDR of the
// size asked, each chunk's CRC, and IDAT inflating to filter-0 scanlines of
// the pixels given.
TEST(DemoTest, EncodePngRoundTrips) {
  const int w = 5, h = 3;
  std::vector<uint8_t> rgb(w * h * 3);
  for (size_t i = 0; i < rgb.size(); i++) rgb[i] = static_cast<uint8_t>(i * 7);
  const std::string png = EncodePng(w, h, rgb);
  ASSERT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = v << 8 | static_cast<uint8_t>(png[at + i]);
    return v;
  };
  std::vector<std::string> types;
  std::string idat, ihdr;
  size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint32_t len = be32(at);
    ASSERT_LE(at + 12 + len, png.size());
    const std::string body = png.substr(at + 4, 4 + len);
    EXPECT_EQ(be32(at + 8 + len), crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())))
        << body.substr(0, 4);
    types.push_back(body.substr(0, 4));
    if (types.back() == "IDAT") idat += body.substr(4);
    if (types.back() == "IHDR") ihdr = body.substr(4);
    at += 12 + len;
  }
  EXPECT_EQ(at, png.size());
  EXPECT_EQ(types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  ASSERT_EQ(ihdr.size(), 13u);
  EXPECT_EQ(ihdr.substr(0, 8), std::string("\0\0\0\x05\0\0\0\x03", 8));
  EXPECT_EQ(ihdr.substr(8), std::string("\x08\x02\0\0\0", 5));
  std::string raw(h * (1 + w * 3), '\xff');
  uLongf n = raw.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &n, reinterpret_cast<const Bytef*>(idat.data()),
                       static_cast<uLong>(idat.size())),
            Z_OK);
  ASSERT_EQ(n, raw.size());
  for (int y = 0; y < h; y++) {
    EXPECT_EQ(raw[y * (1 + w * 3)], '\0');
    for (int i = 0; i < w * 3; i++) EXPECT_EQ(static_cast<uint8_t>(raw[y * (1 + w * 3) + 1 + i]), rgb[y * w * 3 + i]);
  }
}

// Rich values: about 40 snapshots a run, sharper as the loss falls.
TEST(DemoTest, MediaCadenceAndBadness) {
  DemoModel m(36000, 0, 1, 2.6, 0.35);
  EXPECT_EQ(m.MediaEvery(), 900);
  EXPECT_EQ(DemoModel(10, 0, 1).MediaEvery(), 1);
  EXPECT_DOUBLE_EQ(m.Badness(2.6), 1);
  EXPECT_DOUBLE_EQ(m.Badness(9), 1);
  EXPECT_DOUBLE_EQ(m.Badness(0.35), 0);
  EXPECT_NEAR(m.Badness(1.475), 0.5, 1e-12);
}

TEST(DemoTest, StepDurationsEncodeANativeHistogram) {
  StepDurations d;
  for (double v : {1.0, 1.0, 2.0, 0.0, -1.0}) d.Observe(v);  // -1: refused (no negative buckets)
  EXPECT_EQ(d.count(), 4u);
  const std::string req = d.WriteRequest(1000);
  auto has = [&](std::string_view bytes) { return req.find(bytes) != std::string::npos; };
  EXPECT_TRUE(has("train_step_duration_seconds"));
  EXPECT_TRUE(has("trainwatch-demo"));
  EXPECT_TRUE(has(std::string_view("\x08\x04", 2)));  // count_int 4
  EXPECT_TRUE(has(std::string_view("\x20\x06", 2)));  // schema 3, zigzag
  EXPECT_TRUE(has(std::string_view("\x30\x01", 2)));  // zero_count_int 1 (the 0.0)
  // 1.0 is bucket 0, 2.0 bucket 8 (2^(8/8)): spans (0, 1) and (7, 1), deltas +2, -1.
  EXPECT_TRUE(has(std::string_view("\x5a\x04\x08\x00\x10\x01", 6)));
  EXPECT_TRUE(has(std::string_view("\x5a\x04\x08\x0e\x10\x01", 6)));
  EXPECT_TRUE(has(std::string_view("\x62\x02\x04\x01", 4)));
  EXPECT_TRUE(has(std::string_view("\x78\xe8\x07", 3)));  // timestamp 1000
}

}  // namespace
}  // namespace trainwatch::app
