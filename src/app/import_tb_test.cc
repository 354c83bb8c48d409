#include "app/import_tb.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "app/flags.h"
#include "base/base64.h"
#include "base/file.h"

namespace trainwatch::app {
namespace {

namespace fs = std::filesystem;

// ---- a tiny protobuf and TFRecord encoder, for fixtures (what
// tensorboard's EventFileWriter and torch's SummaryWriter write) ----

std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
  return s;
}
std::string Key(int field, int wire) { return Varint(static_cast<uint64_t>(field) << 3 | wire); }
std::string VarintField(int field, uint64_t v) { return Key(field, 0) + Varint(v); }
std::string BytesField(int field, std::string_view b) { return Key(field, 2) + Varint(b.size()) + std::string(b); }
std::string Fixed32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string Fixed64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string FloatField(int field, float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return Key(field, 5) + Fixed32(b);
}
std::string DoubleField(int field, double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return Key(field, 1) + Fixed64(b);
}

std::string Event(double wall_time, int64_t step, const std::string& what) {
  std::string e = DoubleField(1, wall_time);
  if (step != 0) e += VarintField(2, static_cast<uint64_t>(step));
  return e + what;
}
std::string FileVersion() { return BytesField(3, "brain.Event:2"); }
std::string Summary(const std::vector<std::string>& values) {
  std::string s;
  for (const std::string& v : values) s += BytesField(1, v);
  return BytesField(5, s);
}
std::string Metadata(std::string_view plugin) { return BytesField(9, BytesField(1, BytesField(1, plugin))); }
// SummaryWriter.add_scalar: Value{tag, simple_value}.
std::string Simple(std::string_view tag, float v) { return BytesField(1, tag) + FloatField(2, v); }
// A TensorProto: dtype, shape (dims), then the value fields.
std::string Tensor(int dtype, const std::vector<int64_t>& dims, const std::string& fields) {
  std::string shape;
  for (int64_t d : dims) shape += BytesField(2, VarintField(1, static_cast<uint64_t>(d)));
  return VarintField(1, dtype) + BytesField(2, shape) + fields;
}
std::string TensorValue(std::string_view tag, const std::string& tensor, std::string_view plugin = "") {
  return BytesField(1, tag) + BytesField(8, tensor) + (plugin.empty() ? std::string() : Metadata(plugin));
}
std::string PackedFloats(int field, const std::vector<float>& v) {
  std::string b;
  for (float f : v) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    b += Fixed32(u);
  }
  return BytesField(field, b);
}

std::string PackedDoubles(int field, const std::vector<double>& v) {
  std::string b;
  for (double d : v) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    b += Fixed64(u);
  }
  return BytesField(field, b);
}
// SummaryMetadata with plugin_data {plugin_name, content}.
std::string Metadata(std::string_view plugin, std::string_view content) {
  return BytesField(9, BytesField(1, BytesField(1, plugin) + BytesField(2, content)));
}
// HistogramProto: min, max, num, sum, sum_squares, bucket_limit, bucket (as torch's make_histogram).
std::string Histo(double min, double max, const std::vector<double>& limits, const std::vector<double>& counts) {
  double num = 0;
  for (double c : counts) num += c;
  return DoubleField(1, min) + DoubleField(2, max) + DoubleField(3, num) + DoubleField(4, 0) + DoubleField(5, 0) +
         PackedDoubles(6, limits) + PackedDoubles(7, counts);
}
std::string HistoValue(std::string_view tag, const std::string& histo) { return BytesField(1, tag) + BytesField(5, histo); }
// Summary.Image: height, width, colorspace, encoded_image_string (add_image).
std::string ImageValue(std::string_view tag, std::string_view encoded) {
  return BytesField(1, tag) +
         BytesField(4, VarintField(1, 2) + VarintField(2, 3) + VarintField(3, 3) + BytesField(4, encoded));
}
// A DT_STRING tensor of the given shape.
std::string StringTensor(const std::vector<int64_t>& dims, const std::vector<std::string>& strings) {
  std::string vals;
  for (const std::string& s : strings) vals += BytesField(8, s);
  return Tensor(7, dims, vals);
}
const std::string kPng("\x89PNG\r\n\x1a\n", 8);
const std::string kJpeg("\xff\xd8\xff\xe0", 4);
// google.protobuf.Value and HParamsPluginData{session_start_info{hparams}}.
std::string NumberValue(double d) { return DoubleField(2, d); }
std::string StringValue(std::string_view s) { return BytesField(3, s); }
std::string BoolValue(bool b) { return VarintField(4, b ? 1 : 0); }
std::string MapEntries(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string m;
  for (const auto& [k, v] : kv) m += BytesField(1, BytesField(1, k) + BytesField(2, v));
  return m;
}
std::string SessionStart(const std::vector<std::pair<std::string, std::string>>& hparams) {
  return VarintField(1, 0) + BytesField(3, MapEntries(hparams) + BytesField(2, "/tmp/model"));
}

uint32_t MaskedCrc(std::string_view d) { return TfRecordMaskedCrc(d); }
std::string Record(const std::string& data) {
  std::string len = Fixed64(data.size());
  return len + Fixed32(MaskedCrc(len)) + data + Fixed32(MaskedCrc(data));
}

struct Scan {
  std::vector<std::pair<uint64_t, std::string>> records;
  TfRecordEnd end;
};
Scan ScanBytes(const std::string& bytes) {
  Scan s;
  std::istringstream in(bytes);
  s.end = ReadTfRecords(in, bytes.size(), [&](uint64_t off, std::string_view d) { s.records.emplace_back(off, d); });
  return s;
}

