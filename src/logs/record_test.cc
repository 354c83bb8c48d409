#include "logs/record.h"

#include <gtest/gtest.h>

namespace trainwatch::logs {
namespace {

TEST(RecordTest, Rfc3339RoundTrips) {
  auto t = ParseRfc3339("2024-03-01T12:34:56.123456789Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, 1709296496123456789LL);
  std::string s;
  AppendRfc3339Nano(&s, *t);
  EXPECT_EQ(s, "2024-03-01T12:34:56.123456789Z");
  auto z = ParseRfc3339("2024-03-01T13:34:56+01:00");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, 1709296496000000000LL);
  EXPECT_FALSE(ParseRfc3339("2024-03-01 12:34").ok());
  EXPECT_FALSE(ParseRfc3339("2024-03-01T12:34:56").ok());  // no zone
  // The range of int64 nanoseconds, not an overflow.
  EXPECT_EQ(*ParseRfc3339("2262-04-11T23:47:15.999999999Z"), 9223372035999999999LL);
  EXPECT_FALSE(ParseRfc3339("2262-04-11T23:47:16Z").ok());
  EXPECT_EQ(*ParseRfc3339("1677-09-21T00:12:45Z"), -9223372035000000000LL);
  EXPECT_FALSE(ParseRfc3339("1677-09-21T00:12:44Z").ok());
  EXPECT_FALSE(ParseRfc3339("9999-12-31T23:59:59Z").ok());
}

TEST(RecordTest, NativeLineFieldsLevelTime) {
  Record r;
  std::vector<model::Label> extra;
  ASSERT_TRUE(ParseNativeLine(R"({"time":1700000000.5,"level":"warn","msg":"hi","step":3,"labels":{"rank":"1"}})", 7, &r,
                              &extra).ok());
  EXPECT_EQ(r.time_ns, 1700000000500000000LL);
  EXPECT_EQ(r.level, "WARNING");
  EXPECT_EQ(r.message, "hi");
  EXPECT_EQ(r.fields, R"({"step":3})");
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_EQ(extra[0].name, "rank");
  EXPECT_EQ(extra[0].value, "1");
}

TEST(RecordTest, NonJsonIsPlainMessageWithReceiveTime) {
  Record r;
  std::vector<model::Label> extra;
  ASSERT_TRUE(ParseNativeLine("Traceback (most recent call last):", 42, &r, &extra).ok());
  EXPECT_EQ(r.message, "Traceback (most recent call last):");
  EXPECT_EQ(r.time_ns, 42);
  EXPECT_TRUE(r.fields.empty());
  Record broken;
  ASSERT_TRUE(ParseNativeLine("{not json", 1, &broken, &extra).ok());
  EXPECT_EQ(broken.message, "{not json");
}

TEST(RecordTest, BadTimeNamesTheField) {
  Record r;
  std::vector<model::Label> extra;
  Status s = ParseNativeLine(R"({"time":"yesterday","message":"x"})", 1, &r, &extra);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("\"time\""), std::string::npos) << s.message();
  s = ParseNativeLine(R"({"labels":{"bad name":"x"}})", 1, &r, &extra);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("labels"), std::string::npos);
}

TEST(RecordTest, OverlongMessageTruncatedAndFlagged) {
  std::string big(kMaxMessageBytes + 100, 'x');
  Record r;
  std::vector<model::Label> extra;
  ASSERT_TRUE(ParseNativeLine(big, 1, &r, &extra).ok());
  EXPECT_EQ(r.message.size(), kMaxMessageBytes);
  EXPECT_TRUE(r.truncated);
  std::string json;
  AppendRecordJson(&json, r);
  EXPECT_NE(json.find("\"truncated\":true"), std::string::npos);
}

TEST(RecordTest, InvalidUtf8BecomesReplacementCharacter) {
  Record r;
  std::vector<model::Label> extra;
  ASSERT_TRUE(ParseNativeLine("caf\xe9 ok \xc3\xa9", 1, &r, &extra).ok());
  EXPECT_EQ(r.message, "caf\xEF\xBF\xBD ok \xc3\xa9");
}

TEST(RecordTest, TruncateKeepsUtf8Boundary) {
  std::string s = "ab\xc3\xa9";  // "abé"
  EXPECT_TRUE(TruncateUtf8(&s, 3));
  EXPECT_EQ(s, "ab");
}

