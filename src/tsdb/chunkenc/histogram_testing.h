#pragma once
// Test helpers (header-only, GoogleTest): float histograms to store and a
// field-by-field, bit-exact comparison. Uses no out-of-line member of
// model::FloatHistogram.

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>

#include "model/histogram.h"
#include "model/sample.h"

namespace trainwatch::testing_hist {

inline uint64_t Bits(double v) { return std::bit_cast<uint64_t>(v); }

// Every field of `got` equals `want`'s, floats compared as bits.
inline void ExpectSameHistogram(const model::FloatHistogram& want, const model::FloatHistogram& got,
                                const std::string& where = "") {
  SCOPED_TRACE(where);
  EXPECT_EQ(static_cast<int>(want.counter_reset_hint), static_cast<int>(got.counter_reset_hint));
  EXPECT_EQ(want.schema, got.schema);
  EXPECT_EQ(Bits(want.zero_threshold), Bits(got.zero_threshold));
  EXPECT_EQ(Bits(want.zero_count), Bits(got.zero_count)) << want.zero_count << " vs " << got.zero_count;
  EXPECT_EQ(Bits(want.count), Bits(got.count)) << want.count << " vs " << got.count;
  EXPECT_EQ(Bits(want.sum), Bits(got.sum)) << want.sum << " vs " << got.sum;
  EXPECT_EQ(want.positive_spans, got.positive_spans);
  EXPECT_EQ(want.negative_spans, got.negative_spans);
  ASSERT_EQ(want.positive_buckets.size(), got.positive_buckets.size());
  for (size_t i = 0; i < want.positive_buckets.size(); i++) {
    EXPECT_EQ(Bits(want.positive_buckets[i]), Bits(got.positive_buckets[i])) << "positive bucket " << i;
  }
  ASSERT_EQ(want.negative_buckets.size(), got.negative_buckets.size());
  for (size_t i = 0; i < want.negative_buckets.size(); i++) {
    EXPECT_EQ(Bits(want.negative_buckets[i]), Bits(got.negative_buckets[i])) << "negative bucket " << i;
  }
  ASSERT_EQ(want.custom_values.size(), got.custom_values.size());
  for (size_t i = 0; i < want.custom_values.size(); i++) {
    EXPECT_EQ(Bits(want.custom_values[i]), Bits(got.custom_values[i])) << "custom bound " << i;
  }
}

// An exponential histogram (schema 1) whose counts grow with i.
inline model::FloatHistogram ExpHistogram(int i, model::CounterResetHint hint = model::CounterResetHint::kUnknown) {
  model::FloatHistogram h;
  h.counter_reset_hint = hint;
  h.schema = 1;
  h.zero_threshold = 0.001;
  h.zero_count = 1 + i;
  h.positive_spans = {{0, 2}, {1, 2}};
  h.positive_buckets = {1.0 + i, 2.0 + 2 * i, 3.5 + i, 0.25 * i};
  h.negative_spans = {{-1, 1}};
  h.negative_buckets = {4.0 + i};
  h.count = h.zero_count + h.positive_buckets[0] + h.positive_buckets[1] + h.positive_buckets[2] +
            h.positive_buckets[3] + h.negative_buckets[0];
  h.sum = 12.375 * (i + 1) - 3;
  return h;
}

// A custom-buckets (NHCB) histogram over bounds {0.1, 0.5, 1, 5}.
inline model::FloatHistogram CustomHistogram(int i, model::CounterResetHint hint = model::CounterResetHint::kUnknown) {
  model::FloatHistogram h;
  h.counter_reset_hint = hint;
  h.schema = model::kCustomBucketsSchema;
  h.custom_values = {0.1, 0.5, 1, 5};
  h.positive_spans = {{0, 3}, {1, 1}};
  h.positive_buckets = {2.0 + i, 1.0 * i, 7.0, 0.5 + i};
  h.count = h.positive_buckets[0] + h.positive_buckets[1] + h.positive_buckets[2] + h.positive_buckets[3];
  h.sum = 0.3 * i + 1.7;
  return h;
}

// A staleness marker: an empty histogram whose sum is StaleNaN.
inline model::FloatHistogram StaleHistogram() {
  model::FloatHistogram h;
  h.sum = model::StaleNaN();
  return h;
}

}  // namespace trainwatch::testing_hist