TEST(TfRecordTest, MaskedCrcMatchesTensorFlowsFileHeader) {
  // Every event file TensorFlow, tensorboardX or torch writes starts with the
  // 24-byte file_version event: its framing is 18 00.. then a3 7f 4b 22.
  std::string rec = Record(Event(1.7e9, 0, FileVersion()));
  ASSERT_EQ(rec.size(), 12u + 24 + 4);
  EXPECT_EQ(rec.substr(0, 12), std::string("\x18\0\0\0\0\0\0\0\xa3\x7f\x4b\x22", 12));
  // CRC-32C check value: crc("123456789") = 0xe3069283, masked by hand.
  uint32_t crc = 0xe3069283u;
  EXPECT_EQ(MaskedCrc("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(TfRecordTest, ReadsRecordsInOrder) {
  std::string a = Record("first"), b = Record(""), c = Record(std::string(300, 'x'));
  Scan s = ScanBytes(a + b + c);
  EXPECT_TRUE(s.end.clean) << s.end.error;
  EXPECT_EQ(s.end.offset, a.size() + b.size() + c.size());
  ASSERT_EQ(s.records.size(), 3u);
  EXPECT_EQ(s.records[0], (std::pair<uint64_t, std::string>{0, "first"}));
  EXPECT_EQ(s.records[1], (std::pair<uint64_t, std::string>{a.size(), ""}));
  EXPECT_EQ(s.records[2].first, a.size() + b.size());
  EXPECT_EQ(s.records[2].second, std::string(300, 'x'));
  EXPECT_TRUE(ScanBytes("").end.clean);
}

TEST(TfRecordTest, BadDataCrcStopsTheFileAtThatRecord) {
  std::string a = Record("good"), b = Record("flipped"), c = Record("after");
  b[12 + 2] ^= 1;  // a bit of the data
  Scan s = ScanBytes(a + b + c);
  EXPECT_FALSE(s.end.clean);
  EXPECT_EQ(s.end.offset, a.size());
  EXPECT_NE(s.end.error.find("data's CRC"), std::string::npos) << s.end.error;
  ASSERT_EQ(s.records.size(), 1u);  // nothing after a bad record
}

TEST(TfRecordTest, BadLengthCrcStopsTheFile) {
  std::string a = Record("good"), b = Record("length");
  b[0] = 100;  // the length, without its CRC
  Scan s = ScanBytes(a + b);
  EXPECT_FALSE(s.end.clean);
  EXPECT_EQ(s.end.offset, a.size());
  EXPECT_NE(s.end.error.find("length's CRC"), std::string::npos) << s.end.error;
  EXPECT_EQ(s.records.size(), 1u);
}

TEST(TfRecordTest, TruncatedTailIsReportedAtItsOffset) {
  std::string a = Record("one"), b = Record("two: cut short");
  for (size_t cut : {size_t{1}, size_t{11}, size_t{12}, size_t{20}, b.size() - 1}) {
    Scan s = ScanBytes(a + b.substr(0, cut));
    EXPECT_FALSE(s.end.clean) << cut;
    EXPECT_EQ(s.end.offset, a.size()) << cut;
    EXPECT_NE(s.end.error.find("truncated"), std::string::npos) << cut << ": " << s.end.error;
    ASSERT_EQ(s.records.size(), 1u) << cut;
    EXPECT_EQ(s.records[0].second, "one");
  }
}

// ---- Event protos ----

TEST(TbEventTest, FileVersionAndSimpleValues) {
  TbEvent e;
  ASSERT_TRUE(ParseTbEvent(Event(1700000000.25, 0, FileVersion()), &e).ok());
  EXPECT_EQ(e.file_version, "brain.Event:2");
  EXPECT_DOUBLE_EQ(e.wall_time, 1700000000.25);
  EXPECT_TRUE(e.values.empty());

  e = TbEvent();
  ASSERT_TRUE(ParseTbEvent(Event(1700000001.5, 42, Summary({Simple("train/loss", 0.25f), Simple("lr", 3e-4f)})), &e).ok());
  EXPECT_EQ(e.step, 42);
  ASSERT_EQ(e.values.size(), 2u);
  EXPECT_EQ(e.values[0].tag, "train/loss");
  EXPECT_EQ(e.values[0].kind, TbValue::Kind::kScalar);
  EXPECT_EQ(e.values[0].value, 0.25);
  EXPECT_EQ(e.values[1].value, static_cast<double>(3e-4f));

  // A large step (varint of 5 bytes) and a NaN.
  e = TbEvent();
  ASSERT_TRUE(ParseTbEvent(Event(1.0, 1LL << 33, Summary({Simple("loss", NAN)})), &e).ok());
  EXPECT_EQ(e.step, 1LL << 33);
  EXPECT_TRUE(std::isnan(e.values[0].value));
}

TEST(TbEventTest, ScalarTensorsOfEachDtype) {
  struct Case {
    std::string tensor;
    double want;
  };
  double d = 0.1;
  uint64_t dbits;
  std::memcpy(&dbits, &d, 8);
  float f = 2.5f;
  uint32_t fbits;
  std::memcpy(&fbits, &f, 4);
  int32_t neg = -7;
  int64_t big = (1LL << 40) + 3;
  std::vector<Case> cases = {
      {Tensor(1, {}, PackedFloats(5, {0.5f})), 0.5},                      // DT_FLOAT, float_val (TF2 tf.summary.scalar)
      {Tensor(1, {}, FloatField(5, 1.5f)), 1.5},                          // float_val, not packed
      {Tensor(1, {}, BytesField(4, Fixed32(fbits))), 2.5},                // tensor_content
      {Tensor(2, {}, BytesField(6, Fixed64(dbits))), 0.1},                // DT_DOUBLE, double_val (packed)
      {Tensor(2, {}, DoubleField(6, 0.1)), 0.1},                          // double_val, not packed
      {Tensor(2, {}, BytesField(4, Fixed64(dbits))), 0.1},                // tensor_content
      {Tensor(3, {}, BytesField(7, Varint(static_cast<uint64_t>(int64_t{neg})))), -7},  // DT_INT32, int_val
      {Tensor(3, {}, VarintField(7, 12)), 12},                            // int_val, not packed
      {Tensor(3, {}, BytesField(4, Fixed32(static_cast<uint32_t>(neg)))), -7},  // tensor_content
      {Tensor(9, {}, BytesField(10, Varint(static_cast<uint64_t>(big)))), static_cast<double>(big)},  // DT_INT64
      {Tensor(9, {}, BytesField(4, Fixed64(static_cast<uint64_t>(int64_t{-9})))), -9},
      {Tensor(1, {1}, PackedFloats(5, {4.0f})), 4.0},       // shape [1]: one element
      {Tensor(1, {1, 1}, PackedFloats(5, {5.0f})), 5.0},    // shape [1, 1]
      {VarintField(1, 1) + PackedFloats(5, {6.0f}), 6.0},   // no tensor_shape at all: rank 0
  };
  for (size_t i = 0; i < cases.size(); i++) {
    TbEvent e;
    ASSERT_TRUE(ParseTbEvent(Event(1.0, 3, Summary({TensorValue("acc", cases[i].tensor, "scalars")})), &e).ok()) << i;
    ASSERT_EQ(e.values.size(), 1u) << i;
    EXPECT_EQ(e.values[0].kind, TbValue::Kind::kTensor) << i;
    EXPECT_TRUE(e.values[0].scalar_tensor) << i;
    EXPECT_EQ(e.values[0].value, cases[i].want) << i;
    EXPECT_EQ(e.values[0].plugin, "scalars") << i;
  }
}

TEST(TbEventTest, TensorsThatAreNoNumericScalar) {
  std::vector<std::string> not_scalar = {
      Tensor(1, {2}, PackedFloats(5, {1, 2})),              // a vector
      Tensor(1, {}, PackedFloats(5, {1, 2})),               // two values for one element
      Tensor(1, {}, ""),                                    // no value
      Tensor(7, {}, BytesField(8, "hello")),                // DT_STRING (text)
      Tensor(10, {}, VarintField(11, 1)),                   // DT_BOOL
      Tensor(1, {}, BytesField(4, "abc")),                  // tensor_content of the wrong width
      VarintField(1, 1) + BytesField(2, VarintField(3, 1)) + PackedFloats(5, {1}),  // unknown rank
  };
  for (size_t i = 0; i < not_scalar.size(); i++) {
    TbEvent e;
    ASSERT_TRUE(ParseTbEvent(Event(1.0, 3, Summary({TensorValue("t", not_scalar[i])})), &e).ok()) << i;
    EXPECT_EQ(e.values[0].kind, TbValue::Kind::kTensor) << i;
    EXPECT_FALSE(e.values[0].scalar_tensor) << i;
  }
}

TEST(TbEventTest, OtherKindsAndMalformedBytes) {
  TbEvent e;
  std::string histo = BytesField(1, "w") + BytesField(5, DoubleField(1, -1.0) + DoubleField(2, 1.0));
  std::string image = BytesField(1, "img") + BytesField(4, VarintField(1, 2) + BytesField(4, "\x89PNG"));
  std::string audio = BytesField(1, "snd") + BytesField(6, FloatField(1, 16000));
  std::string hparams = BytesField(1, "_hparams_/session_start_info") + Metadata("hparams");
  ASSERT_TRUE(ParseTbEvent(Event(1.0, 1, Summary({histo, image, audio, hparams})), &e).ok());
  ASSERT_EQ(e.values.size(), 4u);
  EXPECT_EQ(e.values[0].kind, TbValue::Kind::kHistogram);
  EXPECT_EQ(e.values[1].kind, TbValue::Kind::kImage);
  EXPECT_EQ(e.values[2].kind, TbValue::Kind::kAudio);
  EXPECT_EQ(e.values[3].kind, TbValue::Kind::kNone);
  EXPECT_EQ(e.values[3].plugin, "hparams");

  e = TbEvent();
  ASSERT_TRUE(ParseTbEvent(Event(1.0, 0, BytesField(4, "graphdef") + VarintField(99, 5)), &e).ok());  // unknown field skipped
  EXPECT_TRUE(e.graph);

  std::string good = Event(1.0, 1, Summary({Simple("loss", 1)}));
  EXPECT_FALSE(ParseTbEvent(good.substr(0, good.size() - 2), &e).ok());  // a cut message
  EXPECT_FALSE(ParseTbEvent(Key(1, 3) + "xxxx", &e).ok());            // a group
  EXPECT_FALSE(ParseTbEvent(BytesField(5, BytesField(1, BytesField(8, "\xff"))), &e).ok());  // a bad tensor
}

TEST(TbEventTest, DamagedBytesAreErrorsNotCrashes) {
  std::string good = Event(1.0, 7,
                           Summary({Simple("loss", 1), TensorValue("acc", Tensor(2, {1}, DoubleField(6, 0.5)), "scalars"),
                                    BytesField(1, "w") + BytesField(5, DoubleField(1, 0))}));
  uint64_t seed = 42;
  auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33; };
  for (int i = 0; i < 20000; i++) {
    std::string b = good;
    for (int k = 0, n = 1 + next() % 4; k < n; k++) b[next() % b.size()] = static_cast<char>(next());
    b.resize(next() % (b.size() + 1));
    TbEvent e;
    (void)ParseTbEvent(b, &e);
    std::string rec = Record(b) + Record(good);
    rec[next() % rec.size()] ^= static_cast<char>(1 + next() % 255);
    Scan s = ScanBytes(rec.substr(0, next() % (rec.size() + 1)));
    EXPECT_LE(s.records.size(), 2u);
  }
}

// ---- a logdir ----

class TbLogdirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_tb_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    logdir_ = dir_ + "/logs";
    fs::create_directories(logdir_);
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }
  void Write(const std::string& rel, const std::string& bytes) {
    fs::path p = fs::path(logdir_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
  }
  std::string dir_, logdir_;
};

