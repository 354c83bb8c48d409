#include "base/memory.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/file.h"

namespace trainwatch::memory {
namespace {

class MemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_memory_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(file::MkdirAll(dir_ + "/proc/self").ok());
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    size_t slash = rel.rfind('/');
    ASSERT_TRUE(file::MkdirAll(dir_ + "/" + rel.substr(0, slash)).ok());
    ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/" + rel, text, file::Sync::kNo).ok());
  }
  std::string dir_;
};

TEST_F(MemoryTest, AnonRssFromProcStatm) {
  EXPECT_EQ(ProcessAnonRss(dir_ + "/proc"), 0u);  // no file: unknown
  Write("proc/self/statm", "250000 9000 7766 300 0 120000 0\n");  // resident 9000 pages, 7766 of files
  EXPECT_EQ(ProcessAnonRss(dir_ + "/proc"), uint64_t{1234} * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  // This test process, from the real /proc: statm agrees with RssAnon in status (within 1 MiB: they are
  // read one after the other).
  std::string status;
  ASSERT_TRUE(file::ReadFile("/proc/self/status", &status).ok());
  size_t at = status.find("RssAnon:");
  ASSERT_NE(at, std::string::npos);
  const uint64_t rss_anon = std::stoull(status.substr(at + 8)) * 1024;
  const uint64_t got = ProcessAnonRss();
  EXPECT_GT(got, 0u);
  EXPECT_LT(got > rss_anon ? got - rss_anon : rss_anon - got, uint64_t{1} << 20);
}

TEST_F(MemoryTest, AllowedIsTheSmallerOfMemTotalAndTheCgroupLimit) {
  Write("proc/meminfo", "MemTotal:       16000000 kB\nMemFree:         100 kB\n");
  const std::string proc = dir_ + "/proc", cg = dir_ + "/cg";
  Write("proc/self/cgroup", "0::/\n");
  EXPECT_EQ(Allowed(proc, cg), uint64_t{16000000} * 1024);  // no memory.max file: the machine's
  Write("cg/memory.max", "max\n");
  EXPECT_EQ(Allowed(proc, cg), uint64_t{16000000} * 1024);
  Write("proc/self/cgroup", "0::/system.slice/tw.service\n");
  Write("cg/system.slice/tw.service/memory.max", "4294967296\n");
  EXPECT_EQ(Allowed(proc, cg), 4294967296u);
  // cgroup v1: the memory controller's hierarchy.
  Write("proc/self/cgroup", "12:cpu,cpuacct:/x\n4:memory:/docker/abc\n");
  Write("cg/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
  EXPECT_EQ(Allowed(proc, cg), 2147483648u);
  Write("cg/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  EXPECT_EQ(Allowed(proc, cg), uint64_t{16000000} * 1024);
}

TEST(MemoryBoundTest, PercentSizeOrNone) {
  EXPECT_EQ(*ParseMemoryBound("80%", 1000), 800u);
  EXPECT_EQ(*ParseMemoryBound("100%", 1000), 1000u);
  EXPECT_EQ(*ParseMemoryBound("80%", 0), 0u);  // allowed unknown: no bound
  EXPECT_EQ(*ParseMemoryBound("8GiB", 1000), uint64_t{8} << 30);
  EXPECT_EQ(*ParseMemoryBound("0", 1000), 0u);
  for (const char* bad : {"", "%", "101%", "-5%", "8 apples", "80"}) {
    auto r = ParseMemoryBound(bad, 1000);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message().find("invalid memory bound"), std::string::npos) << r.error().message();
  }
}

TEST(LargeBlockAllocatorTest, LargeBlocksAreAlignedMapsAndKeepTheirContents) {
  std::vector<uint64_t, LargeBlockAllocator<uint64_t>> v;
  for (uint64_t i = 0; i < (uint64_t{3} << 20); i++) {  // 24 MiB: grows through small and large blocks
    v.push_back(i * 2654435761u);
    if (v.capacity() * sizeof(uint64_t) >= kLargeBlock) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (uintptr_t{2} << 20), 0u) << v.capacity();
    }
  }
  for (uint64_t i = 0; i < v.size(); i++) ASSERT_EQ(v[i], i * 2654435761u) << i;
  v.resize(10);
  v.shrink_to_fit();  // back to a small block
  EXPECT_EQ(v[9], 9 * uint64_t{2654435761u});
  std::vector<uint64_t, LargeBlockAllocator<uint64_t>> w(kLargeBlock / sizeof(uint64_t), 7);
  w.swap(v);
  EXPECT_EQ(v.back(), 7u);
  EXPECT_EQ(w.size(), 10u);
}

// serve's trim waits a quiet minute after a user's query unless free memory
// is over kTrimFloor and a quarter of the heap in use.
TEST(TrimTest, QueriesHoldOffTheTrimUnlessMuchIsFree) {
  constexpr int64_t kQuiet = 60'000'000'000;
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  EXPECT_TRUE(ShouldTrim(kQuiet, kQuiet, 0, kGiB));                 // quiet long enough
  EXPECT_TRUE(ShouldTrim(INT64_MAX, kQuiet, 0, kGiB));              // never queried
  EXPECT_FALSE(ShouldTrim(kQuiet - 1, kQuiet, kGiB / 4, kGiB));     // a query just now, a quarter free
  EXPECT_TRUE(ShouldTrim(kQuiet - 1, kQuiet, kGiB / 4 + 1, kGiB));  // more than a quarter free
  EXPECT_FALSE(ShouldTrim(0, kQuiet, kTrimFloor, kTrimFloor));      // a small heap: up to the floor kept
  EXPECT_TRUE(ShouldTrim(0, kQuiet, kTrimFloor + 1, kTrimFloor));
  EXPECT_FALSE(ShouldTrim(0, kQuiet, 0, 0));

  NoteQuery();
  EXPECT_GE(SinceQueryNs(), 0);
  EXPECT_LT(SinceQueryNs(), kQuiet);
}

// What the heap holds: a block in use counts.
TEST(TrimTest, HeapBytesCountABlockInUse) {
#if defined(TW_SANITIZE)
  GTEST_SKIP() << "ASan's allocator reports nothing through mallinfo2";
#endif
  uint64_t free0 = 0, used0 = 0, free1 = 0, used1 = 0;
  HeapBytes(&free0, &used0);
  auto* block = new std::vector<char>(8 << 20, 'x');
  HeapBytes(&free1, &used1);
  EXPECT_GE(used1, used0 + (8 << 20));
  delete block;
}

}  // namespace
}  // namespace trainwatch::memory
