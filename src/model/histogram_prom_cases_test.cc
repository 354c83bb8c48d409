// Prometheus's own table tests for FloatHistogram (model/histogram/
// float_histogram_test.go at the commit the PromQL corpus comes from),
// transcribed case by case, run against our implementation with the same
// checks: Mul, Div, DetectReset, Compact, Add, Sub, KahanAdd (with and
// without a starting compensation), CopyToSchema, ReduceResolution, String.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "model/histogram.h"

namespace trainwatch::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct MulCase {
  const char* name;
  FloatHistogram in;
  double factor;
  FloatHistogram expected;
};
struct ResetCase {
  const char* name;
  FloatHistogram previous, current;
  bool reset;
};
struct CompactCase {
  const char* name;
  FloatHistogram in;
  int max_empty_buckets;
  FloatHistogram expected;
};
struct AddCase {
  const char* name;
  FloatHistogram in1, in2;
  std::optional<FloatHistogram> expected;
  const char* err;
  bool collision;
  bool reconciled;
};
struct KahanCase {
  const char* name;
  FloatHistogram in1;
  std::optional<FloatHistogram> comp;
  FloatHistogram in2;
  std::optional<FloatHistogram> expected;
  const char* err;
  bool collision;
  bool reconciled;
};
struct SchemaCase {
  const char* name;
  FloatHistogram in;
  int32_t target;
  FloatHistogram expected;
};
struct StringCase {
  const char* name;
  FloatHistogram in;
  const char* expected;
};

bool SameFloat(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool SameFloats(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (!SameFloat(a[i], b[i])) return false;
  }
  return true;
}

// Every field, for failure messages.
std::string Dump(const FloatHistogram& h) {
  std::string s = "{hint:" + std::to_string(static_cast<int>(h.counter_reset_hint)) +
                  " schema:" + std::to_string(h.schema) + " zt:" + std::to_string(h.zero_threshold) + " " + h.String();
  auto spans = [&](const char* k, const std::vector<Span>& v) {
    s += std::string(" ") + k + ":[";
    for (const Span& sp : v) s += "{" + std::to_string(sp.offset) + "," + std::to_string(sp.length) + "}";
    s += "]";
  };
  auto floats = [&](const char* k, const std::vector<double>& v) {
    s += std::string(" ") + k + ":[";
    for (double d : v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g ", d);
      s += buf;
    }
    s += "]";
  };
  spans("pspans", h.positive_spans);
  floats("pbuckets", h.positive_buckets);
  spans("nspans", h.negative_spans);
  floats("nbuckets", h.negative_buckets);
  floats("custom", h.custom_values);
  return s + "}";
}

