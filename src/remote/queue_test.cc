#include "remote/queue.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <thread>
#include <fstream>
#include <map>

#include "base/file.h"
#include "model/sample.h"

namespace trainwatch::remote {
namespace {

class QueueTest : public ::testing::Test {
 protected:
  QueueTest() {
    char tmpl[] = "/tmp/tw_queue_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~QueueTest() override { (void)file::RemoveAll(dir_); }

  QueueOptions Opts() {
    QueueOptions o;
    o.dir = dir_;
    o.sync_interval_ms = 50;
    return o;
  }

  // What a reader sees from `from`: every sample by label set, in order,
  // using only series records met on the way.
  struct Read {
    std::map<model::Labels, std::vector<model::Sample>> data;
    size_t records = 0;
    size_t unknown = 0;
    Position end;
  };
  static Read ReadAll(const Queue& q, Position from) {
    Read r;
    QueueCursor c(&q, from);
    std::map<uint64_t, model::Labels> names;
    std::string_view rec;
    Position end;
    std::vector<wal::RefSeries> series;
    std::vector<wal::RefSample> samples;
    while (c.Next(&rec, &end)) {
      r.records++;
      r.end = end;
      if (wal::Type(rec) == wal::RecordType::kSeries) {
        EXPECT_TRUE(wal::DecodeSeries(rec, &series).ok());
        for (auto& s : series) names[s.ref] = s.labels;
      } else {
        EXPECT_TRUE(wal::DecodeSamples(rec, &samples).ok());
        for (auto& s : samples) {
          auto it = names.find(s.ref);
          if (it == names.end()) {
            r.unknown++;
            continue;
          }
          r.data[it->second].push_back({s.t, s.v});
        }
      }
    }
    EXPECT_TRUE(c.status().ok()) << c.status().ToString();
    return r;
  }

  std::string dir_;
};

model::Labels L(const std::string& name, const std::string& v) { return model::Labels{{"__name__", name}, {"i", v}}; }

TEST_F(QueueTest, CommittedBatchesReadBackInOrderWithTheirSeries) {
  auto q = Queue::Open(Opts());
  ASSERT_TRUE(q.ok()) << q.error().ToString();
  auto app = (*q)->NewAppender();
  auto r1 = app->Append(0, L("a", "1"), 1000, 1.5);
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(app->Append(0, L("b", "1"), 1000, std::bit_cast<double>(model::kStaleNaNBits)).ok());
  ASSERT_TRUE(app->Commit().ok());
  EXPECT_TRUE(app->AppendByRef(*r1, 2000, -0.0));
  auto again = app->Append(0, L("a", "1"), 3000, 3);  // same labels, same id
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *r1);
  ASSERT_TRUE(app->Commit().ok());
  app->AppendByRef(*r1, 4000, 4);
  app->Rollback();  // nothing logged