TEST_F(TbLogdirTest, RunPerDirectoryScalarsAndWhatIsNotImported) {
  const double t0 = 1700000000.0;
  // Files directly in the logdir: torch's SummaryWriter (simple_value), a histogram, an image, audio.
  std::string f1 = Record(Event(t0, 0, FileVersion()));
  for (int s = 0; s < 5; s++) f1 += Record(Event(t0 + s + 1, s, Summary({Simple("train/loss", 1.0f / (s + 1))})));
  f1 += Record(Event(t0 + 6, 4, Summary({HistoValue("w", Histo(0, 2, {1, 2}, {1, 3}))})));
  f1 += Record(Event(t0 + 7, 4, Summary({ImageValue("img", kPng + "rest")})));
  f1 += Record(Event(t0 + 7, 4, Summary({BytesField(1, "snd") + BytesField(6, FloatField(1, 16000))})));
  Write("events.out.tfevents.1700000000.host.1.0", f1);
  // A second file in the same directory (a restart): step 4 again, later: kept after the first.
  std::string f2 = Record(Event(t0 + 100, 0, FileVersion())) + Record(Event(t0 + 101, 4, Summary({Simple("train/loss", 9.0f)})));
  Write("events.out.tfevents.1700000100.host.2.0", f2);
  Write("not-an-event-file.txt", "hello");
  // TF2 under eval/: the scalars plugin's metadata on a tag's first value only; a
  // histograms-plugin tensor, its metadata on the first only too; text; hparams.
  std::string f3 = Record(Event(t0 + 10, 0, FileVersion()));
  f3 += Record(Event(t0 + 11, 0, Summary({TensorValue("acc", Tensor(1, {}, PackedFloats(5, {0.5f})), "scalars")})));
  f3 += Record(Event(t0 + 12, 1, Summary({TensorValue("acc", Tensor(1, {}, PackedFloats(5, {0.75f})))})));
  f3 += Record(Event(t0 + 13, 1, Summary({TensorValue("acc_d", Tensor(2, {}, DoubleField(6, 0.875)), "scalars")})));
  f3 += Record(Event(t0 + 13, 1, Summary({TensorValue("n", Tensor(9, {}, VarintField(10, 77)))})));  // no plugin: a scalar
  f3 += Record(Event(t0 + 14, 1, Summary({TensorValue("h", Tensor(2, {3, 3}, ""), "histograms")})));
  f3 += Record(Event(t0 + 15, 2, Summary({TensorValue("h", Tensor(1, {}, PackedFloats(5, {1})))})));  // remembered: histogram
  f3 += Record(Event(t0 + 16, 2, Summary({TensorValue("notes", Tensor(7, {1}, BytesField(8, "hi")), "text")})));
  f3 += Record(Event(t0 + 17, 0, Summary({BytesField(1, "_hparams_/experiment") + Metadata("hparams")})));
  f3 += Record(Event(t0 + 17, 0, Summary({BytesField(1, "_hparams_/session_start_info") +
                                           Metadata("hparams", SessionStart({{"lr", NumberValue(0.01)}}))})));
  f3 += Record(Event(t0 + 18, 0, BytesField(4, "graph")));
  // ... and a tail cut short: reported, the rest of the file skipped.
  std::string tail = Record(Event(t0 + 19, 3, Summary({TensorValue("acc", Tensor(1, {}, PackedFloats(5, {0.9f})))})));
  const size_t tail_offset = f3.size();
  Write("sub/eval/events.out.tfevents.1700000010.host.3.v2", f3 + tail.substr(0, tail.size() - 3));
  // A corrupt file next to a good one: the good one is read whole.
  std::string bad = Record(Event(t0, 0, FileVersion())) + Record(Event(t0 + 1, 0, Summary({Simple("x", 1)})));
  bad[bad.size() - 1] ^= 0x55;
  Write("sub/bad/events.out.tfevents.1.a", bad);
  Write("sub/bad/events.out.tfevents.2.b", Record(Event(t0 + 2, 1, Summary({Simple("x", 2)}))));

  std::vector<std::string> warnings;
  auto runs = ReadTensorboardLogdir(logdir_, &warnings);
  ASSERT_TRUE(runs.ok()) << runs.error().ToString();
  ASSERT_EQ(runs->size(), 3u);
  const TbRun& root = (*runs)[0];
  EXPECT_EQ(root.name, "logs");
  EXPECT_EQ(root.dir, fs::weakly_canonical(logdir_).string());
  EXPECT_EQ(root.id.size(), 19u);
  EXPECT_EQ(root.id.substr(0, 3), "tb-");
  EXPECT_EQ(root.files.size(), 2u);
  EXPECT_DOUBLE_EQ(root.start_time, t0);
  EXPECT_DOUBLE_EQ(root.end_time, t0 + 101);
  ASSERT_EQ(root.scalars.size(), 1u);
  const auto& loss = root.scalars.at("train/loss");
  ASSERT_EQ(loss.size(), 6u);
  EXPECT_EQ(loss[1].step, 1);
  EXPECT_EQ(loss[1].ts_ms, static_cast<int64_t>(t0 * 1000) + 2000);
  EXPECT_EQ(loss[1].value, static_cast<double>(0.5f));
  EXPECT_EQ(loss[5].step, 4);
  EXPECT_EQ(loss[5].value, 9.0);
  EXPECT_EQ(root.skipped, (std::map<std::string, size_t>{{"audio", 1}}));
  ASSERT_EQ(root.media.size(), 2u);
  ASSERT_EQ(root.media.at("w").size(), 1u);
  EXPECT_EQ(root.media.at("w")[0].step, 4);
  EXPECT_EQ(root.media.at("w")[0].ts_ms, static_cast<int64_t>(t0 * 1000) + 6000);
  EXPECT_EQ(root.media.at("w")[0].value, nlohmann::json::parse(R"({"_type": "histogram", "buckets": [[0, 1, 1], [1, 2, 3]]})"));
  EXPECT_EQ(root.media.at("img")[0].value["format"], "png");
  EXPECT_TRUE(root.config.empty());

  const TbRun& bad_run = (*runs)[1];
  EXPECT_EQ(bad_run.name, "sub/bad");
  ASSERT_EQ(bad_run.scalars.at("x").size(), 1u);  // the corrupt record skipped, the next file read
  EXPECT_EQ(bad_run.scalars.at("x")[0].value, 2.0);

  const TbRun& eval = (*runs)[2];
  EXPECT_EQ(eval.name, "sub/eval");
  EXPECT_NE(eval.id, root.id);
  ASSERT_EQ(eval.scalars.size(), 3u);
  ASSERT_EQ(eval.scalars.at("acc").size(), 2u);  // the cut record is not there
  EXPECT_EQ(eval.scalars.at("acc")[1].value, 0.75);
  EXPECT_EQ(eval.scalars.at("acc")[1].step, 1);
  EXPECT_EQ(eval.scalars.at("acc_d")[0].value, 0.875);
  EXPECT_EQ(eval.scalars.at("n")[0].value, 77);
  // The [3, 3] tensor without values is three empty buckets (TensorFlow's zeros); the scalar
  // under the histograms plugin's tag is none.
  EXPECT_EQ(eval.skipped, (std::map<std::string, size_t>{{"graph", 1}, {"malformed histogram", 1}}));
  ASSERT_EQ(eval.media.size(), 2u);
  EXPECT_EQ(eval.media.at("h")[0].value,
            nlohmann::json::parse(R"({"_type": "histogram", "buckets": [[0, 0, 0], [0, 0, 0], [0, 0, 0]]})"));
  EXPECT_EQ(eval.media.at("notes")[0].value, nlohmann::json::parse(R"({"_type": "text", "text": "hi"})"));
  EXPECT_EQ(eval.media.at("notes")[0].step, 2);
  EXPECT_EQ(eval.config, nlohmann::json::parse(R"({"lr": 0.01})"));
  EXPECT_DOUBLE_EQ(eval.end_time, t0 + 18);
  EXPECT_EQ(TbSkippedReport(eval.skipped), "1 graph, 1 malformed histogram values not imported");
  EXPECT_EQ(TbSkippedReport({}), "");

  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("sub/bad/events.out.tfevents.1.a: offset 40: corrupt record"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("sub/eval/events.out.tfevents.1700000010.host.3.v2: offset " + std::to_string(tail_offset) +
                             ": truncated record"),
            std::string::npos)
      << warnings[1];
  EXPECT_NE(warnings[1].find("the rest of the file (" + std::to_string(tail.size() - 3) + " bytes) skipped"),
            std::string::npos)
      << warnings[1];

  // The same logdir spelled otherwise: the same runs, the same ids.
  std::vector<std::string> w2;
  auto again = ReadTensorboardLogdir(dir_ + "/./logs/", &w2);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 3u);
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ((*again)[i].id, (*runs)[i].id);
    EXPECT_EQ((*again)[i].name, (*runs)[i].name);
  }
}