// Field-by-field equality as Go's require.Equal sees it (NaN equal to NaN),
// except that Go tells nil from empty slices and we cannot.
::testing::AssertionResult Same(const FloatHistogram& want, const FloatHistogram& got) {
  if (want.counter_reset_hint == got.counter_reset_hint && want.schema == got.schema &&
      SameFloat(want.zero_threshold, got.zero_threshold) && SameFloat(want.zero_count, got.zero_count) &&
      SameFloat(want.count, got.count) && SameFloat(want.sum, got.sum) && want.positive_spans == got.positive_spans &&
      want.negative_spans == got.negative_spans && SameFloats(want.positive_buckets, got.positive_buckets) &&
      SameFloats(want.negative_buckets, got.negative_buckets) && SameFloats(want.custom_values, got.custom_values)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "want " << Dump(want) << "\n got " << Dump(got);
}

// From Prometheus TestFloatHistogramMul.
const MulCase kFloatHistogramMulCases[] = {
    {"zero value", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, 3.1415, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}},
    {"zero multiplier", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, 0.0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 0.0, 0.0, 0.0, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {0.0, 0.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 0.0}, {}}},
    {"no-op", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, 1.0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}},
    {"double", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, 2.0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 6986.6, 4698418.648, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {2.0, 6.6, 8.4, 0.2}, {6.2, 6.0, 246800.0, 2000.0}, {}}},
    {"triple", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 23.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, 3.0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 33.0, 90.0, 69.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {3.0, 0.0, 9.0, 12.0, 21.0}, {9.0, 3.0, 15.0, 18.0}, {}}},
    {"negation", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 23.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, -1.0, FloatHistogram{CounterResetHint::kGauge, 0, 0.01, -11.0, -30.0, -23.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {-1.0, 0.0, -3.0, -4.0, -7.0}, {-3.0, -1.0, -5.0, -6.0}, {}}},
    {"negative multiplier", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 23.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, -2.0, FloatHistogram{CounterResetHint::kGauge, 0, 0.01, -22.0, -60.0, -46.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {-2.0, 0.0, -6.0, -8.0, -14.0}, {-6.0, -2.0, -10.0, -12.0}, {}}},
    {"no-op with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0}}, 1.0, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0}}},
    {"triple with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 30.0, 23.0, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 3.0, 4.0, 7.0}, {}, {1.0, 2.0, 3.0, 4.0}}, 3.0, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 90.0, 69.0, {{0, 2}, {1, 3}}, {}, {3.0, 0.0, 9.0, 12.0, 21.0}, {}, {1.0, 2.0, 3.0, 4.0}}},
};

// From Prometheus TestFloatHistogramDiv.
const MulCase kFloatHistogramDivCases[] = {
    {"zero value", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, 3.1415, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}},
    {"zero divisor", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, 0.0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, kInf, kInf, kInf, {}, {}, {}, {}, {}}},
    {"no-op", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, 1.0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}},
    {"half", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 23.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, 2.0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 15.0, 11.5, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {0.5, 0.0, 1.5, 2.0, 3.5}, {1.5, 0.5, 2.5, 3.0}, {}}},
    {"negation", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, -1.0, FloatHistogram{CounterResetHint::kGauge, 0, 0.01, -5.5, -3493.3, -2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {-1.0, -3.3, -4.2, -0.1}, {-3.1, -3.0, -123400.0, -1000.0}, {}}},
    {"negative half", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 23.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, -2.0, FloatHistogram{CounterResetHint::kGauge, 0, 0.01, -5.5, -15.0, -11.5, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {-0.5, 0.0, -1.5, -2.0, -3.5}, {-1.5, -0.5, -2.5, -3.0}, {}}},
    {"no-op with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0}}, 1.0, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0}}},
    {"half with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 30.0, 23.0, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 3.0, 4.0, 7.0}, {}, {1.0, 2.0, 3.0, 4.0}}, 2.0, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 15.0, 11.5, {{0, 2}, {1, 3}}, {}, {0.5, 0.0, 1.5, 2.0, 3.5}, {}, {1.0, 2.0, 3.0, 4.0}}},
};

// From Prometheus TestFloatHistogramDetectReset.
const ResetCase kFloatHistogramDetectResetCases[] = {
    {"zero values", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, false},
    {"no buckets to some buckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"some buckets to no buckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, true},
    {"one bucket appears, nothing else changes", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"one bucket disappears, nothing else changes", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, true},
    {"an unpopulated bucket disappears, nothing else changes", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"an unpopulated bucket at the end disappears, nothing else changes", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.0}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {1, 2}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"an unpopulated bucket disappears in a histogram with nothing else", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{23, 1}}, {}, {0.0}, {}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, false},
    {"zero count goes up", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.6, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"zero count goes down", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.4, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, true},
    {"count goes up", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.4, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"count goes down", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.2, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, true},
    {"sum goes up", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349210.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"sum goes down", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349200.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"one positive bucket goes up", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.3, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"one positive bucket goes down", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.1, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, true},
    {"one negative bucket goes up", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.1, 123400.0, 1000.0}, {}}, false},
    {"one negative bucket goes down", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.3, 4.2, 0.1}, {3.1, 2.9, 123400.0, 1000.0}, {}}, true},
    {"zero threshold decreases", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.009, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, true},
    {"zero threshold increases without touching any existing buckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.011, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"zero threshold increases enough to cover existing buckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 7.73, 3493.3, 2349209.324, {{1, 3}}, {{3, 2}, {3, 2}}, {3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"zero threshold increases into the middle of an existing buckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.3, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, true},
    {"schema increases without any other changes", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 5.5, 3493.3, 2349209.324, {{-5, 4}, {2, 6}}, {{5, 4}, {6, 4}}, {0.4, 0.6, 1.0, 0.23, 2.0, 1.3, 1.2, 3.0, 0.05, 0.05}, {2.0, 1.1, 2.0, 1.0, 23400.0, 100000.0, 500.0, 500.0}, {}}, true},
    {"schema decreases without any other changes", FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 5.5, 3493.3, 2349209.324, {{-5, 4}, {2, 6}}, {{5, 4}, {6, 4}}, {0.4, 0.6, 1.0, 0.23, 2.0, 1.3, 1.2, 3.0, 0.05, 0.05}, {2.0, 1.1, 2.0, 1.0, 23400.0, 100000.0, 500.0, 500.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"schema decreases and a bucket goes up", FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 5.5, 3493.3, 2349209.324, {{-5, 4}, {2, 6}}, {{5, 4}, {6, 4}}, {0.4, 0.6, 1.0, 0.23, 2.0, 1.3, 1.2, 3.0, 0.05, 0.05}, {2.0, 1.1, 2.0, 1.0, 23400.0, 100000.0, 500.0, 500.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 4.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, false},
    {"schema decreases and a bucket goes down", FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 5.5, 3493.3, 2349209.324, {{-5, 4}, {2, 6}}, {{5, 4}, {6, 4}}, {0.4, 0.6, 1.0, 0.23, 2.0, 1.3, 1.2, 3.0, 0.05, 0.05}, {2.0, 1.1, 2.0, 1.0, 23400.0, 100000.0, 500.0, 500.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 1.23, 2.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, true},
    {"no buckets to some buckets with custom bounds", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {1.0, 2.0, 3.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0}}, false},
    {"some buckets to no buckets with custom bounds", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {1.0, 2.0, 3.0}}, true},
    {"one bucket appears, nothing else changes with custom bounds", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0, 4.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 2}, {1, 3}}, {}, {1.0, 1.23, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0, 4.0}}, false},
    {"one bucket disappears, nothing else changes with custom bounds", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 2}, {1, 3}}, {}, {1.0, 1.23, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0, 4.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0, 4.0}}, true},
    {"an unpopulated bucket disappears, nothing else changes with custom bounds", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0, 4.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0, 4.0}}, false},
    {"one positive bucket goes up with custom bounds", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0, 4.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 3.3, 4.3, 0.1}, {}, {1.0, 2.0, 3.0, 4.0}}, false},
    {"one positive bucket goes down with custom bounds", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0, 4.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 3.3, 4.1, 0.1}, {}, {1.0, 2.0, 3.0, 4.0}}, true},
    {"mismatched custom bounds - no reset when all buckets increase", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 200.0, 1000.0, {{0, 4}}, {}, {20.0, 35.0, 40.0, 50.0}, {}, {0.0, 1.0, 2.0, 3.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 200.0, 1000.0, {{0, 5}}, {}, {25.0, 15.0, 40.0, 50.0, 70.0}, {}, {0.0, 0.5, 1.0, 2.0, 3.0}}, false},
    {"mismatched custom bounds - reset in middle bucket", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 100.0, 500.0, {{1, 4}}, {}, {10.0, 15.0, 20.0, 25.0}, {}, {0.0, 1.0, 3.0, 5.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 100.0, 500.0, {{1, 5}}, {}, {10.0, 16.0, 10.0, 5.0, 25.0}, {}, {0.0, 1.0, 2.0, 3.0, 5.0}}, true},
    {"mismatched custom bounds - reset in last bucket", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 100.0, 500.0, {{1, 3}}, {}, {10.0, 20.0, 20.0}, {}, {0.0, 1.0, 2.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 100.0, 500.0, {{1, 4}}, {}, {100.0, 200.0, 8.0, 7.0}, {}, {0.0, 1.0, 2.0, 3.0}}, true},
    {"mismatched custom bounds - no common bounds", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 100.0, 500.0, {{1, 3}}, {}, {10.0, 20.0, 30.0}, {}, {4.0, 5.0, 6.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 100.0, 500.0, {{1, 3}}, {}, {15.0, 25.0, 35.0}, {}, {1.0, 2.0, 3.0}}, false},
    {"mismatched custom bounds - sparse common bounds", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 200.0, 1000.0, {{0, 4}}, {}, {10.0, 20.0, 30.0, 40.0}, {}, {0.0, 1.0, 3.0, 5.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 200.0, 1000.0, {{0, 5}}, {}, {15.0, 25.0, 70.0, 50.0, 100.0}, {}, {0.0, 2.0, 3.0, 4.0, 5.0}}, false},
    {"reset detected with mismatched custom bounds and split bucket spans", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 200.0, 1000.0, {{0, 2}, {1, 3}}, {}, {10.0, 20.0, 30.0, 40.0, 50.0}, {}, {0.0, 1.0, 2.0, 3.0, 4.0, 5.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 200.0, 1000.0, {{0, 3}, {1, 2}}, {}, {15.0, 25.0, 35.0, 25.0, 60.0}, {}, {0.0, 1.0, 3.0, 4.0, 5.0, 7.0}}, true},
    {"no reset with mismatched custom bounds and split bucket spans", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 300.0, 1500.0, {{0, 2}, {2, 3}}, {}, {10.0, 20.0, 30.0, 40.0, 50.0}, {}, {0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 300.0, 1500.0, {{0, 3}, {1, 2}}, {}, {12.0, 25.0, 45.0, 75.0, 95.0}, {}, {0.0, 0.5, 1.0, 3.0, 5.0, 7.0}}, false},
    {"reset when a populated bucket following an empty one disappears", FloatHistogram{CounterResetHint::kUnknown, 0, 0.001, 0.0, 10.0, 0.0, {{0, 1}}, {{1, 2}}, {5.0}, {0.0, 5.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.001, 0.0, 20.0, 0.0, {{0, 1}}, {}, {20.0}, {}, {}}, true},
    {"reset when current ends before a later populated previous bucket", FloatHistogram{CounterResetHint::kUnknown, 0, 0.001, 0.0, 7.0, 0.0, {{0, 3}}, {}, {2.0, 0.0, 5.0}, {}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.001, 0.0, 100.0, 0.0, {{0, 1}}, {}, {100.0}, {}, {}}, true},
};