  Read r = ReadAll(**q, Position{(*q)->FirstSegment(), 0});
  EXPECT_EQ(r.unknown, 0u);
  EXPECT_EQ(r.records, 3u);  // series + samples, then samples only
  EXPECT_EQ(r.end, (*q)->End());
  ASSERT_EQ(r.data[L("a", "1")].size(), 3u);
  EXPECT_EQ(r.data[L("a", "1")][1].t, 2000);
  EXPECT_TRUE(std::signbit(r.data[L("a", "1")][1].v));
  ASSERT_EQ(r.data[L("b", "1")].size(), 1u);
  EXPECT_EQ(std::bit_cast<uint64_t>(r.data[L("b", "1")][0].v), model::kStaleNaNBits);
}

TEST_F(QueueTest, EmptyLabelsAreRejected) {
  auto q = Queue::Open(Opts());
  auto app = (*q)->NewAppender();
  EXPECT_FALSE(app->Append(0, model::Labels{}, 1, 1).ok());
  EXPECT_FALSE(app->AppendByRef(12345, 1, 1));  // an id the queue never gave
}

TEST_F(QueueTest, EverySegmentDefinesTheSeriesItUses) {
  QueueOptions o = Opts();
  o.segment_bytes = 512;  // many rotations
  auto q = Queue::Open(o);
  auto app = (*q)->NewAppender();
  std::vector<storage::SeriesRef> refs(5);
  for (int t = 0; t < 200; t++) {
    for (int i = 0; i < 5; i++) {
      auto r = app->Append(refs[i], L("m", std::to_string(i)), t, t);
      ASSERT_TRUE(r.ok());
      refs[i] = *r;
    }
    ASSERT_TRUE(app->Commit().ok());
  }
  const Position end = (*q)->End();
  ASSERT_GT(end.segment, 5);
  // A reader starting at any segment needs nothing from earlier ones.
  for (int seg = (*q)->FirstSegment(); seg <= end.segment; seg++) {
    Read r = ReadAll(**q, Position{seg, 0});
    EXPECT_EQ(r.unknown, 0u) << "segment " << seg;
  }
  Read all = ReadAll(**q, Position{(*q)->FirstSegment(), 0});
  for (int i = 0; i < 5; i++) EXPECT_EQ(all.data[L("m", std::to_string(i))].size(), 200u);
}

TEST_F(QueueTest, ReopenKeepsDataAndNeverReusesIds) {
  uint64_t first_id = 0;
  {
    auto q = Queue::Open(Opts());
    auto app = (*q)->NewAppender();
    first_id = *app->Append(0, L("a", "1"), 1, 1);
    ASSERT_TRUE(app->Commit().ok());
  }
  auto q = Queue::Open(Opts());
  ASSERT_TRUE(q.ok());
  auto app = (*q)->NewAppender();
  EXPECT_FALSE(app->AppendByRef(first_id, 2, 2));  // the old id is not known to the new process
  auto id = app->Append(0, L("b", "1"), 2, 2);
  ASSERT_TRUE(id.ok());
  EXPECT_NE(*id, first_id);
  ASSERT_TRUE(app->Commit().ok());
  Read r = ReadAll(**q, Position{(*q)->FirstSegment(), 0});
  EXPECT_EQ(r.unknown, 0u);
  EXPECT_EQ(r.data[L("a", "1")].size(), 1u);
  EXPECT_EQ(r.data[L("b", "1")].size(), 1u);
}

TEST_F(QueueTest, TornTailIsCutOnOpen) {
  Position good;
  int seg = 0;
  {
    auto q = Queue::Open(Opts());
    auto app = (*q)->NewAppender();
    ASSERT_TRUE(app->Append(0, L("a", "1"), 1, 1).ok());
    ASSERT_TRUE(app->Commit().ok());
    good = (*q)->End();
    seg = good.segment;
  }
  {
    char name[16];
    std::snprintf(name, sizeof name, "/%08d", seg);
    std::ofstream f(dir_ + name, std::ios::app | std::ios::binary);
    f << std::string("\x20\x00\x00\x00garbage", 11);  // half a frame, as a crash leaves it
  }
  auto q = Queue::Open(Opts());
  ASSERT_TRUE(q.ok()) << q.error().ToString();
  Read r = ReadAll(**q, Position{(*q)->FirstSegment(), 0});
  EXPECT_EQ(r.data[L("a", "1")].size(), 1u);
}

TEST_F(QueueTest, SizeBoundDropsOldestSegmentsAndReadersSkipThem) {
  QueueOptions o = Opts();
  o.segment_bytes = 1024;
  o.max_bytes = 8 * 1024;
  auto q = Queue::Open(o);
  auto app = (*q)->NewAppender();
  storage::SeriesRef ref = 0;
  for (int t = 0; t < 2000; t++) {
    ref = *app->Append(ref, L("m", "0"), t, t);
    ASSERT_TRUE(app->Commit().ok());
  }
  EXPECT_GT((*q)->segments_dropped(), 0u);
  EXPECT_LE((*q)->SizeBytes(), o.max_bytes + o.segment_bytes + 64);
  QueueCursor c(q->get(), Position{0, 0});
  std::string_view rec;
  Position end;
  size_t n = 0;
  while (c.Next(&rec, &end)) n++;
  EXPECT_GT(n, 0u);
  EXPECT_GT(c.segments_skipped(), 0u);
  EXPECT_EQ(end, (*q)->End());
}

TEST_F(QueueTest, UnusedSeriesAreForgottenAfterTwoSegments) {
  QueueOptions o = Opts();
  o.segment_bytes = 256;
  auto q = Queue::Open(o);
  auto app = (*q)->NewAppender();
  auto idle = *app->Append(0, L("idle", "1"), 1, 1);
  ASSERT_TRUE(app->Commit().ok());
  storage::SeriesRef busy = 0;
  for (int t = 0; t < 300; t++) {
    busy = *app->Append(busy, L("busy", "1"), t, t);
    ASSERT_TRUE(app->Commit().ok());
  }
  EXPECT_TRUE((*q)->Known(busy));
  EXPECT_FALSE((*q)->Known(idle));
  EXPECT_FALSE(app->AppendByRef(idle, 500, 1));
  EXPECT_EQ((*q)->series(), 1u);
}

TEST_F(QueueTest, TruncateBeforeDeletesOnlyClosedSegments) {
  QueueOptions o = Opts();
  o.segment_bytes = 256;
  auto q = Queue::Open(o);
  auto app = (*q)->NewAppender();
  storage::SeriesRef ref = 0;
  for (int t = 0; t < 100; t++) {
    ref = *app->Append(ref, L("m", "0"), t, t);
    ASSERT_TRUE(app->Commit().ok());
  }
  const Position end = (*q)->End();
  ASSERT_TRUE((*q)->TruncateBefore(end.segment + 10).ok());
  EXPECT_EQ((*q)->FirstSegment(), end.segment);
  EXPECT_TRUE(file::Exists((*q)->SegmentPath(end.segment)));
  EXPECT_FALSE(file::Exists((*q)->SegmentPath(end.segment - 1)));
}

TEST_F(QueueTest, WaitPastWakesOnCommit) {
  auto q = Queue::Open(Opts());
  const Position start = (*q)->End();
  std::thread t([&] {
    auto app = (*q)->NewAppender();
    ASSERT_TRUE(app->Append(0, L("a", "1"), 1, 1).ok());
    ASSERT_TRUE(app->Commit().ok());
  });
  Position p = start;
  for (int i = 0; i < 100 && p == start; i++) p = (*q)->WaitPast(start, 100);
  t.join();
  EXPECT_NE(p, start);
}

}  // namespace
}  // namespace trainwatch::remote