TEST(RecordTest, ExtremeTimesFormatWithoutOverflow) {
  // -((-ns + ...)) overflowed for INT64_MIN (UB caught by UBSan).
  std::string s;
  AppendRfc3339Nano(&s, INT64_MIN);
  EXPECT_EQ(s, "1677-09-21T00:12:43.145224192Z");
  s.clear();
  AppendRfc3339Nano(&s, INT64_MAX);
  EXPECT_EQ(s, "2262-04-11T23:47:16.854775807Z");
  s.clear();
  AppendRfc3339Nano(&s, -1);
  EXPECT_EQ(s, "1969-12-31T23:59:59.999999999Z");
  EXPECT_EQ(MsToNsSaturated(INT64_MAX), INT64_MAX);
  EXPECT_EQ(MsToNsSaturated(INT64_MIN), INT64_MIN);
  EXPECT_EQ(FloorDiv(INT64_MIN, 1000000), INT64_MIN / 1000000 - 1);
  EXPECT_EQ(FloorDiv(-1, 86400000), -1);
}

TEST(RecordTest, TimeBoundsNameTheBound) {
  TimeBounds b;
  EXPECT_TRUE(b.Check(INT64_MAX).ok());  // the default accepts every time
  EXPECT_TRUE(b.Check(INT64_MIN).ok());
  b.now_ms = 0;
  b.max_future_ms = 1000;
  b.max_ns = 1000000000;
  Status s = b.Check(INT64_MAX);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_EQ(s.message(), "time 2262-04-11T23:47:16.854775807Z is more than 1s after the server clock "
                         "(1970-01-01T00:00:00Z; the limit is --ingest.max-future)");
  EXPECT_EQ(b.rejected, TimeReject::kTooFarInFuture);
  EXPECT_EQ(TimeRejectName(b.rejected), "too_far_in_future");
}

TEST(RecordTest, Utf8Validation) {
  EXPECT_TRUE(IsValidUtf8("abc \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff\xfe"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // cut short
  EXPECT_EQ(ToValidUtf8("a\xff" "b"), "a\xEF\xBF\xBD" "b");
  model::Labels l{{"job", "ok"}, {"run", "\xff"}};
  ASSERT_NE(FirstNonUtf8Label(l), nullptr);
  EXPECT_EQ(FirstNonUtf8Label(l)->name, "run");
}

}  // namespace
}  // namespace trainwatch::logs

namespace trainwatch::logs {
namespace {

// Issue 19: plain lines (stdout, a tailed file, Loki without a level) show
// their level; a CUDA error printed by PyTorch is an ERROR, not INFO.
TEST(RecordTest, InferLevelFromPlainLines) {
  EXPECT_EQ(InferLevel("RuntimeError: CUDA error: an illegal memory access was encountered"), "ERROR");
  EXPECT_EQ(InferLevel("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"), "ERROR");
  EXPECT_EQ(InferLevel("torch.cuda.OutOfMemoryError"), "ERROR");
  EXPECT_EQ(InferLevel("Traceback (most recent call last):\n  File \"train.py\", line 3"), "ERROR");
  EXPECT_EQ(InferLevel("NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, unhandled system error"),
            "ERROR");
  EXPECT_EQ(InferLevel("Segmentation fault (core dumped)"), "ERROR");
  EXPECT_EQ(InferLevel("INFO:root:epoch 3 done"), "INFO");
  EXPECT_EQ(InferLevel("[W] something"), "");  // one letter in brackets is too weak a sign
  EXPECT_EQ(InferLevel("2026-01-01 12:00:00 WARN loader slow"), "WARNING");
  EXPECT_EQ(InferLevel("train.py:12: UserWarning: torch.meshgrid: in an upcoming release"), "WARNING");
  // A level word wins over an error mentioned later in the line.
  EXPECT_EQ(InferLevel("INFO recovered after RuntimeError: CUDA error: retrying"), "INFO");
  // Nothing to go by: unknown, not a guess.
  EXPECT_EQ(InferLevel("step 100 loss 0.31 (no errors so far)"), "");
  EXPECT_EQ(InferLevel("caught ValueError: retrying"), "");
  EXPECT_EQ(InferLevel(" 10%|█         | 100/1000 [00:01<00:09, 99.00it/s]"), "");
  Record r;
  r.message = "RuntimeError: CUDA error: device-side assert triggered";
  InferMissingLevel(&r);
  EXPECT_EQ(r.level, "ERROR");
  r.level = "INFO";  // a level the sender gave is kept
  InferMissingLevel(&r);
  EXPECT_EQ(r.level, "INFO");
}

}  // namespace
}  // namespace trainwatch::logs