// From Prometheus TestFloatHistogramCompact.
const CompactCase kFloatHistogramCompactCases[] = {
    {"empty histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}},
    {"nothing should happen", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}},
    {"eliminate zero offsets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 1}, {0, 3}, {0, 1}}, {{0, 2}, {0, 2}, {2, 1}, {0, 1}}, {1.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 5}}, {{0, 4}, {2, 2}}, {1.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0}, {}}},
    {"eliminate zero length", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 2}, {2, 0}, {3, 3}}, {{0, 2}, {0, 0}, {2, 0}, {1, 4}}, {1.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 2}, {5, 3}}, {{0, 2}, {3, 4}}, {1.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0}, {}}},
    {"eliminate multiple zero length spans", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 2}, {2, 0}, {2, 0}, {2, 0}, {3, 3}}, {}, {1.0, 3.3, 4.2, 0.1, 3.3}, {}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 2}, {9, 3}}, {}, {1.0, 3.3, 4.2, 0.1, 3.3}, {}, {}}},
    {"cut empty buckets at start or end", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-4, 4}, {5, 3}}, {{0, 2}, {3, 5}}, {0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0, 0.0}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 2}, {5, 3}}, {{0, 2}, {3, 4}}, {1.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0}, {}}},
    {"cut empty buckets at start and end", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-4, 4}, {5, 6}}, {{-2, 4}, {3, 5}}, {0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3, 0.0, 0.0, 0.0}, {0.0, 0.0, 3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0, 0.0}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 2}, {5, 3}}, {{0, 2}, {3, 4}}, {1.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0}, {}}},
    {"cut empty buckets in the middle", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{5, 4}}, {}, {1.0, 3.0, 0.0, 2.0}, {}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{5, 2}, {1, 1}}, {}, {1.0, 3.0, 2.0}, {}, {}}},
    {"cut empty buckets at start or end of spans, even in the middle", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-4, 6}, {3, 6}}, {{0, 2}, {2, 6}}, {0.0, 0.0, 1.0, 3.3, 0.0, 0.0, 4.2, 0.1, 3.3, 0.0, 0.0, 0.0}, {3.1, 3.0, 0.0, 123400.0, 1000.0, 3.0, 4.0, 0.0}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 2}, {5, 3}}, {{0, 2}, {3, 4}}, {1.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0}, {}}},
    {"cut empty buckets at start and end - also merge spans due to maxEmptyBuckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-4, 4}, {5, 3}}, {{0, 2}, {3, 5}}, {0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0, 0.0}, {}}, 10, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 10}}, {{0, 9}}, {1.0, 3.3, 0.0, 0.0, 0.0, 0.0, 0.0, 4.2, 0.1, 3.3}, {3.1, 3.0, 0.0, 0.0, 0.0, 123400.0, 1000.0, 3.0, 4.0}, {}}},
    {"cut empty buckets from the middle of a span", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-4, 6}, {3, 3}}, {{0, 2}, {3, 5}}, {0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 0.0, 3.0, 4.0}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 1}, {2, 1}, {3, 3}}, {{0, 2}, {3, 2}, {1, 2}}, {1.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 3.0, 4.0}, {}}},
    {"cut out a span containing only empty buckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-4, 3}, {2, 2}, {3, 4}}, {}, {0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3}, {}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 1}, {7, 4}}, {}, {1.0, 3.3, 4.2, 0.1, 3.3}, {}, {}}},
    {"cut empty buckets from the middle of a span, avoiding none due to maxEmptyBuckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 4}}, {}, {1.0, 0.0, 0.0, 3.3}, {}, {}}, 1, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 1}, {2, 1}}, {}, {1.0, 3.3}, {}, {}}},
    {"cut empty buckets and merge spans due to maxEmptyBuckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 4}, {3, 1}}, {}, {1.0, 0.0, 0.0, 3.3, 4.2}, {}, {}}, 1, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 1}, {2, 1}, {3, 1}}, {}, {1.0, 3.3, 4.2}, {}, {}}},
    {"cut empty buckets from the middle of a span, avoiding some due to maxEmptyBuckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-4, 6}, {3, 3}, {10, 2}}, {{0, 2}, {3, 5}}, {0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3, 2.0, 3.0}, {3.1, 3.0, 123400.0, 1000.0, 0.0, 3.0, 4.0}, {}}, 1, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 1}, {2, 1}, {3, 3}, {10, 2}}, {{0, 2}, {3, 5}}, {1.0, 3.3, 4.2, 0.1, 3.3, 2.0, 3.0}, {3.1, 3.0, 123400.0, 1000.0, 0.0, 3.0, 4.0}, {}}},
    {"avoiding all cutting of empty buckets from the middle of a chunk due to maxEmptyBuckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-4, 6}, {3, 3}}, {{0, 2}, {3, 5}}, {0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 0.0, 3.0, 4.0}, {}}, 2, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 4}, {3, 3}}, {{0, 2}, {3, 5}}, {1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 0.0, 3.0, 4.0}, {}}},
    {"everything merged into one span due to maxEmptyBuckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-4, 6}, {3, 3}}, {{0, 2}, {3, 5}}, {0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3}, {3.1, 3.0, 123400.0, 1000.0, 0.0, 3.0, 4.0}, {}}, 3, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 10}}, {{0, 10}}, {1.0, 0.0, 0.0, 3.3, 0.0, 0.0, 0.0, 4.2, 0.1, 3.3}, {3.1, 3.0, 0.0, 0.0, 0.0, 123400.0, 1000.0, 0.0, 3.0, 4.0}, {}}},
    {"more than one span merged in the same pass", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 2}, {2, 2}, {2, 2}}, {{0, 1}, {1, 1}, {1, 1}}, {1.0, 3.3, 4.2, 0.1, 3.3, 2.0}, {3.1, 1000.0, 4.0}, {}}, 3, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 10}}, {{0, 5}}, {1.0, 3.3, 0.0, 0.0, 4.2, 0.1, 0.0, 0.0, 3.3, 2.0}, {3.1, 0.0, 1000.0, 0.0, 4.0}, {}}},
    {"only empty buckets and maxEmptyBuckets greater zero", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-4, 6}, {3, 3}}, {{0, 7}}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {}}, 3, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}},
    {"multiple spans of only empty buckets", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-10, 2}, {2, 1}, {3, 3}}, {{-10, 2}, {2, 1}, {3, 3}}, {0.0, 0.0, 0.0, 0.0, 2.0, 3.0}, {2.0, 3.0, 0.0, 0.0, 0.0, 0.0}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-1, 2}}, {{-10, 2}}, {2.0, 3.0}, {2.0, 3.0}, {}}},
    {"nothing should happen with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 0.0, 0.0, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0}}, 0, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 0.0, 0.0, {{0, 1}, {2, 3}}, {}, {1.0, 3.3, 4.2, 0.1}, {}, {1.0, 2.0, 3.0}}},
    {"eliminate zero offsets with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 0.0, 0.0, {{0, 1}, {0, 3}, {0, 1}}, {}, {1.0, 3.3, 4.2, 0.1, 3.3}, {}, {1.0, 2.0, 3.0, 4.0}}, 0, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 0.0, 0.0, {{0, 5}}, {}, {1.0, 3.3, 4.2, 0.1, 3.3}, {}, {1.0, 2.0, 3.0, 4.0}}},
    {"eliminate multiple zero length spans with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 0.0, 0.0, {{0, 2}, {2, 0}, {2, 0}, {2, 0}, {3, 3}}, {}, {1.0, 3.3, 4.2, 0.1, 3.3}, {}, {1.0, 2.0, 3.0, 4.0}}, 0, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 0.0, 0.0, {{0, 2}, {9, 3}}, {}, {1.0, 3.3, 4.2, 0.1, 3.3}, {}, {1.0, 2.0, 3.0, 4.0}}},
    {"cut empty buckets at start and end with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 0.0, 0.0, {{0, 4}, {5, 6}}, {}, {0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3, 0.0, 0.0, 0.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}}, 0, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 0.0, 0.0, {{2, 2}, {5, 3}}, {}, {1.0, 3.3, 4.2, 0.1, 3.3}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}}},
};

// From Prometheus TestFloatHistogramAdd.
const AddCase kFloatHistogramAddCases[] = {
    {"same bucket layout", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 21.0, 1.234, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {0.0, 0.0, 2.0, 3.0, 6.0}, {1.0, 1.0, 4.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 19.0, 51.0, 3.579, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 5.0, 7.0, 13.0}, {4.0, 2.0, 9.0, 10.0}, {}}), "", false, false},
    {"same bucket layout, defined differently", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {1, 1}, {0, 2}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 21.0, 1.234, {{-2, 2}, {1, 2}, {0, 1}}, {{3, 7}}, {0.0, 0.0, 2.0, 3.0, 6.0}, {1.0, 1.0, 0.0, 0.0, 0.0, 4.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 19.0, 51.0, 3.579, {{-2, 2}, {1, 1}, {0, 2}}, {{3, 5}, {0, 2}}, {1.0, 0.0, 5.0, 7.0, 13.0}, {4.0, 2.0, 0.0, 0.0, 0.0, 9.0, 10.0}, {}}), "", false, false},
    {"non-overlapping spans", FloatHistogram{CounterResetHint::kUnknown, 0, 0.001, 11.0, 30.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.001, 8.0, 21.0, 1.234, {{0, 2}, {3, 3}}, {{-9, 2}, {3, 2}}, {5.0, 4.0, 2.0, 3.0, 6.0}, {1.0, 1.0, 4.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.001, 19.0, 51.0, 3.579, {{-2, 4}, {0, 6}}, {{-9, 2}, {3, 2}, {5, 2}, {3, 2}}, {1.0, 0.0, 5.0, 4.0, 3.0, 4.0, 7.0, 2.0, 3.0, 6.0}, {1.0, 1.0, 4.0, 4.0, 3.0, 1.0, 5.0, 6.0}, {}}), "", false, false},
    {"non-overlapping spans inverted order", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 21.0, 1.234, {{0, 2}, {3, 3}}, {{-6, 2}, {1, 2}}, {5.0, 4.0, 2.0, 3.0, 6.0}, {1.0, 1.0, 4.0, 4.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 19.0, 51.0, 3.579, {{-2, 2}, {0, 5}, {0, 3}}, {{-6, 2}, {1, 2}, {4, 2}, {3, 2}}, {1.0, 0.0, 5.0, 4.0, 3.0, 4.0, 7.0, 2.0, 3.0, 6.0}, {1.0, 1.0, 4.0, 4.0, 3.0, 1.0, 5.0, 6.0}, {}}), "", false, false},
    {"overlapping spans", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 21.0, 1.234, {{-1, 4}, {0, 3}}, {{4, 2}, {1, 2}}, {5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 19.0, 51.0, 3.579, {{-2, 4}, {0, 4}}, {{3, 3}, {1, 3}}, {1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0}, {3.0, 2.0, 1.0, 4.0, 9.0, 6.0}, {}}), "", false, false},
    {"overlapping spans inverted order", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 21.0, 1.234, {{-1, 4}, {0, 3}}, {{4, 2}, {1, 2}}, {5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 19.0, 51.0, 3.579, {{-2, 5}, {0, 3}}, {{3, 3}, {1, 3}}, {1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0}, {3.0, 2.0, 1.0, 4.0, 9.0, 6.0}, {}}), "", false, false},
    {"schema change", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 21.0, 1.234, {{-1, 4}, {0, 3}}, {{4, 2}, {1, 2}}, {5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 11.0, 30.0, 2.345, {{-4, 3}, {5, 5}}, {{6, 3}, {6, 4}}, {1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0}, {3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 19.0, 51.0, 3.579, {{-2, 5}, {0, 3}}, {{3, 3}, {1, 3}}, {1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0}, {3.0, 2.0, 1.0, 4.0, 9.0, 6.0}, {}}), "", false, false},
    {"larger zero bucket in first histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 17.0, 21.0, 1.234, {{1, 2}, {0, 3}}, {{4, 2}, {1, 2}}, {2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 29.0, 51.0, 3.579, {{1, 2}, {0, 3}}, {{3, 3}, {1, 3}}, {2.0, 6.0, 10.0, 9.0, 5.0}, {3.0, 2.0, 1.0, 4.0, 9.0, 6.0}, {}}), "", false, false},
    {"larger zero bucket in second histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 17.0, 21.0, 1.234, {{1, 2}, {0, 3}}, {{4, 2}, {1, 2}}, {2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 29.0, 51.0, 3.579, {{1, 5}}, {{3, 3}, {1, 3}}, {2.0, 6.0, 10.0, 9.0, 5.0}, {3.0, 2.0, 1.0, 4.0, 9.0, 6.0}, {}}), "", false, false},
    {"larger zero threshold in first histogram ends up inside a populated bucket of second histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 0.2, 17.0, 21.0, 1.234, {{1, 2}, {0, 3}}, {{4, 2}, {1, 2}}, {2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.25, 29.0, 51.0, 3.579, {{-1, 1}, {1, 5}}, {{3, 3}, {1, 3}}, {0.0, 2.0, 6.0, 10.0, 9.0, 5.0}, {3.0, 2.0, 1.0, 4.0, 9.0, 6.0}, {}}), "", false, false},
    {"larger zero threshold in second histogram ends up inside a populated bucket of first histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.2, 17.0, 21.0, 1.234, {{1, 2}, {0, 3}}, {{4, 2}, {1, 2}}, {2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.25, 29.0, 51.0, 3.579, {{1, 5}}, {{3, 3}, {1, 3}}, {2.0, 6.0, 10.0, 9.0, 5.0}, {3.0, 2.0, 1.0, 4.0, 9.0, 6.0}, {}}), "", false, false},
    {"schema change combined with larger zero bucket in second histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 21.0, 1.234, {{-2, 5}, {0, 3}}, {{4, 2}, {1, 2}}, {2.0, 5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 1, 0.25, 12.0, 30.0, 2.345, {{-3, 2}, {5, 5}}, {{6, 3}, {6, 4}}, {1.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0}, {3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.25, 22.0, 51.0, 3.579, {{-1, 7}}, {{3, 3}, {1, 3}}, {6.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0}, {3.0, 2.0, 1.0, 4.0, 9.0, 6.0}, {}}), "", false, false},
    {"schema change combined with larger zero bucket in first histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 0.25, 8.0, 21.0, 1.234, {{-1, 4}, {0, 3}}, {{4, 2}, {1, 2}}, {5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 11.0, 30.0, 2.345, {{-4, 3}, {5, 5}}, {{6, 3}, {6, 4}}, {1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0}, {3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.25, 20.0, 51.0, 3.579, {{-1, 4}, {0, 3}}, {{3, 3}, {1, 3}}, {5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0}, {3.0, 2.0, 1.0, 4.0, 9.0, 6.0}, {}}), "", false, false},
    {"same custom bucket layout", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 15.0, 2.345, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 3.0, 4.0, 7.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 11.0, 1.234, {{0, 2}, {1, 3}}, {}, {0.0, 0.0, 2.0, 3.0, 6.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 26.0, 3.579, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 5.0, 7.0, 13.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}), "", false, false},
    {"same custom bucket layout, defined differently", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 15.0, 2.345, {{0, 2}, {1, 1}, {0, 2}}, {}, {1.0, 0.0, 3.0, 4.0, 7.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 11.0, 1.234, {{0, 2}, {1, 2}, {0, 1}}, {}, {0.0, 0.0, 2.0, 3.0, 6.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 26.0, 3.579, {{0, 2}, {1, 1}, {0, 2}}, {}, {1.0, 0.0, 5.0, 7.0, 13.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}), "", false, false},
    {"non-overlapping spans with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 15.0, 2.345, {{0, 2}, {2, 3}}, {}, {1.0, 0.0, 3.0, 4.0, 7.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 20.0, 1.234, {{2, 2}, {3, 3}}, {}, {5.0, 4.0, 2.0, 3.0, 6.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 35.0, 3.579, {{0, 4}, {0, 6}}, {}, {1.0, 0.0, 5.0, 4.0, 3.0, 4.0, 7.0, 2.0, 3.0, 6.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}}), "", false, false},
    {"non-overlapping spans inverted order with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 20.0, 1.234, {{2, 2}, {3, 3}}, {}, {5.0, 4.0, 2.0, 3.0, 6.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 15.0, 2.345, {{0, 2}, {2, 3}}, {}, {1.0, 0.0, 3.0, 4.0, 7.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 35.0, 3.579, {{0, 4}, {0, 6}}, {}, {1.0, 0.0, 5.0, 4.0, 3.0, 4.0, 7.0, 2.0, 3.0, 6.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}}), "", false, false},
    {"overlapping spans with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 15.0, 2.345, {{0, 2}, {2, 3}}, {}, {1.0, 0.0, 3.0, 4.0, 7.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 27.0, 1.234, {{1, 4}, {0, 3}}, {}, {5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 42.0, 3.579, {{0, 4}, {0, 4}}, {}, {1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}}), "", false, false},
    {"overlapping spans inverted order with custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 27.0, 1.234, {{1, 4}, {0, 3}}, {}, {5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 15.0, 2.345, {{0, 2}, {2, 3}}, {}, {1.0, 0.0, 3.0, 4.0, 7.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 42.0, 3.579, {{0, 4}, {0, 4}}, {}, {1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}}), "", false, false},
    {"custom buckets with partial intersection", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 10.0, 100.0, {{0, 3}}, {}, {2.0, 3.0, 5.0}, {}, {1.0, 2.5}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 8.0, 80.0, {{0, 4}}, {}, {1.0, 2.0, 3.0, 2.0}, {}, {1.0, 2.0, 3.0}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 18.0, 180.0, {{0, 2}}, {}, {3.0, 15.0}, {}, {1.0}}), "", false, true},
    {"different custom bucket layout - intersection and rollup", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 6.0, 2.345, {{0, 1}, {1, 1}}, {}, {1.0, 5.0}, {}, {2.0, 4.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 220.0, 1.234, {{0, 2}, {1, 1}, {0, 2}}, {}, {10.0, 20.0, 40.0, 50.0, 100.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 226.0, 3.579, {{0, 3}}, {}, {31.0, 40.0, 155.0}, {}, {2.0, 4.0}}), "", false, true},
    {"custom buckets with no common boundaries except +Inf", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3.0, 50.0, {{0, 2}}, {}, {1.0, 2.0}, {}, {1.5}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 30.0, 40.0, {{0, 2}}, {}, {10.0, 20.0}, {}, {2.5}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 33.0, 90.0, {{0, 1}}, {}, {33.0}, {}, {}}), "", false, true},
    {"mix exponential and custom buckets histograms", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 59.0, 1.234, {{-2, 5}, {0, 3}}, {{3, 3}, {1, 3}}, {2.0, 5.0, 4.0, 2.0, 3.0, 6.0, 7.0, 5.0}, {4.0, 10.0, 1.0, 4.0, 14.0, 7.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 11.0, 12.0, {{0, 2}, {1, 3}}, {}, {0.0, 0.0, 2.0, 3.0, 6.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}, std::nullopt, "cannot apply this operation on histograms with a mix of exponential and custom bucket schemas", false, false},
    {"warn on counter reset hint collision", FloatHistogram{CounterResetHint::kCounterReset, -53, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, FloatHistogram{CounterResetHint::kNotCounterReset, -53, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, std::nullopt, "", true, false},
};

// From Prometheus TestFloatHistogramSub.
const AddCase kFloatHistogramSubCases[] = {
    {"same bucket layout", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 23.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 21.0, 12.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {0.0, 0.0, 2.0, 3.0, 6.0}, {1.0, 1.0, 4.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 3.0, 9.0, 11.0, {{-2, 2}, {1, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 1.0, 1.0, 1.0}, {2.0, 0.0, 1.0, 2.0}, {}}), "", false, false},
    {"schema change", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 59.0, 1.234, {{-2, 5}, {0, 3}}, {{3, 3}, {1, 3}}, {2.0, 5.0, 4.0, 2.0, 3.0, 6.0, 7.0, 5.0}, {4.0, 10.0, 1.0, 4.0, 14.0, 7.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 2.0, 19.0, 0.345, {{-4, 3}, {5, 5}}, {{6, 3}, {6, 4}}, {1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 3.0, 4.0}, {3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 6.0, 40.0, 0.889, {{-2, 5}, {0, 3}}, {{3, 3}, {1, 3}}, {1.0, 5.0, 4.0, 2.0, 2.0, 2.0, 0.0, 5.0}, {1.0, 9.0, 1.0, 4.0, 9.0, 1.0}, {}}), "", false, false},
    {"same custom bucket layout", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 15.0, 23.0, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 3.0, 4.0, 7.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 11.0, 12.0, {{0, 2}, {1, 3}}, {}, {0.0, 0.0, 2.0, 3.0, 6.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 4.0, 11.0, {{0, 2}, {1, 3}}, {}, {1.0, 0.0, 1.0, 1.0, 1.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}), "", false, false},
    {"different custom bucket layout - with intersection and rollup", FloatHistogram{CounterResetHint::kGauge, -53, 0.0, 0.0, 220.0, 9.9, {{0, 2}, {1, 1}, {0, 2}}, {}, {10.0, 20.0, 40.0, 50.0, 100.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0}}, FloatHistogram{CounterResetHint::kGauge, -53, 0.0, 0.0, 6.0, 4.4, {{0, 1}, {1, 1}}, {}, {1.0, 5.0}, {}, {2.0, 4.0}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kGauge, -53, 0.0, 0.0, 214.0, 5.5, {{0, 3}}, {}, {29.0, 40.0, 145.0}, {}, {2.0, 4.0}}), "", false, true},
    {"mix exponential and custom buckets histograms", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 8.0, 59.0, 1.234, {{-2, 5}, {0, 3}}, {{3, 3}, {1, 3}}, {2.0, 5.0, 4.0, 2.0, 3.0, 6.0, 7.0, 5.0}, {4.0, 10.0, 1.0, 4.0, 14.0, 7.0}, {}}, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 11.0, 12.0, {{0, 2}, {1, 3}}, {}, {0.0, 0.0, 2.0, 3.0, 6.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}}, std::nullopt, "cannot apply this operation on histograms with a mix of exponential and custom bucket schemas", false, false},
    {"warn on counter reset hint collision", FloatHistogram{CounterResetHint::kCounterReset, -53, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, FloatHistogram{CounterResetHint::kNotCounterReset, -53, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, std::nullopt, "", true, false},
};

// From Prometheus TestKahanAddWithCompHistogram.
const KahanCase kKahanAddWithCompHistogramCases[] = {
    {"larger zero bucket in first histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 17.0, 21.0, 1.234, {{1, 2}, {0, 3}}, {{4, 2}, {1, 2}}, {2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 0.0, 0.0, 0.0, {{1, 2}, {0, 3}}, {{4, 2}, {1, 2}}, {0.02, 0.03, 0.06, 0.02, 0.05}, {0.01, 0.01, 0.04, 0.04}, {}}), FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 29.0, 51.0, 3.579, {{1, 2}, {0, 3}}, {{3, 3}, {1, 3}}, {2.02, 6.03, 10.06, 9.02, 5.05}, {3.0, 2.01, 1.01, 4.04, 9.04, 6.0}, {}}), "", false, false},
    {"smaller zero bucket in first histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 40.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 2.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 0.0, 0.0, 0.0, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {0.02, 0.03, 0.06, 0.07, 0.05}, {0.01, 0.01, 0.04, 0.04}, {}}), FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 17.0, 11.0, 1.234, {{1, 2}, {0, 3}}, {{4, 2}, {1, 2}}, {2.0, 3.0, 6.0, 2.0, 5.0}, {1.0, 1.0, 4.0, 4.0}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 31.05, 51.0, 3.579, {{1, 5}}, {{3, 3}, {1, 3}}, {2.0, 6.06, 10.07, 9.05, 5.0}, {3.01, 2.01, 1.0, 4.0, 9.04, 6.04}, {}}), "", false, false},
    {"first histogram contains zero buckets and Compact is called", FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {1, 1}, {1, 3}}, {}, {1.0, 3.0, 3.0, 0.0, 7.0, -6.0}, {}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 0.0, 0.0, 0.0, {{-2, 2}, {1, 1}, {1, 3}}, {}, {7.0, 2.0, 0.03, 0.0, 0.05, 0.06}, {}, {}}), FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 17.0, 21.0, 1.234, {{1, 2}, {1, 2}}, {}, {2.0, 3.0, 2.0, 5.0}, {}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 41.0, 51.0, 3.579, {{1, 2}, {1, 2}}, {}, {5.03, 3.0, 9.05, -0.94}, {}, {}}), "", false, false},
    {"reduce resolution", FloatHistogram{CounterResetHint::kUnknown, 2, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {1, 1}, {1, 3}}, {}, {1.0, 3.0, 1e+100, 0.0, 7.0, -6.0}, {}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 2, 0.01, 1.0, 0.0, 0.0, {{-2, 2}, {1, 1}, {1, 3}}, {}, {7.0, 2.0, 0.03, 0.0, 0.05, 0.06}, {}, {}}), FloatHistogram{CounterResetHint::kUnknown, 1, 1.0, 17.0, 21.0, 1.234, {{1, 2}, {1, 2}}, {}, {-1e+100, 3.0, 2.0, 5.0}, {}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 1, 1.0, 42.0, 51.0, 3.579, {{1, 5}}, {}, {0.03, 10.05, -5.94, 2.0, 5.0}, {}, {}}), "", false, false},
    {"reduce resolution of 'other' histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 17.0, 21.0, 1.234, {{1, 2}, {1, 2}}, {}, {2.0, 3.0, 2.0, 5.0}, {}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 1.0, 0.0, 0.0, {{1, 2}, {1, 2}}, {}, {17.0, 2.0, 0.03, 0.0}, {}, {}}), FloatHistogram{CounterResetHint::kUnknown, 2, 0.01, 11.0, 30.0, 2.345, {{-2, 3}, {1, 1}, {1, 3}}, {}, {1e+100, 4.1, -1e+100, 2.1, 0.0, 7.0, -6.0}, {}, {}}, std::optional<FloatHistogram>(FloatHistogram{CounterResetHint::kUnknown, 0, 1.0, 33.1, 51.0, 3.579, {{1, 2}, {1, 2}}, {}, {21.1, 6.0, 2.03, 5.0}, {}, {}}), "", false, false},
    {"warn on counter reset hint collision", FloatHistogram{CounterResetHint::kCounterReset, -53, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, std::nullopt, FloatHistogram{CounterResetHint::kNotCounterReset, -53, 0.0, 0.0, 0.0, 0.0, {}, {}, {}, {}, {}}, std::nullopt, "", true, false},
};

// From Prometheus TestFloatHistogramCopyToSchema.
const SchemaCase kFloatHistogramCopyToSchemaCases[] = {
    {"no schema change", FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 11.0, 30.0, 2.345, {{-4, 3}, {5, 5}}, {{6, 3}, {6, 4}}, {1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0}, {3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0}, {}}, 1, FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 11.0, 30.0, 2.345, {{-4, 3}, {5, 5}}, {{6, 3}, {6, 4}}, {1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0}, {3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0}, {}}},
    {"schema change", FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 11.0, 30.0, 2.345, {{-4, 3}, {5, 5}}, {{6, 3}, {6, 4}}, {1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0}, {3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0}, {}}, 0, FloatHistogram{CounterResetHint::kUnknown, 0, 0.01, 11.0, 30.0, 2.345, {{-2, 2}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 0.0, 3.0, 4.0, 7.0}, {3.0, 1.0, 5.0, 6.0}, {}}},
    {"no schema change for custom buckets", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 30.0, 2.345, {{0, 3}, {5, 5}}, {}, {1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}}, -53, FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 30.0, 2.345, {{0, 3}, {5, 5}}, {}, {1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0}, {}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}}},
};

