#pragma once
// Test-only: the nlohmann::json decoder that ingest used before the one-pass
// decoder (logs/json_record.h), kept verbatim as the oracle of
// json_record_test's differential tests.

#include <cstdint>
#include <string_view>
#include <vector>

#include "logs/json_record.h"

namespace trainwatch::logs::reference {

// The former ParseNativeLine (record.h). May throw std::out_of_range or
// std::invalid_argument from std::stoll for a numeric "time" string of 18 or
// more characters that is no int64 (fixed in the new decoder).
Status ParseNativeLine(std::string_view line, int64_t receive_ns, Record* r, std::vector<model::Label>* extra_labels);
// The former _bulk document path: json::parse, then RecordFromJson with
// `keys`. False when `text` is not a JSON object.
Result<bool> DecodeDocument(std::string_view text, const KeyNames& keys, int64_t receive_ns, Record* r,
                            std::vector<model::Label>* extra_labels);

// The former _bulk action-line reading: false when malformed; else the
// action, its _index (or `default_index`) and its _id (empty when none).
bool BulkAction(std::string_view line, std::string_view default_index, std::string* action, std::string* index,
                std::string* id);

}  // namespace trainwatch::logs::reference
