#pragma once
// Decoding of pushed log batches into Records: the native NDJSON format
// (POST /api/v1/logs), the Elasticsearch _bulk subset that log shippers use
// (index/create actions) and the Loki push API (JSON and snappy-protobuf).
// Each parser decodes the whole body before anything is stored, so a
// rejected body stores nothing. With `bounds`, a line whose time is outside
// them fails the whole body (InvalidArgument naming the line and the bound;
// bounds->rejected says why).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "logs/record.h"
#include "model/labels.h"

namespace trainwatch::logs {

// Body lines (one JSON object each, or plain text) under the `stream` labels.
// InvalidArgument "line N: field \"f\": ..." for a line that cannot be stored.
Status ParseNative(std::string_view body, const model::Labels& stream, int64_t receive_ns, std::vector<Record>* out,
                   TimeBounds* bounds = nullptr);

// One action of a _bulk request and its outcome, for the response.
struct BulkItem {
  std::string action;  // "index", "create", ...
  std::string index;
  std::string id;
  int status = 201;
  std::string error_type, error_reason;  // when status >= 400
};

struct BulkRequest {
  std::vector<Record> records;
  std::vector<BulkItem> items;
};

// Parses an Elasticsearch _bulk NDJSON body. The stream labels of a document
// are `index` (the action's _index, else `default_index` from the URL), the
// document's project/run/rank/host/source/program keys and its "labels"
// object. Documents that cannot be stored fail their own item (status 400).
// InvalidArgument naming the line for a malformed action line (or a document
// outside `bounds`: refusing one document alone would drop it silently, as
// shippers do not retry a 400 item).
Status ParseBulk(std::string_view body, std::string_view default_index, int64_t receive_ns, BulkRequest* out,
                 TimeBounds* bounds = nullptr);
// Elasticsearch's response: {"took","errors","items":[{"<action>":{...,"status"}}]}.
std::string BulkResponseJson(const BulkRequest& req, int64_t took_ms);
// Elasticsearch's error envelope for a request-level failure.
std::string ElasticErrorJson(std::string_view type, std::string_view reason, int status);

// Loki push: {"streams":[{"stream":{...},"values":[["<ns>","line"(,{metadata})]]}]}.
Status ParseLokiJson(std::string_view body, int64_t receive_ns, std::vector<Record>* out, TimeBounds* bounds = nullptr);
// Loki push: snappy-compressed logproto.PushRequest. A body declaring more
// than `max_decoded_bytes` (--web.max-request-body-bytes) is refused before
// it is decoded.
Status ParseLokiProto(std::string_view body, int64_t receive_ns, size_t max_decoded_bytes, std::vector<Record>* out,
                      TimeBounds* bounds = nullptr);

// Stream labels `base` plus `extra` (later names win, an empty value
// deletes), in O(n log n); InvalidArgument for a bad name or a value that is
// not valid UTF-8.
Result<model::Labels> MergeLabels(const model::Labels& base, const std::vector<model::Label>& extra);

}  // namespace trainwatch::logs