// From Prometheus TestFloatHistogramReduceResolution.
const SchemaCase kFloatHistogramReduceResolutionCases[] = {
    {"valid float histogram", FloatHistogram{CounterResetHint::kUnknown, 0, 0.0, 0.0, 0.0, 0.0, {{-2, 4}, {0, 0}, {3, 2}}, {{0, 4}, {0, 0}, {3, 2}}, {1.0, 3.0, 1.0, 2.0, 1.0, 1.0}, {1.0, 3.0, 1.0, 2.0, 1.0, 1.0}, {}}, -1, FloatHistogram{CounterResetHint::kUnknown, -1, 0.0, 0.0, 0.0, 0.0, {{-1, 3}, {1, 1}}, {{0, 3}, {1, 1}}, {1.0, 4.0, 2.0, 2.0}, {1.0, 4.0, 2.0, 2.0}, {}}},
};

// From Prometheus TestFloatHistogramString.
const StringCase kFloatHistogramStringCases[] = {
    {"exponential histogram", FloatHistogram{CounterResetHint::kUnknown, 1, 0.01, 5.5, 3493.3, 2349209.324, {{-2, 1}, {2, 3}}, {{3, 2}, {3, 2}}, {1.0, 3.3, 4.2, 0.1}, {3.1, 3.0, 123400.0, 1000.0}, {}}, "{count:3493.3, sum:2.349209324e+06, [-22.62741699796952,-16):1000, [-16,-11.31370849898476):123400, [-4,-2.82842712474619):3, [-2.82842712474619,-2):3.1, [-0.01,0.01]:5.5, (0.35355339059327373,0.5]:1, (1,1.414213562373095]:3.3, (1.414213562373095,2]:4.2, (2,2.82842712474619]:0.1}"},
    {"custom buckets histogram", FloatHistogram{CounterResetHint::kUnknown, -53, 0.0, 0.0, 3493.3, 2349209.324, {{0, 1}, {2, 4}}, {}, {1.0, 3.3, 4.2, 0.1, 5.0}, {}, {1.0, 2.0, 5.0, 10.0, 15.0, 20.0}}, "{count:3493.3, sum:2.349209324e+06, [-Inf,1]:1, (5,10]:3.3, (10,15]:4.2, (15,20]:0.1, (20,+Inf]:5}"},
};

