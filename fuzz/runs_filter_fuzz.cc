// Run filter expressions (runs/filter.h, GET /api/v1/runs?filter=...).
// A refused filter says where and why. An accepted, non-blank filter F is
// evaluated on a few runs, and `not (F)` must parse and give the opposite
// answer on each (the language is two-valued: an absent field makes a
// comparison false, not unknown).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "runs/filter.h"

namespace {
constexpr const char* kTarget = "runs_filter_fuzz";

std::vector<trainwatch::runs::Run> Runs() {
  using trainwatch::runs::Json;
  std::vector<trainwatch::runs::Run> rs(3);
  rs[0].id = "r1";
  rs[0].project = "llama";
  rs[0].name = "lr-sweep-3";
  rs[0].config = Json::parse(R"({"lr": 0.0003, "batch": 256, "opt": {"name": "adamw", "beta2": 0.95}, "fp16": true})");
  rs[0].tags = Json::parse(R"(["llama", "sweep"])");
  rs[0].summary = Json::parse(R"({"loss": 0.41, "acc": "NaN", "n": null})");
  rs[0].step = 1200;
  rs[0].total_steps = 20000;
  rs[0].start_time_ms = 1796218600123;
  rs[0].host = "gpu-node-3";
  rs[1].id = "r2";
  rs[1].project = "x";
  rs[1].name = "b";
  rs[1].status = "failed";
  rs[1].config = Json::parse(R"({"lr": "1e-3", "layers": [1, 2, 3], "e": {}})");
  rs[1].end_time_ms = 1796218700000;
  rs[1].eta_seconds = 12.5;
  rs[2].id = "r3";
  rs[2].name = "\xc3\xa9t\xc3\xa9";
  rs[2].status = "finished";
  return rs;
}

bool Blank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f') return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using trainwatch::runs::Filter;
  static const std::vector<trainwatch::runs::Run> runs = Runs();
  std::string_view q(reinterpret_cast<const char*>(data), size);
  auto f = Filter::Parse(q);
  if (!f.ok()) {
    FUZZ_CHECK_ERROR(f.error());
    FUZZ_CHECK(f.error().message().starts_with("filter: position "), "error without a position: " + f.error().message());
    return 0;
  }
  if (Blank(q)) {
    for (const auto& r : runs) FUZZ_CHECK(f->Matches(r), "a blank filter must match every run");
    return 0;
  }
  auto neg = Filter::Parse("not (" + std::string(q) + ")");
  FUZZ_CHECK(neg.ok(), "not (F) refused: " + neg.error().ToString());
  for (const auto& r : runs) {
    FUZZ_CHECK(f->Matches(r) != neg->Matches(r), "F and not (F) agree on run " + r.id);
  }
  return 0;
}
