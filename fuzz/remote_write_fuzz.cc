// Prometheus remote_write 1.0 receiver (ingest/remote_write.h): snappy block
// decoding, then the hand-written WriteRequest protobuf decoder.
// Input: a mode byte, then the body. Mode bit 0 clear: the body as sent
// (snappy-framed). Set: the body is the protobuf, snappy-compressed here so
// the fuzzer reaches the decoder; Parse (uncompressed) must then agree.
// Invariants of an accepted body: every series' labels pass
// model::CheckSeriesLabels (what the head checks), and encoding the appended
// samples again with remote/proto.h (the sender's encoder) decodes to the
// same samples, bit for bit.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz_util.h"
#include "ingest/remote_write.h"
#include "model/labels.h"
#include "remote/proto.h"
#include "storage/storage.h"

namespace {
constexpr const char* kTarget = "remote_write_fuzz";

using Row = std::tuple<trainwatch::model::Labels, int64_t, uint64_t>;

class CollectingAppender final : public trainwatch::storage::Appender {
 public:
  std::vector<Row> rows;
  trainwatch::Result<trainwatch::storage::SeriesRef> Append(trainwatch::storage::SeriesRef, const trainwatch::model::Labels& labels,
                                                           int64_t t, double v) override {
    FUZZ_CHECK(trainwatch::model::CheckSeriesLabels(labels).ok(),
               "accepted labels the head refuses: " + labels.ToString());
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    rows.emplace_back(labels, t, bits);
    return trainwatch::storage::SeriesRef{rows.size()};
  }
  trainwatch::Status Commit() override { return trainwatch::Status::OK(); }
  void Rollback() override { rows.clear(); }
};

std::vector<Row> Decode(trainwatch::ingest::RemoteWriteBatch& b) {
  CollectingAppender app;
  trainwatch::Status s = b.AppendTo(&app);
  FUZZ_CHECK(s.ok(), "AppendTo failed after a successful parse: " + s.ToString());
  return std::move(app.rows);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using trainwatch::ingest::RemoteWriteBatch;
  if (size < 1) return 0;
  bool compress = (data[0] & 1) != 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string body;
  if (compress) {
    trainwatch::remote::SnappyCompress(in, &body);
  } else {
    body.assign(in);
  }

  RemoteWriteBatch batch;
  trainwatch::Status s = batch.ParseSnappy(body, nullptr);
  if (compress) {
    RemoteWriteBatch raw;
    trainwatch::Status rs = raw.Parse(in, nullptr);
    FUZZ_CHECK(rs.ToString() == s.ToString(), "Parse and ParseSnappy disagree: " + rs.ToString() + " vs " + s.ToString());
  }
  if (!s.ok()) {
    FUZZ_CHECK_ERROR(s);
    return 0;
  }
  std::vector<Row> rows = Decode(batch);
  FUZZ_CHECK(rows.size() == batch.stats().samples, "stats().samples differs from the samples appended");

  // Encode again, one TimeSeries per sample, as the sender would.
  std::string proto;
  for (const Row& r : rows) {
    trainwatch::model::Sample smp;
    smp.t = std::get<1>(r);
    uint64_t bits = std::get<2>(r);
    std::memcpy(&smp.v, &bits, 8);
    trainwatch::remote::AppendTimeSeries(std::get<0>(r), &smp, 1, &proto);
  }
  std::string framed;
  trainwatch::remote::SnappyCompress(proto, &framed);
  RemoteWriteBatch again;
  trainwatch::Status as = again.ParseSnappy(framed, nullptr);
  FUZZ_CHECK(as.ok(), "re-encoded request refused: " + as.ToString());
  std::vector<Row> rows2 = Decode(again);
  std::sort(rows.begin(), rows.end());
  std::sort(rows2.begin(), rows2.end());
  FUZZ_CHECK(rows == rows2, "re-encoded request decodes to other samples");
  return 0;
}