void CheckAdd(const FloatHistogram& a, const FloatHistogram& b, const AddCase& c) {
  ASSERT_TRUE(a.Validate().ok()) << a.Validate().ToString();
  ASSERT_TRUE(b.Validate().ok()) << b.Validate().ToString();
  FloatHistogram got = a;
  auto r = got.Add(b);
  if (*c.err != 0) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message(), c.err);
    return;
  }
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->counter_reset_collision, c.collision);
  EXPECT_EQ(r->nhcb_bounds_reconciled, c.reconciled);
  if (!c.expected) return;
  FloatHistogram want = *c.expected;
  EXPECT_TRUE(Same(want.Compact(0), got.Compact(0)));
}

// KahanAdd, then the caller's final Add of the compensation, as PromQL's
// sum does it.
void CheckKahanAdd(const FloatHistogram& a, const std::optional<FloatHistogram>& comp, const FloatHistogram& b,
                   const std::optional<FloatHistogram>& expected, const char* err, bool collision, bool reconciled) {
  FloatHistogram got = a;
  FloatHistogram c = comp ? *comp : FloatHistogram{};
  auto r = got.KahanAdd(b, &c);
  if (*err != 0) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message(), err);
    return;
  }
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(c.schema, got.schema);
  EXPECT_EQ(c.zero_threshold, got.zero_threshold);
  EXPECT_EQ(c.positive_spans, got.positive_spans);
  EXPECT_EQ(c.negative_spans, got.negative_spans);
  EXPECT_EQ(c.custom_values.size(), got.custom_values.size());
  EXPECT_EQ(c.positive_buckets.size(), got.positive_buckets.size());
  EXPECT_EQ(c.negative_buckets.size(), got.negative_buckets.size());
  EXPECT_EQ(r->counter_reset_collision, collision);
  EXPECT_EQ(r->nhcb_bounds_reconciled, reconciled);
  ASSERT_TRUE(got.Add(c).ok());
  if (!expected) return;
  FloatHistogram want = *expected;
  EXPECT_TRUE(Same(want.Compact(0), got.Compact(0)));
}