TEST_F(TbLogdirTest, NoEventFileIsAClearError) {
  Write("a/readme.txt", "x");
  std::vector<std::string> warnings;
  auto runs = ReadTensorboardLogdir(logdir_, &warnings);
  ASSERT_FALSE(runs.ok());
  EXPECT_NE(runs.error().message().find("no TensorBoard event file"), std::string::npos);
  EXPECT_FALSE(ReadTensorboardLogdir(dir_ + "/missing", &warnings).ok());
}

// ---- rich values ----

using nlohmann::json;

TEST(TbRichTest, LegacyHistogramsClampedToMinAndMax) {
  // torch's make_histogram: an empty first bucket whose limit is the left edge of
  // the first counted bin (below min here), then the counted bins.
  TbHistogram h;
  h.min = 0.5, h.max = 2.5, h.limits = {0.0, 1.0, 2.0, 3.0}, h.counts = {0, 4, 0, 2};
  auto v = TbHistogramValue(h);
  ASSERT_TRUE(v.ok()) << v.error().ToString();
  EXPECT_EQ(*v, json::parse(R"({"_type": "histogram",
                                "buckets": [[0.5, 0.5, 0], [0.5, 1, 4], [1, 2, 0], [2, 2.5, 2]]})"));
  // TensorFlow's C++ histograms: -DBL_MAX and DBL_MAX as the outer limits; no such edge goes out.
  h.min = -0.25, h.max = 7, h.limits = {-DBL_MAX, -0.1, 0, 10, DBL_MAX}, h.counts = {0, 1, 2.5, 3, 0};
  v = TbHistogramValue(h);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)["buckets"], json::parse("[[-0.25, -0.25, 0], [-0.25, -0.1, 1], [-0.1, 0, 2.5], [0, 7, 3], [7, 7, 0]]"));
  // An empty histogram (min DBL_MAX, max -DBL_MAX): the finite limits' range.
  h.min = DBL_MAX, h.max = -DBL_MAX, h.limits = {-DBL_MAX, 1, 2, DBL_MAX}, h.counts = {0, 0, 0, 0};
  v = TbHistogramValue(h);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)["buckets"], json::parse("[[1, 1, 0], [1, 1, 0], [1, 2, 0], [2, 2, 0]]"));
  // What cannot be a histogram.
  for (auto bad : std::vector<std::pair<std::vector<double>, std::vector<double>>>{
           {{}, {}},                    // no buckets
           {{1, 2}, {1}},               // limits and counts of different lengths
           {{2, 1}, {1, 1}},            // limits descending
           {{1, 2}, {1, -1}},           // a negative count
           {{1, 2}, {1, NAN}},          // a NaN count
           {{NAN, 2}, {1, 1}},          // a NaN limit
           {{-DBL_MAX, DBL_MAX}, {1, 1}},  // no min and max, no finite limit
       }) {
    h = TbHistogram();
    h.min = 1, h.max = 0;  // unusable
    h.limits = bad.first, h.counts = bad.second;
    EXPECT_FALSE(TbHistogramValue(h).ok()) << ::testing::PrintToString(bad);
  }
  // More buckets than the server's 4096: merged in adjacent groups.
  h = TbHistogram();
  h.min = 0, h.max = 10000;
  for (int i = 1; i <= 10000; i++) h.limits.push_back(i), h.counts.push_back(1);
  v = TbHistogramValue(h);
  ASSERT_TRUE(v.ok());
  const json& b = (*v)["buckets"];
  ASSERT_EQ(b.size(), 3334u);  // groups of 3
  EXPECT_EQ(b[0], json::parse("[0, 3, 3]"));
  EXPECT_EQ(b[3333], json::parse("[9999, 10000, 1]"));
}

