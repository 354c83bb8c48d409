// Block index files (tsdb/index/index_reader.h). Input: a mode byte, then
// the file. Mode bit 0 set: Open verifies every section's CRC32C (a mutated
// file is then mostly refused at Open); clear: it does not, and the reader
// must still never crash on damaged data ("wrong data, never a crash").
// An opened index is read the way queries read it: label names and values,
// postings of each pair, all postings, series labels and chunk metas,
// PostingsForMatchers. Postings handed out must be sorted without
// duplicates (the postings algebra requires it) and name series that exist.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/file.h"  // MmapFile, complete for the readers' unique_ptr
#include "fuzz_util.h"
#include "model/matcher.h"
#include "tsdb/index/index_reader.h"

namespace {
constexpr const char* kTarget = "index_fuzz";
namespace index = trainwatch::index;

void CheckPostings(const trainwatch::Result<index::Postings>& p, uint64_t num_series, const char* what) {
  if (!p.ok()) {
    FUZZ_CHECK_ERROR(p.error());
    return;
  }
  for (size_t i = 0; i < p->size(); i++) {
    FUZZ_CHECK((*p)[i] < num_series, std::string(what) + ": posting past the last series");
    FUZZ_CHECK(i == 0 || (*p)[i - 1] < (*p)[i], std::string(what) + ": postings unsorted or repeated");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const std::string path = trainwatch::fuzz::ScratchDir() + "/index";
  trainwatch::fuzz::WriteScratchFile(path, std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  index::IndexReader::Options opts;
  opts.verify_checksums = (data[0] & 1) != 0;
  auto r = index::IndexReader::Open(path, opts);
  if (!r.ok()) {
    FUZZ_CHECK_ERROR(r.error());
    return 0;
  }
  const index::IndexReader& ix = **r;
  const uint64_t n = ix.NumSeries();
  std::vector<std::string> names = ix.LabelNames();
  size_t budget = 512;  // bounds the work per input (a valid index may be large)
  for (const std::string& name : names) {
    auto values = ix.LabelValues(name);
    if (!values.ok()) {
      FUZZ_CHECK_ERROR(values.error());
      continue;
    }
    for (const std::string& v : *values) {
      if (budget-- == 0) break;
      CheckPostings(ix.Postings(name, v), n, "Postings");
    }
    if (budget == 0) break;
  }
  CheckPostings(ix.AllPostings(), n, "AllPostings");
  trainwatch::model::Labels labels;
  std::vector<index::ChunkMeta> chunks;
  for (uint64_t id = 0; id < n && id < 256; id++) {
    trainwatch::Status s = ix.Series(id, &labels, &chunks);
    if (!s.ok()) FUZZ_CHECK_ERROR(s);
  }
  FUZZ_CHECK(ix.Series(n, &labels, &chunks).IsNotFound(), "Series(NumSeries()) is not NotFound");
  if (!names.empty()) {
    trainwatch::model::Matchers ms;
    ms.push_back(*trainwatch::model::Matcher::Make(trainwatch::model::MatchType::kRegex, names[0], ".+"));
    ms.push_back(*trainwatch::model::Matcher::Make(trainwatch::model::MatchType::kNotEqual, names.back(), "x"));
    CheckPostings(ix.PostingsForMatchers(ms), n, "PostingsForMatchers");
  }
  return 0;
}