void CheckSub(const FloatHistogram& a, const FloatHistogram& b, const std::optional<FloatHistogram>& expected,
              const AddCase& c) {
  ASSERT_TRUE(a.Validate().ok());
  ASSERT_TRUE(b.Validate().ok());
  FloatHistogram got = a;
  auto r = got.Sub(b);
  if (*c.err != 0) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message(), c.err);
    return;
  }
  ASSERT_TRUE(r.ok());
  if (!expected) return;
  FloatHistogram want = *expected;
  EXPECT_TRUE(Same(want.Compact(0), got.Compact(0)));
  EXPECT_EQ(r->counter_reset_collision, c.collision);
  EXPECT_EQ(r->nhcb_bounds_reconciled, c.reconciled);
}

TEST(PrometheusFloatHistogramCasesTest, Mul) {
  for (const MulCase& c : kFloatHistogramMulCases) {
    SCOPED_TRACE(c.name);
    FloatHistogram h = c.in;
    EXPECT_TRUE(Same(c.expected, h.Mul(c.factor)));
  }
}

TEST(PrometheusFloatHistogramCasesTest, Div) {
  for (const MulCase& c : kFloatHistogramDivCases) {
    SCOPED_TRACE(c.name);
    FloatHistogram h = c.in;
    EXPECT_TRUE(Same(c.expected, h.Div(c.factor)));
  }
}