TEST(TbRichTest, HistogramTensors) {
  // TF2's tf.summary.histogram: DT_DOUBLE [k, 3] in tensor_content.
  std::vector<double> cells = {-1, 0, 2, 0, 1, 3.5, 1, 2, 0};
  std::string content;
  for (double d : cells) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    content += Fixed64(u);
  }
  TbTensor t;
  ASSERT_TRUE(ParseTbTensor(Tensor(2, {3, 3}, BytesField(4, content)), &t).ok());
  EXPECT_EQ(t.dims, (std::vector<int64_t>{3, 3}));
  auto v = TbTensorHistogramValue(t);
  ASSERT_TRUE(v.ok()) << v.error().ToString();
  EXPECT_EQ(*v, json::parse(R"({"_type": "histogram", "buckets": [[-1, 0, 2], [0, 1, 3.5], [1, 2, 0]]})"));
  // DT_FLOAT in float_val; a left edge a rounding below the previous right edge is clipped to it.
  ASSERT_TRUE(ParseTbTensor(Tensor(1, {2, 3}, PackedFloats(5, {0, 1, 5, 0.99999994f, 2, 1})), &t).ok());
  v = TbTensorHistogramValue(t);
  ASSERT_TRUE(v.ok()) << v.error().ToString();
  EXPECT_EQ((*v)["buckets"], json::parse("[[0, 1, 5], [1, 2, 1]]"));
  // Empty, of the wrong shape, overlapping, negative.
  ASSERT_TRUE(ParseTbTensor(Tensor(2, {0, 3}, ""), &t).ok());
  EXPECT_FALSE(TbTensorHistogramValue(t).ok());
  ASSERT_TRUE(ParseTbTensor(Tensor(2, {3}, PackedDoubles(6, {0, 1, 2})), &t).ok());
  EXPECT_FALSE(TbTensorHistogramValue(t).ok());
  ASSERT_TRUE(ParseTbTensor(Tensor(2, {2, 3}, PackedDoubles(6, {0, 2, 1, 1, 3, 1})), &t).ok());
  EXPECT_FALSE(TbTensorHistogramValue(t).ok());
  ASSERT_TRUE(ParseTbTensor(Tensor(2, {1, 3}, PackedDoubles(6, {0, 2, -1})), &t).ok());
  EXPECT_FALSE(TbTensorHistogramValue(t).ok());
}

