#include "logs/forward.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "logs/shippers.h"

namespace trainwatch::logs {
namespace {

Record Rec(int64_t t, std::string msg, std::string level = "", std::string fields = "") {
  Record r;
  r.time_ns = t;
  r.labels = model::Labels{{"project", "p"}, {"run", "r"}};
  r.message = std::move(msg);
  r.level = std::move(level);
  r.fields = std::move(fields);
  return r;
}

TEST(ForwardTest, BulkBodyRoundTripsThroughOurBulkParser) {
  ForwardTarget t;
  t.index = "idx";
  std::string body = ForwardBody(t, {Rec(1700000000123000000LL, "boom", "ERROR", R"({"step":3})"), Rec(5, "plain")});
  BulkRequest req;
  ASSERT_TRUE(ParseBulk(body, "", 0, &req).ok());
  ASSERT_EQ(req.records.size(), 2u);
  EXPECT_EQ(req.records[0].time_ns, 1700000000123000000LL);
  EXPECT_EQ(req.records[0].level, "ERROR");
  EXPECT_EQ(req.records[0].fields, R"({"step":3})");
  EXPECT_EQ(req.records[0].labels, (model::Labels{{"index", "idx"}, {"project", "p"}, {"run", "r"}}));
}

TEST(ForwardTest, LokiBodyGroupsStreamsAndRoundTrips) {
  ForwardTarget t;
  t.kind = ForwardTarget::Kind::kLoki;
  std::string body = ForwardBody(t, {Rec(1, "a"), Rec(2, "b", "WARNING")});
  auto j = nlohmann::json::parse(body);
  ASSERT_EQ(j["streams"].size(), 1u);
  std::vector<Record> out;
  ASSERT_TRUE(ParseLokiJson(body, 0, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].message, "b");
  EXPECT_EQ(out[1].level, "WARNING");
  EXPECT_EQ(out[1].time_ns, 2);
}

TEST(ForwardTest, ReadAfterReturnsEachLineOnceAcrossPartitions) {
  char tmpl[] = "/tmp/tw_forward_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  {
    StoreOptions o;
    o.dir = dir;
    o.sync_full = false;
    auto s = std::move(LogStore::Open(o).value());
    constexpr int64_t kDay = 86400LL * 1000000000;
    ASSERT_TRUE(s->Append({Rec(10 * kDay, "d10 a"), Rec(11 * kDay, "d11 a")}).ok());
    std::map<int64_t, int64_t> pos;
    auto first = s->ReadAfter(&pos, 10);
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->size(), 2u);
    ASSERT_TRUE(s->Append({Rec(10 * kDay + 1, "d10 b")}).ok());  // a late line in an older partition
    auto second = s->ReadAfter(&pos, 10);
    ASSERT_TRUE(second.ok());
    ASSERT_EQ(second->size(), 1u);
    EXPECT_EQ((*second)[0].message, "d10 b");
    EXPECT_TRUE(s->ReadAfter(&pos, 10)->empty());
  }
  (void)file::RemoveAll(dir);
}

}  // namespace
}  // namespace trainwatch::logs
