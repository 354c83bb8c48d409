#pragma once
// Internal: a decoded JSON object -> Record, shared by the native, Elasticsearch
// and Loki ingest paths.

#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "logs/record.h"

namespace trainwatch::logs {

// Which keys of a JSON object carry the time, the level and the message (the
// first present wins); every other key becomes a field, except `label_keys`
// whose string/number values become stream labels, and "labels" (an object
// of strings merged into the stream labels) when `labels_object`.
struct KeyNames {
  std::vector<std::string_view> time, level, message, label_keys;
  bool labels_object = false;
};
const KeyNames& NativeKeys();
const KeyNames& ElasticKeys();

// Fills *r from `obj` (REQUIRES: an object). A missing time is `receive_ns`.
// InvalidArgument naming the field when the time or labels are unusable.
Status RecordFromJson(nlohmann::json& obj, const KeyNames& keys, int64_t receive_ns, Record* r,
                      std::vector<model::Label>* extra_labels);

// Sets r->message from `s`, truncating (and flagging) past kMaxMessageBytes.
void SetMessage(Record* r, std::string_view s);

}  // namespace trainwatch::logs
