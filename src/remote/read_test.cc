#include "remote/read.h"

#include <gtest/gtest.h>

#include "base/coding.h"
#include "base/crc32c.h"
#include "remote/prom_chunks.h"
#include "remote/proto.h"

namespace trainwatch::remote {
namespace {

void Len(std::string* out, uint32_t field, std::string_view b) {
  PutVarint32(out, (field << 3) | 2);
  PutVarint64(out, b.size());
  out->append(b);
}

void Var(std::string* out, uint32_t field, uint64_t v) {
  PutVarint32(out, field << 3);
  PutVarint64(out, v);
}

// One ChunkedReadResponse frame holding one series, as Prometheus writes it.
std::string Frame(const model::Labels& labels, const std::vector<PromChunk>& chunks, uint64_t encoding_override = 0) {
  std::string series;
  AppendLabelFields(labels, &series);
  for (const PromChunk& c : chunks) {
    std::string m;
    Var(&m, 1, static_cast<uint64_t>(c.min_time));
    Var(&m, 2, static_cast<uint64_t>(c.max_time));
    Var(&m, 3, encoding_override ? encoding_override : static_cast<uint64_t>(c.encoding));
    Len(&m, 4, c.data);
    Len(&series, 2, m);
  }
  std::string msg;
  Len(&msg, 1, series);
  Var(&msg, 2, 0);
  std::string out;
  PutVarint64(&out, msg.size());
  const uint32_t crc = crc32c::Value(msg.data(), msg.size());
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((crc >> s) & 0xff));
  return out + msg;
}

model::FloatHistogram Hist(double count) {
  model::FloatHistogram h;
  h.count = count;
  h.sum = count * 2;
  h.positive_spans = {{0, 1}};
  h.positive_buckets = {count};
  return h;
}

TEST(DecodeChunkedReadResponseTest, MixedSeriesSplitOverFramesIsJoined) {
  PromChunkEncoder e;
  for (int t = 1; t <= 3; t++) e.AppendFloat(t, t * 0.5);
  for (int t = 4; t <= 6; t++) e.AppendHistogram(t, Hist(t));
  std::vector<PromChunk> chunks = e.Finish();
  ASSERT_EQ(chunks.size(), 2u);
  const model::Labels a({{"__name__", "a"}, {"cluster", "c1"}}), b({{"__name__", "b"}, {"cluster", "c1"}});
  const std::string body = Frame(a, {chunks[0]}) + Frame(a, {chunks[1]}) + Frame(b, {chunks[0]});
  auto got = DecodeChunkedReadResponse(body, 2, 5, model::Labels({{"cluster", "c1"}}));
  ASSERT_TRUE(got.ok()) << got.error().ToString();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0]->labels(), model::Labels({{"__name__", "a"}}));
  EXPECT_EQ((*got)[1]->labels(), model::Labels({{"__name__", "b"}}));
  auto it = (*got)[0]->Iterator();
  std::vector<std::pair<int64_t, double>> floats, counts;
  while (it->Next()) {
    if (it->AtIsHistogram()) {
      counts.emplace_back(it->At().t, it->AtHistogram()->count);
    } else {
      floats.emplace_back(it->At().t, it->At().v);
    }
  }
  EXPECT_TRUE(it->Err().ok());
  EXPECT_EQ(floats, (std::vector<std::pair<int64_t, double>>{{2, 1.0}, {3, 1.5}}));
  EXPECT_EQ(counts, (std::vector<std::pair<int64_t, double>>{{4, 4.0}, {5, 5.0}}));
}

TEST(DecodeChunkedReadResponseTest, MalformedAnswersNameTheProblem) {
  PromChunkEncoder e;
  e.AppendHistogram(1, Hist(1));
  e.AppendHistogram(2, Hist(2));
  std::vector<PromChunk> chunks = e.Finish();
  const model::Labels a({{"__name__", "a"}});
  const std::string good = Frame(a, chunks);
  auto err = [](const std::string& body) {
    auto r = DecodeChunkedReadResponse(body, INT64_MIN, INT64_MAX, model::Labels());
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message();
  };
  std::string bad_crc = good;
  bad_crc.back() ^= 1;
  EXPECT_EQ(err(good + bad_crc), "frame 2 at byte " + std::to_string(good.size()) + ": CRC-32C mismatch");
  EXPECT_EQ(err(good.substr(0, good.size() - 1)), "frame 1 at byte 0: truncated (" +
                                                       std::to_string(good.size() - 5) + " bytes announced)");
  PromChunk cut = chunks[0];
  cut.data.resize(cut.data.size() - 3);
  std::string m = err(Frame(a, {cut}));
  EXPECT_NE(m.find("frame 1 at byte 0"), std::string::npos) << m;
  EXPECT_NE(m.find("series a{}, chunk 1"), std::string::npos) << m;
  EXPECT_NE(m.find("float histogram chunk: sample 2: "), std::string::npos) << m;
  m = err(Frame(a, chunks, 5));
  EXPECT_NE(m.find("chunk encoding 5 (only XOR = 1, HISTOGRAM = 2 and FLOAT_HISTOGRAM = 3 are read)"), std::string::npos) << m;
}

}  // namespace
}  // namespace trainwatch::remote