TEST(TbRichTest, TensorDecoding) {
  TbTensor t;
  // A short *_val list is padded with its last value; none is zeros.
  ASSERT_TRUE(ParseTbTensor(Tensor(1, {2, 2}, PackedFloats(5, {1, 2})), &t).ok());
  EXPECT_EQ(t.numbers, (std::vector<double>{1, 2, 2, 2}));
  ASSERT_TRUE(ParseTbTensor(Tensor(3, {3}, ""), &t).ok());
  EXPECT_EQ(t.numbers, (std::vector<double>{0, 0, 0}));
  ASSERT_TRUE(ParseTbTensor(Tensor(9, {2}, BytesField(10, Varint(static_cast<uint64_t>(int64_t{-5})) + Varint(7))), &t).ok());
  EXPECT_EQ(t.numbers, (std::vector<double>{-5, 7}));
  ASSERT_TRUE(ParseTbTensor(StringTensor({2}, {"a", "b"}), &t).ok());
  EXPECT_EQ(t.strings, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(ParseTbTensor(Tensor(1, {1}, PackedFloats(5, {1, 2})), &t).ok());       // more values than elements
  EXPECT_FALSE(ParseTbTensor(Tensor(1, {2}, BytesField(4, "abc")), &t).ok());          // tensor_content of a wrong size
  EXPECT_FALSE(ParseTbTensor(StringTensor({3}, {"a", "b"}), &t).ok());                 // strings missing
  EXPECT_FALSE(ParseTbTensor(Tensor(10, {}, VarintField(11, 1)), &t).ok());            // DT_BOOL
  EXPECT_FALSE(ParseTbTensor(Tensor(1, {1 << 20, 1 << 20}, ""), &t).ok());             // too many elements
  EXPECT_FALSE(ParseTbTensor(VarintField(1, 1) + BytesField(2, VarintField(3, 1)), &t).ok());  // unknown rank
  EXPECT_FALSE(ParseTbTensor(BytesField(2, "\xff"), &t).ok());                         // malformed
}

TEST(TbRichTest, ImagesByTheirSignature) {
  EXPECT_EQ(TbImageFormat(kPng + "IHDR"), "png");
  EXPECT_EQ(TbImageFormat(kJpeg), "jpeg");
  EXPECT_EQ(TbImageFormat("GIF89a"), "");
  EXPECT_EQ(TbImageFormat(kPng.substr(0, 7)), "");
  EXPECT_EQ(TbImageFormat(""), "");
  auto v = TbImageValue(kJpeg + "pixels");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)["_type"], "image");
  EXPECT_EQ((*v)["format"], "jpeg");
  EXPECT_EQ(Base64Decode((*v)["data"].get<std::string>()), kJpeg + "pixels");
  EXPECT_FALSE(v->contains("caption"));
  auto gif = TbImageValue("GIF89a....");
  ASSERT_FALSE(gif.ok());
  EXPECT_EQ(gif.error().message(), "image not PNG or JPEG");
  EXPECT_EQ(TbImageValue(kPng + std::string(16u << 20, 'x')).error().message(), "image over 16 MiB");

  // The images plugin's tensor: [width, height, image...].
  TbTensor t;
  ASSERT_TRUE(ParseTbTensor(StringTensor({4}, {"3", "2", kPng + "a", kPng + "b"}), &t).ok());
  auto images = TbTensorImages(t);
  ASSERT_TRUE(images.ok());
  EXPECT_EQ(*images, (std::vector<std::string>{kPng + "a", kPng + "b"}));
  ASSERT_TRUE(ParseTbTensor(StringTensor({1}, {"3"}), &t).ok());
  EXPECT_FALSE(TbTensorImages(t).ok());
}

TEST(TbRichTest, TextTensors) {
  TbTensor t;
  ASSERT_TRUE(ParseTbTensor(StringTensor({}, {"**bold**"}), &t).ok());  // TF2's tf.summary.text: a scalar
  EXPECT_EQ(*TbTextValue(t), json::parse(R"({"_type": "text", "text": "**bold**"})"));
  ASSERT_TRUE(ParseTbTensor(StringTensor({1}, {"hello"}), &t).ok());  // torch's add_text: shape [1]
  EXPECT_EQ(*TbTextValue(t), json::parse(R"({"_type": "text", "text": "hello"})"));
  ASSERT_TRUE(ParseTbTensor(StringTensor({3}, {"a", "b", "c"}), &t).ok());
  EXPECT_EQ((*TbTextValue(t))["text"], "a\nb\nc");
  ASSERT_TRUE(ParseTbTensor(StringTensor({2, 2}, {"x", "y", "1", "2"}), &t).ok());
  EXPECT_EQ(*TbTextValue(t),
            json::parse(R"({"_type": "table", "columns": ["0", "1"], "rows": [["x", "y"], ["1", "2"]]})"));
  ASSERT_TRUE(ParseTbTensor(StringTensor({1, 1, 1}, {"x"}), &t).ok());
  EXPECT_EQ(TbTextValue(t).error().message(), "text of rank 3");
  ASSERT_TRUE(ParseTbTensor(StringTensor({}, {std::string((1u << 20) + 1, 'x')}), &t).ok());
  EXPECT_EQ(TbTextValue(t).error().message(), "text over 1 MiB");
  ASSERT_TRUE(ParseTbTensor(StringTensor({2, 0}, {}), &t).ok());
  EXPECT_FALSE(TbTextValue(t).ok());
  ASSERT_TRUE(ParseTbTensor(Tensor(1, {}, PackedFloats(5, {1})), &t).ok());
  EXPECT_FALSE(TbTextValue(t).ok());
}