TEST(PrometheusFloatHistogramCasesTest, DetectReset) {
  for (const ResetCase& c : kFloatHistogramDetectResetCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.current.DetectReset(c.previous), c.reset);
  }
}

TEST(PrometheusFloatHistogramCasesTest, Compact) {
  for (const CompactCase& c : kFloatHistogramCompactCases) {
    SCOPED_TRACE(c.name);
    FloatHistogram h = c.in;
    bool was_valid = h.Validate().ok();
    EXPECT_TRUE(Same(c.expected, h.Compact(c.max_empty_buckets)));
    if (was_valid) {
      EXPECT_TRUE(h.Validate().ok()) << h.Validate().ToString();
    }
  }
}

TEST(PrometheusFloatHistogramCasesTest, Add) {
  for (const AddCase& c : kFloatHistogramAddCases) {
    SCOPED_TRACE(c.name);
    CheckAdd(c.in1, c.in2, c);
    CheckAdd(c.in2, c.in1, c);
    CheckKahanAdd(c.in1, std::nullopt, c.in2, c.expected, c.err, c.collision, c.reconciled);
    CheckKahanAdd(c.in2, std::nullopt, c.in1, c.expected, c.err, c.collision, c.reconciled);
  }
}

TEST(PrometheusFloatHistogramCasesTest, Sub) {
  for (const AddCase& c : kFloatHistogramSubCases) {
    SCOPED_TRACE(c.name);
    CheckSub(c.in1, c.in2, c.expected, c);
    std::optional<FloatHistogram> negated;
    if (c.expected) {
      negated = *c.expected;
      negated->Mul(-1);
      negated->counter_reset_hint = c.expected->counter_reset_hint;
    }
    CheckSub(c.in2, c.in1, negated, c);
  }
}

