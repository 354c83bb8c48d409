// Log store benchmark (docs/performance.md): ingest lines/s on one thread for
// a training-log mix, bytes on disk per line vs the raw NDJSON, and the query
// "level=ERROR and CUDA" beside `grep -c` (and `rg -c` when installed) over
// the raw file, in the same run.
//
//   logs_bench [--lines N] [--dir DIR] [--batch B] [--sync full|normal]

#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/file.h"
#include "logs/query.h"
#include "logs/shippers.h"
#include "logs/store.h"

using namespace trainwatch;

namespace {

// CPU seconds of this process (the machine may be shared: lines per CPU-second is what one core does).
double Cpu() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// User and system CPU seconds of this process: fsync, WAL writes and
// checkpoints show as system time.
void UserSys(double* user, double* sys) {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  *user = static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) / 1e6;
  *sys = static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) / 1e6;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One line of a training job's log: mostly step lines, some data-loader and
// checkpoint chatter, warnings, rare errors (1 in 2000 a CUDA error).
std::string MakeLine(uint64_t i, std::mt19937_64& rng, int64_t t_ns) {
  char buf[512];
  double ts = static_cast<double>(t_ns) / 1e9;
  uint64_t r = rng() % 2000;
  if (r == 0) {
    std::snprintf(buf, sizeof buf,
                  "{\"time\":%.6f,\"level\":\"error\",\"message\":\"RuntimeError: CUDA error: an illegal memory access "
                  "was encountered (step %llu)\",\"step\":%llu}",
                  ts, static_cast<unsigned long long>(i), static_cast<unsigned long long>(i));
  } else if (r < 20) {
    std::snprintf(buf, sizeof buf,
                  "{\"time\":%.6f,\"level\":\"error\",\"message\":\"dataloader worker %llu exited unexpectedly\"}", ts,
                  static_cast<unsigned long long>(rng() % 16));
  } else if (r < 80) {
    std::snprintf(buf, sizeof buf,
                  "{\"time\":%.6f,\"level\":\"warning\",\"message\":\"grad norm %.3f above clip threshold 1.0\"}", ts,
                  1.0 + static_cast<double>(rng() % 1000) / 100);
  } else if (r < 100) {
    std::snprintf(buf, sizeof buf,
                  "{\"time\":%.6f,\"level\":\"info\",\"message\":\"saved checkpoint to /ckpt/run-42/step_%llu.pt\"}", ts,
                  static_cast<unsigned long long>(i));
  } else {
    std::snprintf(buf, sizeof buf,
                  "{\"time\":%.6f,\"level\":\"info\",\"message\":\"step %llu loss %.4f lr %.2e tokens/s %llu\","
                  "\"step\":%llu,\"loss\":%.4f}",
                  ts, static_cast<unsigned long long>(i), 2.0 / (1 + static_cast<double>(i) / 1e5) + (rng() % 100) / 1e4,
                  3e-4, static_cast<unsigned long long>(180000 + rng() % 5000), static_cast<unsigned long long>(i),
                  2.0 / (1 + static_cast<double>(i) / 1e5));
  }
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 1000000;
  size_t batch = 5000;
  std::string dir = "/tmp/tw-logs-bench";
  bool sync_full = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--lines")) n = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--batch")) batch = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--sync")) sync_full = std::strcmp(argv[i + 1], "normal") != 0;
  }
  (void)file::RemoveAll(dir);
  (void)file::MkdirAll(dir);
  std::string raw_path = dir + "/raw.ndjson";
  // Generate the raw file first (not timed).
  std::mt19937_64 rng(42);
  int64_t t0 = (static_cast<int64_t>(std::time(nullptr)) - 3600) * 1000000000LL;
  {
    std::ofstream raw(raw_path);
    for (uint64_t i = 0; i < n; ++i) raw << MakeLine(i, rng, t0 + static_cast<int64_t>(i) * 100000) << '\n';
  }
  std::string body;
  if (Status s = file::ReadFile(raw_path, &body); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  logs::StoreOptions o;
  o.dir = dir + "/store";
  o.sync_full = sync_full;
  auto store = logs::LogStore::Open(o);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.error().ToString().c_str());
    return 1;
  }
  model::Labels stream{{"project", "bench"}, {"run", "r1"}, {"rank", "0"}, {"host", "n1"}, {"source", "stdout"}};
  // Ingest: parse + store, in request-sized batches, on this one thread.
  double start = Now(), cpu0 = Cpu(), user0, sys0;
  UserSys(&user0, &sys0);
  size_t pos = 0;
  uint64_t stored = 0;
  double parse_cpu = 0;  // CPU seconds, as the machine may be shared
  while (pos < body.size()) {
    size_t end = pos;
    for (size_t k = 0; k < batch && end < body.size(); ++k) {
      size_t nl = body.find('\n', end);
      end = nl == std::string::npos ? body.size() : nl + 1;
    }
    std::vector<logs::Record> recs;
    recs.reserve(batch);
    double p0 = Cpu();
    Status s = logs::ParseNative(std::string_view(body).substr(pos, end - pos), stream, 0, &recs);
    parse_cpu += Cpu() - p0;
    if (s.ok()) stored += recs.size(), s = (*store)->Append(std::move(recs));
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    pos = end;
  }
  double ingest_s = Now() - start, ingest_cpu = Cpu() - cpu0, user1, sys1;
  UserSys(&user1, &sys1);
  auto stats = (*store)->GetStats();
  std::printf("lines                 %llu\n", static_cast<unsigned long long>(stored));
  std::printf("ingest                %.2f s, %.0f lines/s (batch %zu, synchronous=%s)\n", ingest_s,
              static_cast<double>(stored) / ingest_s, batch, sync_full ? "FULL" : "NORMAL");
  std::printf("ingest CPU            %.2f s, %.0f lines per CPU-second (user %.2f s, system %.2f s)\n", ingest_cpu,
              static_cast<double>(stored) / ingest_cpu, user1 - user0, sys1 - sys0);
  std::printf("  of which parsing     %.2f s (%.0f lines per CPU-second)\n", parse_cpu,
              static_cast<double>(stored) / parse_cpu);
  std::printf("raw bytes/line        %.1f\n", static_cast<double>(body.size()) / static_cast<double>(stored));
  std::printf("stored bytes/line     %.1f (%.2fx raw; %llu partitions)\n",
              static_cast<double>(stats.bytes) / static_cast<double>(stored),
              static_cast<double>(stats.bytes) / static_cast<double>(body.size()),
              static_cast<unsigned long long>(stats.partitions));
  auto q = logs::Query::Parse("level=ERROR and CUDA");
  logs::SelectOptions so;
  so.limit = 100;
  for (int rep = 0; rep < 2; ++rep) {  // the second run is with a warm page cache
    start = Now();
    auto r = (*store)->Select(*q, so);
    double qs = Now() - start;
    start = Now();
    auto h = (*store)->Histogram(*q, t0, t0 + static_cast<int64_t>(n) * 100000, 60 * 1000000000LL);
    double hs = Now() - start;
    uint64_t total = 0;
    for (auto& [t, c] : *h) total += c;
    std::printf("query level=ERROR and CUDA  %.1f ms (newest %zu lines); histogram count %llu in %.1f ms\n", qs * 1e3,
                r->lines.size(), static_cast<unsigned long long>(total), hs * 1e3);
  }
  // Reopened: SQLite's page cache is empty (the OS page cache is not).
  store->reset();
  double o0 = Now();
  store = logs::LogStore::Open(o);
  double open_s = Now() - o0;
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.error().ToString().c_str());
    return 1;
  }
  start = Now();
  auto r = (*store)->Select(*q, so);
  std::printf("after reopen (%.1f ms)   %.1f ms (newest %zu lines)\n", open_s * 1e3, (Now() - start) * 1e3,
              r->lines.size());
  std::vector<std::string> cmds = {"grep -c 'CUDA' ", "grep -c '\"level\":\"error\".*CUDA' "};
  if (std::system("command -v rg >/dev/null 2>&1") == 0) {
    cmds.push_back("rg -c 'CUDA' ");
    cmds.push_back("rg -c '\"level\":\"error\".*CUDA' ");
  }
  for (const std::string& cmd : cmds) {
    std::string c = cmd + raw_path;
    start = Now();
    FILE* p = popen(c.c_str(), "r");
    char out[64] = {0};
    if (p && std::fgets(out, sizeof out, p)) {
    }
    if (p) pclose(p);
    out[std::strcspn(out, "\n")] = 0;
    std::printf("%-45s %.1f ms (count %s)\n", c.substr(0, c.size() - raw_path.size()).c_str(), (Now() - start) * 1e3, out);
  }
  return 0;
}