TEST(TbRichTest, HparamsBecomeConfig) {
  std::string list = BytesField(6, BytesField(1, NumberValue(1)) + BytesField(1, StringValue("two")));
  std::string nested = BytesField(5, MapEntries({{"depth", NumberValue(3)}}));
  json config = json::object();
  config["keep"] = 1;
  auto r = TbHparams(SessionStart({{"lr", NumberValue(3e-4)},
                                   {"optimizer", StringValue("adamw")},
                                   {"amp", BoolValue(true)},
                                   {"none", VarintField(1, 0)},
                                   {"layers", list},
                                   {"model", nested},
                                   {"nan", NumberValue(NAN)},
                                   {"empty", ""}}),
                     &config);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_TRUE(*r);
  EXPECT_EQ(config, json::parse(R"({"keep": 1, "lr": 0.0003, "optimizer": "adamw", "amp": true, "none": null,
                                    "layers": [1, "two"], "model": {"depth": 3}, "nan": "NaN", "empty": null})"));
  // A later session start info wins per key; the experiment and the session end info give nothing.
  r = TbHparams(SessionStart({{"lr", NumberValue(0.1)}}), &config);
  EXPECT_EQ(config["lr"], 0.1);
  json before = config;
  r = TbHparams(VarintField(1, 0) + BytesField(2, BytesField(1, "hparam infos")), &config);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  r = TbHparams(BytesField(4, VarintField(1, 1)), &config);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(config, before);
  EXPECT_FALSE(TbHparams(BytesField(3, "\xff"), &config).ok());
  // A Value nested deeper than anyone writes is refused, not a stack overflow.
  std::string deep = NumberValue(1);
  for (int i = 0; i < 100; i++) deep = BytesField(6, BytesField(1, deep));
  EXPECT_FALSE(TbHparams(SessionStart({{"deep", deep}}), &config).ok());
}

TEST_F(TbLogdirTest, HistogramsImagesTextAndHparams) {
  const double t0 = 1700000000.0;
  std::string f = Record(Event(t0, 0, FileVersion()));
  // torch's add_hparams: experiment, session start info (metadata only, no tensor), end info.
  f += Record(Event(t0 + 1, 0, Summary({BytesField(1, "_hparams_/experiment") +
                                        Metadata("hparams", VarintField(1, 0) + BytesField(2, ""))})));
  f += Record(Event(t0 + 1, 0, Summary({BytesField(1, "_hparams_/session_start_info") +
                                        Metadata("hparams", SessionStart({{"lr", NumberValue(0.5)},
                                                                          {"opt", StringValue("sgd")}}))})));
  f += Record(Event(t0 + 1, 0, Summary({BytesField(1, "_hparams_/session_end_info") +
                                        Metadata("hparams", BytesField(4, VarintField(1, 1)))})));
  for (int s = 0; s < 3; s++) {
    f += Record(Event(t0 + 2 + s, s, Summary({HistoValue("weights", Histo(-1, 1 + s, {0.0, 1.0 + s}, {2, 3}))})));
    f += Record(Event(t0 + 2 + s, s, Summary({ImageValue("sample", (s == 1 ? kJpeg : kPng) + std::to_string(s))})));
  }
  // TF2: the images plugin's tensor with two images (metadata on the first value only) ...
  f += Record(Event(t0 + 10, 5, Summary({TensorValue("gen", StringTensor({4}, {"2", "2", kPng + "x", kJpeg + "y"}), "images")})));
  f += Record(Event(t0 + 11, 6, Summary({TensorValue("gen", StringTensor({3}, {"2", "2", kPng + "z"}))})));
  // ... a histogram tensor, text and a table, a GIF, a 3-D text, audio, another plugin's data.
  f += Record(Event(t0 + 12, 5, Summary({TensorValue("act", Tensor(2, {1, 3}, PackedDoubles(6, {0, 1, 9})), "histograms")})));
  f += Record(Event(t0 + 13, 5, Summary({TensorValue("notes", StringTensor({}, {"# hi"}), "text")})));
  f += Record(Event(t0 + 14, 6, Summary({TensorValue("notes", StringTensor({1}, {"again"}))})));
  f += Record(Event(t0 + 14, 6, Summary({TensorValue("grid", StringTensor({1, 2}, {"a", "b"}), "text")})));
  f += Record(Event(t0 + 15, 6, Summary({ImageValue("anim", "GIF89a...")})));
  f += Record(Event(t0 + 15, 6, Summary({TensorValue("cube", StringTensor({1, 1, 1}, {"c"}), "text")})));
  f += Record(Event(t0 + 16, 6, Summary({TensorValue("pr", Tensor(1, {2}, PackedFloats(5, {1, 2})), "pr_curves")})));
  Write("run/events.out.tfevents.1.host", f);

  std::vector<std::string> warnings;
  auto runs = ReadTensorboardLogdir(logdir_, &warnings);
  ASSERT_TRUE(runs.ok()) << runs.error().ToString();
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  ASSERT_EQ(runs->size(), 1u);
  const TbRun& r = (*runs)[0];
  EXPECT_EQ(r.config, json::parse(R"({"lr": 0.5, "opt": "sgd"})"));
  EXPECT_TRUE(r.scalars.empty());
  std::vector<std::string> keys;
  for (const auto& [k, pts] : r.media) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"act", "gen", "gen/1", "grid", "notes", "sample", "weights"}));
  const auto& w = r.media.at("weights");
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[2].step, 2);
  EXPECT_EQ(w[2].ts_ms, static_cast<int64_t>(t0 * 1000) + 4000);
  EXPECT_EQ(w[2].value["buckets"], json::parse("[[-1, 0, 2], [0, 3, 3]]"));
  const auto& sample = r.media.at("sample");
  ASSERT_EQ(sample.size(), 3u);
  EXPECT_EQ(sample[0].value["format"], "png");
  EXPECT_EQ(sample[1].value["format"], "jpeg");
  EXPECT_EQ(Base64Decode(sample[1].value["data"].get<std::string>()), kJpeg + "1");
  // Several images at a step: the first under the tag, image i under "<tag>/<i>".
  ASSERT_EQ(r.media.at("gen").size(), 2u);
  EXPECT_EQ(Base64Decode(r.media.at("gen")[0].value["data"].get<std::string>()), kPng + "x");
  EXPECT_EQ(Base64Decode(r.media.at("gen")[1].value["data"].get<std::string>()), kPng + "z");
  EXPECT_EQ(r.media.at("gen")[1].step, 6);
  ASSERT_EQ(r.media.at("gen/1").size(), 1u);
  EXPECT_EQ(r.media.at("gen/1")[0].value["format"], "jpeg");
  EXPECT_EQ(r.media.at("gen/1")[0].step, 5);
  EXPECT_EQ(r.media.at("act")[0].value["buckets"], json::parse("[[0, 1, 9]]"));
  ASSERT_EQ(r.media.at("notes").size(), 2u);
  EXPECT_EQ(r.media.at("notes")[0].value["text"], "# hi");
  EXPECT_EQ(r.media.at("notes")[1].value["text"], "again");
  EXPECT_EQ(r.media.at("grid")[0].value["_type"], "table");
  EXPECT_EQ(r.skipped, (std::map<std::string, size_t>{{"image not PNG or JPEG", 1}, {"pr_curves", 1}, {"text of rank 3", 1}}));
  EXPECT_EQ(TbSkippedReport(r.skipped), "1 image not PNG or JPEG, 1 pr_curves, 1 text of rank 3 values not imported");
}

