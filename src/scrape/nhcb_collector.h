#pragma once
// Collates the classic histograms of a text or OpenMetrics scrape into
// native histograms with custom buckets (NHCB, schema -53), as Prometheus
// 3's textparse.NHCBParser does for convert_classic_histograms_to_nhcb.
//
// The caller feeds every metadata line (OnMetadata) and every sample in body
// order: for each sample it first asks Ends(s) and, when true, takes the
// finished histogram with Finish() before Add(s); at the end of the body it
// calls Finish() once more. A sample is part of a histogram when the last
// `# TYPE` line named its family `x` as `histogram` and it is x_bucket with
// a float `le`, x_count or x_sum; consecutive such samples with the same
// other labels make one histogram. It ends at a sample of another family or
// label set, or at any metadata line (a `x_created` sample of its labels
// does not end it: its value is already the samples' start timestamp). A
// histogram that does not convert (buckets not cumulative, _count not the
// +Inf bucket's: model::NhcbBuilder) yields nothing, and its classic series
// are not returned either, as in Prometheus. A bucket whose `le` is not a
// float is not part of the histogram (the caller stores it as a float
// series). Not thread-safe; one per scrape.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/text_parser.h"
#include "model/histogram.h"
#include "model/nhcb.h"

namespace trainwatch::scrape {

class NhcbCollector {
 public:
  // A converted histogram; views are valid until the next call.
  struct Ready {
    // name (the family), labels as the first classic sample had them but
    // `le`, series (Prometheus's `name{a="b"}`, for messages), line (of
    // the first classic sample), its timestamp and start timestamp.
    ingest::TextSample sample;
    // The scrape cache's key: never the text of a sample line.
    std::string_view cache_key;
    model::FloatHistogram histogram;
  };

  void OnMetadata(const ingest::MetadataLine& m);
  // True while the last TYPE line named a histogram family `f` and `series`
  // (a line's series text) starts with f: the caller must not let the
  // parser skip such a line's labels (ParseOptions::known_series).
  bool NeedsLabels(std::string_view series) const;
  // True when a histogram is being collected and `s` ends it.
  bool Ends(const ingest::TextSample& s);
  // The histogram collected so far, converted; nullptr when there is none
  // or it does not convert (then *why says why, else it is cleared).
  // Starts over either way.
  const Ready* Finish(std::string* why);
  // True when `s` is one of a histogram's classic samples (collected).
  bool Add(const ingest::TextSample& s);

 private:
  // The sample's metric name, "" when none.
  static std::string_view NameOf(const ingest::TextSample& s);
  // Its labels but __name__ and le, sorted, joined: the histogram's identity.
  const std::string& KeyOf(const ingest::TextSample& s);

  std::string family_;      // of the last TYPE line when it said histogram, else ""
  uint64_t md_seq_ = 0;     // metadata lines seen
  // The histogram being collected.
  bool active_ = false;
  uint64_t start_md_seq_ = 0;
  std::string base_;  // its family name
  std::string key_;  // KeyOf its first sample
  std::vector<std::pair<std::string, std::string>> labels_;
  ingest::TextSample first_;  // line, timestamps of its first sample
  model::NhcbBuilder builder_;
  // KeyOf's cache: the key of the sample at line key_line_.
  std::string scratch_key_;
  size_t key_line_ = 0;
  std::vector<std::pair<std::string_view, std::string_view>> sorted_;
  // Finish's output.
  std::string display_;
  std::string cache_key_;
  std::vector<ingest::LabelRef> refs_;
  Ready ready_;
};

}  // namespace trainwatch::scrape
