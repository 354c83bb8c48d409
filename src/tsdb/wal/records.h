#pragma once
// The TSDB head's WAL record encodings: series (ref -> labels) and samples
// (ref, t, v). The first byte of a record is its RecordType. Byte layout:
// docs/format/wal.md. Decoders reject malformed input with a Corruption
// status and never read out of bounds.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/histogram.h"
#include "model/labels.h"

namespace trainwatch::wal {

enum class RecordType : uint8_t {
  kUnknown = 0,  // never written: empty or unrecognised record
  kSeries = 1,
  // Type byte 2, or 3 for the layout led by the latest timestamp in the
  // record (written since the chunk log: replay passes over a record whose
  // samples the log holds without decoding it). Both decode alike.
  kSamples = 2,
  // Float native-histogram samples (ref, t, the whole histogram); type 4.
  // Versions before it skip the record (unknown type) on replay.
  kHistogramSamples = 4,
  // Float samples with their start timestamps (ref, t, v, st); type 5. Led
  // by the latest timestamp like samples records. A commit logs its
  // samples without a start timestamp in a samples record, the others here.
  kSamplesST = 5,
  // (Histogram samples records with start timestamps have type byte 6 and
  // decode as kHistogramSamples.)
};

struct RefSeries {
  uint64_t ref = 0;
  model::Labels labels;
  bool operator==(const RefSeries&) const = default;
};

struct RefSample {
  uint64_t ref = 0;
  int64_t t = 0;  // unix milliseconds
  double v = 0;   // kept bit-exact, NaN payloads included
};

struct RefHistogramSample {
  uint64_t ref = 0;
  int64_t t = 0;  // unix milliseconds
  model::FloatHistogram h;  // every field kept bit-exact, counter_reset_hint and custom_values included
  int64_t st = 0;  // start timestamp, unix milliseconds (0: none)
};

struct RefSampleST {
  uint64_t ref = 0;
  int64_t t = 0;  // unix milliseconds
  double v = 0;   // kept bit-exact
  int64_t st = 0;  // start timestamp, unix milliseconds (0: none)
};

// Type of an encoded record; kUnknown for an empty record or a type byte
// this version does not know (the caller skips it or reports it).
RecordType Type(std::string_view rec);

// Replace *out with the encoded record (its capacity is reused).
void EncodeSeries(const std::vector<RefSeries>& series, std::string* out);
void EncodeSamples(const std::vector<RefSample>& samples, std::string* out);

// Replaces *out with a series record of (ref, labels encoded by
// model::AppendEncodedLabels) pairs; equal to EncodeSeries of the same series.
void EncodeSeriesEncoded(const std::vector<std::pair<uint64_t, std::string_view>>& series, std::string* out);

// Replace *out with the decoded entries. Corruption on a wrong type byte,
// truncated or trailing bytes, or invalid labels (empty or unsorted or
// duplicate names).
Status DecodeSeries(std::string_view rec, std::vector<RefSeries>* out);
Status DecodeSamples(std::string_view rec, std::vector<RefSample>* out);
// Samples-with-start-timestamps records (type 5); corruption as DecodeSamples.
void EncodeSamplesST(const std::vector<RefSampleST>& samples, std::string* out);
Status DecodeSamplesST(std::string_view rec, std::vector<RefSampleST>* out);
bool SamplesSTMaxTime(std::string_view rec, int64_t* maxt);
// Histogram samples records (type 4, or 6 when a sample has a start
// timestamp), led by their latest timestamp like samples records. Corruption as DecodeSamples, and on a histogram whose
// spans do not add up to its buckets, an unknown hint, or a schema, span
// offset or length out of range.
void EncodeHistogramSamples(const std::vector<RefHistogramSample>& samples, std::string* out);
Status DecodeHistogramSamples(std::string_view rec, std::vector<RefHistogramSample>* out);
// The latest timestamp in a histogram samples record, from its head.
bool HistogramSamplesMaxTime(std::string_view rec, int64_t* maxt);
// One histogram as these records hold it (also used by the chunk log):
// appended to *out / consumed from the front of *in. Get returns an empty
// string on success, else what is wrong.
void PutHistogram(std::string* out, const model::FloatHistogram& h);
std::string GetHistogram(std::string_view* in, model::FloatHistogram* h);

// The latest timestamp in a samples record, read from its head; false for
// the older layout that does not carry it, or a malformed head.
bool SamplesMaxTime(std::string_view rec, int64_t* maxt);

}  // namespace trainwatch::wal
