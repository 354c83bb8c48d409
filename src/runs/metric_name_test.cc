#include "runs/metric_name.h"

#include <gtest/gtest.h>

#include <random>

namespace trainwatch::runs {
namespace {

TEST(MetricNameTest, DocumentedExamples) {
  auto f = [](std::string_view key, std::string_view want) {
    auto got = KeyToMetricName(key);
    ASSERT_TRUE(got.ok()) << key << ": " << got.error().ToString();
    EXPECT_EQ(*got, want) << key;
    EXPECT_EQ(MetricNameToKey(*got), key) << want;
  };
  // docs/training-metrics.md
  f("loss", "loss");
  f("grad_norm", "grad_norm");
  f("train/loss", "train:loss");
  f("loss@1k", "U__loss_40_1k");
  f("a:b", "U__a:b");
  // More of each rule.
  f("_x9", "_x9");
  f("val/acc/top1", "val:acc:top1");
  f("/", ":");
  f("1loss", "U___31_loss");        // a leading digit is not valid there
  f("a.b", "U__a_2e_b");
  f("a_b/c.d", "U__a__b_2f_c_2e_d");  // rule 2 fails on '.', so '_' doubles too
  f("U__x", "U__U____x");           // would read as escaped: escaped itself
  f("U__x/y", "U__U____x_2f_y");
  f("lösung", "U__l_f6_sung");
  f("emoji😀", "U__emoji_1f600_");
  f("a b", "U__a_20_b");
}

TEST(MetricNameTest, RejectsUnrepresentableKeys) {
  EXPECT_FALSE(KeyToMetricName("").ok());
  EXPECT_FALSE(KeyToMetricName("bad\xff").ok());
  EXPECT_FALSE(KeyToMetricName("\xc3").ok());          // truncated sequence
  EXPECT_FALSE(KeyToMetricName("\xed\xa0\x80").ok());  // a surrogate
  EXPECT_FALSE(KeyToMetricName("\xc0\xaf").ok());      // overlong
  EXPECT_FALSE(KeyToMetricName("trainwatch_run_step").ok());  // reserved for the run series
  EXPECT_TRUE(KeyToMetricName("trainwatch_runs").ok());
}

TEST(MetricNameTest, MalformedEscapesDecodeUnchanged) {
  EXPECT_EQ(MetricNameToKey("U__a_zz_"), "U__a_zz_");
  EXPECT_EQ(MetricNameToKey("U__a_"), "U__a_");
  EXPECT_EQ(MetricNameToKey("U__a_1234567_"), "U__a_1234567_");
  EXPECT_EQ(MetricNameToKey("node:cpu:rate5m"), "node/cpu/rate5m");
}

// Property: every valid UTF-8 key maps to a valid metric name that decodes
// back to it, and distinct keys never share a name.
TEST(MetricNameTest, RoundTripProperty) {
  std::mt19937_64 rng(42);
  static const char32_t kAlphabet[] = {'a', 'Z', '_', '/', ':', '0', '9', '.', '-', '@', ' ', 'U', 0xe9, 0x4e2d,
                                      0x1f600, 0x7f, 0x1};
  auto utf8 = [](char32_t c, std::string* s) {
    if (c < 0x80) *s += static_cast<char>(c);
    else if (c < 0x800) { *s += static_cast<char>(0xC0 | (c >> 6)); *s += static_cast<char>(0x80 | (c & 0x3F)); }
    else if (c < 0x10000) {
      *s += static_cast<char>(0xE0 | (c >> 12));
      *s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      *s += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      *s += static_cast<char>(0xF0 | (c >> 18));
      *s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      *s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      *s += static_cast<char>(0x80 | (c & 0x3F));
    }
  };
  std::map<std::string, std::string> seen;  // name -> key
  for (int i = 0; i < 20000; i++) {
    std::string key;
    int len = 1 + static_cast<int>(rng() % 8);
    if (rng() % 4 == 0) key = "U__";
    for (int j = 0; j < len; j++) utf8(kAlphabet[rng() % std::size(kAlphabet)], &key);
    auto name = KeyToMetricName(key);
    ASSERT_TRUE(name.ok()) << key;
    for (size_t k = 0; k < name->size(); k++) {
      char c = (*name)[k];
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (k > 0 && c >= '0' && c <= '9');
      ASSERT_TRUE(ok) << key << " -> " << *name;
    }
    ASSERT_EQ(MetricNameToKey(*name), key) << *name;
    auto [it, inserted] = seen.emplace(*name, key);
    ASSERT_TRUE(inserted || it->second == key) << key << " and " << it->second << " both map to " << *name;
  }
}

TEST(MetricNameTest, StepPhasesShareOneTimeViewMetric) {
  auto tv = [](std::string_view key) { return TimeViewNameOf(*KeyToMetricName(key)); };
  EXPECT_EQ(tv("step_phase/data").name, "trainwatch_step_phase_seconds");
  EXPECT_EQ(tv("step_phase/data").phase, "data");
  EXPECT_EQ(tv("step_phase/fwd/attn").phase, "fwd/attn");
  EXPECT_EQ(tv("step_phase/data loader").name, "trainwatch_step_phase_seconds");  // escaped (U__)
  EXPECT_EQ(tv("step_phase/data loader").phase, "data loader");
  EXPECT_EQ(tv("step_phase/").name, "step_phase:");  // no phase name: an ordinary key
  EXPECT_EQ(tv("step_phase").name, "step_phase");
  EXPECT_EQ(tv("train/loss").name, "train:loss");
  EXPECT_EQ(tv("train/loss").phase, "");
  EXPECT_EQ(tv("U__x").name, "U__U____x");
}

}  // namespace
}  // namespace trainwatch::runs