// What the import sends, to a fake server that records each request.
class TbSendTest : public TbLogdirTest {
 protected:
  void SetUp() override {
    TbLogdirTest::SetUp();
    auto record = [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      requests_.emplace_back(req.path, json::parse(req.body));
      json data = json::object();
      if (req.path.size() > 8 && req.path.substr(req.path.size() - 8) == "/batches") {
        const std::string id = requests_.back().second["batch_id"];
        size_t n = 0;
        for (const json& p : requests_.back().second["points"]) n += p["values"].size();
        data = {{"accepted", seen_.insert(id).second ? n : 0}, {"duplicate", false}, {"rejected", json::array()}};
      }
      res.set_content(json{{"status", "success"}, {"data", data}}.dump(), "application/json");
    };
    server_.Post(R"(/api/v1/runs.*)", record);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
    TbLogdirTest::TearDown();
  }
  std::vector<std::pair<std::string, json>> Requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::pair<std::string, json>> requests_;
  std::set<std::string> seen_;
};

TEST_F(TbSendTest, RichValuesAndConfigGoToTheRunsApi) {
  const double t0 = 1700000000.0;
  std::string f = Record(Event(t0, 0, FileVersion()));
  f += Record(Event(t0 + 1, 0, Summary({BytesField(1, "_hparams_/session_start_info") +
                                        Metadata("hparams", SessionStart({{"lr", NumberValue(0.5)}}))})));
  f += Record(Event(t0 + 2, 1, Summary({Simple("loss", 2)})));
  f += Record(Event(t0 + 3, 1, Summary({HistoValue("w", Histo(0, 1, {1}, {4}))})));
  std::string big(7u << 19, 'p');  // 3.5 MiB: a batch stops growing past 8 MiB of JSON
  f += Record(Event(t0 + 4, 1, Summary({ImageValue("img", kPng + big)})));
  f += Record(Event(t0 + 5, 2, Summary({ImageValue("img", kPng + big)})));
  f += Record(Event(t0 + 6, 3, Summary({ImageValue("img", kPng + "small")})));
  Write("events.out.tfevents.1.host", f);
  ImportOptions o;
  o.format = "tensorboard";
  o.dir = logdir_;
  o.url = "http://127.0.0.1:" + std::to_string(port_);
  ASSERT_EQ(RunImportTensorboard(o), 0);
  auto reqs = Requests();
  ASSERT_EQ(reqs.size(), 6u);  // create, loss, img x 2, w, finish
  EXPECT_EQ(reqs[0].first, "/api/v1/runs");
  EXPECT_EQ(reqs[0].second["config"], json::parse(R"({"lr": 0.5})"));
  const std::string id = reqs[0].second["id"];
  EXPECT_EQ(reqs[1].second["points"][0]["values"]["loss"], 2.0);
  // Keys in order: "img" (the two big images in one batch: past 8 MiB it is cut), then "w".
  EXPECT_EQ(reqs[2].first, "/api/v1/runs/" + id + "/batches");
  ASSERT_EQ(reqs[2].second["points"].size(), 2u);
  ASSERT_EQ(reqs[3].second["points"].size(), 1u);
  EXPECT_EQ(reqs[3].second["points"][0]["step"], 3);
  const json& img = reqs[2].second["points"][1]["values"]["img"];
  EXPECT_EQ(img["format"], "png");
  EXPECT_EQ(reqs[2].second["points"][1]["step"], 2);
  EXPECT_TRUE(Base64Decode(img["data"].get<std::string>()) == kPng + big);  // not EXPECT_EQ: 3.5 MiB on failure
  EXPECT_EQ(reqs[4].second["points"], json::parse(R"([{"step": 1, "ts": 1700000003000,
      "values": {"w": {"_type": "histogram", "buckets": [[0, 1, 4]]}}}])"));
  EXPECT_EQ(reqs[5].first, "/api/v1/runs/" + id + "/finish");
  std::set<std::string> ids;
  for (size_t i = 1; i < 5; i++) ids.insert(reqs[i].second["batch_id"].get<std::string>());
  EXPECT_EQ(ids.size(), 4u);

  // Again: the same batch ids (so the server stores nothing twice).
  ASSERT_EQ(RunImportTensorboard(o), 0);
  auto again = Requests();
  ASSERT_EQ(again.size(), 12u);
  for (size_t i = 1; i < 5; i++) EXPECT_EQ(again[6 + i].second["batch_id"], reqs[i].second["batch_id"]);
}

TEST(TbFlagsTest, ImportTensorboardAndExportRun) {
  std::vector<const char*> a = {"trainwatch", "import", "tensorboard", "/tmp/logs", "--project", "p"};
  auto c = ParseCommandLine(static_cast<int>(a.size()), a.data());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kImport);
  EXPECT_EQ(c->import.format, "tensorboard");
  EXPECT_EQ(c->import.dir, "/tmp/logs");
  EXPECT_EQ(c->import.project, "p");
  std::vector<const char*> b = {"trainwatch", "export", "run", "abc", "--out", "/tmp/x", "--url", "http://h:1"};
  c = ParseCommandLine(static_cast<int>(b.size()), b.data());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kExport);
  EXPECT_EQ(c->export_run.id, "abc");
  EXPECT_EQ(c->export_run.out_dir, "/tmp/x");
  EXPECT_EQ(c->export_run.url, "http://h:1");
  std::vector<const char*> d = {"trainwatch", "export", "run", "abc"};
  c = ParseCommandLine(static_cast<int>(d.size()), d.data());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->export_run.out_dir, ".");
}

}  // namespace
}  // namespace trainwatch::app