TEST(PrometheusFloatHistogramCasesTest, KahanAddWithCompensation) {
  for (const KahanCase& c : kKahanAddWithCompHistogramCases) {
    SCOPED_TRACE(c.name);
    CheckKahanAdd(c.in1, c.comp, c.in2, c.expected, c.err, c.collision, c.reconciled);
  }
}

TEST(PrometheusFloatHistogramCasesTest, CopyToSchema) {
  for (const SchemaCase& c : kFloatHistogramCopyToSchemaCases) {
    SCOPED_TRACE(c.name);
    FloatHistogram before = c.in;
    EXPECT_TRUE(Same(c.expected, c.in.CopyToSchema(c.target)));
    EXPECT_TRUE(Same(before, c.in));
  }
}

TEST(PrometheusFloatHistogramCasesTest, ReduceResolution) {
  for (const SchemaCase& c : kFloatHistogramReduceResolutionCases) {
    SCOPED_TRACE(c.name);
    FloatHistogram h = c.in;
    h.ReduceResolution(c.target);
    EXPECT_TRUE(Same(c.expected, h));
  }
}

TEST(PrometheusFloatHistogramCasesTest, String) {
  for (const StringCase& c : kFloatHistogramStringCases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(c.in.Validate().ok());
    EXPECT_EQ(c.in.String(), c.expected);
  }
}

}  // namespace
}  // namespace trainwatch::model
