#include "app/import_tb.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/flags.h"
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
  // Files directly in the logdir: torch's SummaryWriter (simple_value), a histogram, an image.
  std::string f1 = Record(Event(t0, 0, FileVersion()));
  for (int s = 0; s < 5; s++) f1 += Record(Event(t0 + s + 1, s, Summary({Simple("train/loss", 1.0f / (s + 1))})));
  f1 += Record(Event(t0 + 6, 4, Summary({BytesField(1, "w") + BytesField(5, DoubleField(1, 0))})));
  f1 += Record(Event(t0 + 7, 4, Summary({BytesField(1, "img") + BytesField(4, BytesField(4, "png"))})));
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
  EXPECT_EQ(root.skipped, (std::map<std::string, size_t>{{"histogram", 1}, {"image", 1}}));

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
  EXPECT_EQ(eval.skipped,
            (std::map<std::string, size_t>{{"graph", 1}, {"histogram", 2}, {"hparams", 1}, {"text", 1}}));
  EXPECT_DOUBLE_EQ(eval.end_time, t0 + 18);
  EXPECT_EQ(TbSkippedReport(eval.skipped), "1 graph, 2 histogram, 1 hparams, 1 text values not imported (scalars only)");
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
