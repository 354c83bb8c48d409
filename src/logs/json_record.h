#pragma once
// Internal: one JSON object -> Record, shared by the native, Elasticsearch
// and Loki ingest paths and the tailer's JSON lines. One strict pass over the
// text (logs/json_scan.h), no tree: fields keep the members' JSON text.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "logs/json_scan.h"
#include "logs/record.h"

namespace trainwatch::logs {

// Which keys of a JSON object carry the time, the level and the message (the
// first present wins); every other key becomes a field, except `label_keys`
// whose string/number values become stream labels, and "labels" (an object
// of strings merged into the stream labels) when `labels_object`. A dotted
// key ("log.level") is looked up flat first, then as a member of an object.
struct KeyNames {
  std::vector<std::string_view> time, level, message, label_keys;
  bool labels_object = false;
};
const KeyNames& NativeKeys();
const KeyNames& ElasticKeys();

// One member of a scanned JSON object; `key` its name decoded.
struct JsonMember {
  std::string_view key_text;  // with its quotes, as sent
  std::string_view key;       // points into key_text or key_buf
  JsonValue value;
  bool live = true;      // false: taken out, or its name is repeated later
  std::string key_buf;   // the name when it holds escapes
  std::string replaced;  // the value's text after a nested member was taken out
};

// Scans `text`, exactly one JSON object with optional surrounding whitespace
// (and a leading UTF-8 byte order mark), into *out in input order; of a
// repeated name all but the last are not live. False when it is not one.
bool ScanJsonObject(std::string_view text, std::vector<JsonMember>* out);
// The live member named `key`, or null.
JsonMember* FindMember(std::vector<JsonMember>& members, std::string_view key);
// A scalar's text: a string's content (decoded into *buf when it has
// escapes), else the value's compact JSON text (in *buf when spaced).
std::string_view JsonScalarText(const JsonValue& v, std::string* buf);

// Decodes JSON objects into Records, keeping its scratch space from one call
// to the next (one decoder per request). Not thread-safe.
class RecordDecoder {
 public:
  // Decodes `text` (as ScanJsonObject takes it): r->time_ns from the first
  // of `keys.time` present (absent or null: `receive_ns`; a null one stays
  // a field), r->level, r->message, stream labels appended to
  // *extra_labels, and the other members as r->fields, `{"name":value,...}`
  // in input order, each value's JSON text as sent minus whitespace. Non-
  // string values used as level, message or label are their JSON text.
  // False when `text` is not a JSON object (r untouched); InvalidArgument
  // naming the field when the time or labels are unusable.
  Result<bool> Decode(std::string_view text, const KeyNames& keys, int64_t receive_ns, Record* r,
                      std::vector<model::Label>* extra_labels);

  // One line of the native format (ParseNativeLine in record.h).
  Status NativeLine(std::string_view line, int64_t receive_ns, Record* r, std::vector<model::Label>* extra_labels);

 private:
  std::vector<JsonMember> members_, labels_;
  std::string found_, text_;  // a nested value's copy; a scalar's decoded text
};

// Sets r->message from `s`, truncating (and flagging) past kMaxMessageBytes;
// invalid UTF-8 becomes U+FFFD.
void SetMessage(Record* r, std::string_view s);

}  // namespace trainwatch::logs
