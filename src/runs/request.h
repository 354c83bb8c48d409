#pragma once
// The JSON request bodies of the runs API (docs/runs-api.md), parsed and
// validated. A body that is not of the documented shape is InvalidArgument
// naming the field ("points[3].values: expected an object"); inside a batch,
// a value or point the server cannot store is a Rejection instead, and the
// rest of the batch stays valid.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runs/media.h"
#include "runs/run.h"

namespace trainwatch::runs {

// POST /api/v1/runs
struct CreateRequest {
  std::string id, project;
  std::optional<std::string> name, host, command, git_commit;
  std::optional<Json> config;  // object
  std::optional<Json> tags;    // array of strings
  std::optional<int64_t> total_steps, pid, world_size;
  // A rank other than 0 only makes sure the run exists: it never changes the
  // metadata or status of a run rank 0 registered (docs/runs-api.md).
  std::optional<int64_t> rank;
  // `start_time` (unix seconds): the run's own start, for runs imported from
  // another tracker; used when the run is created, ignored on a resume.
  std::optional<int64_t> start_time_ms;
};
Result<CreateRequest> ParseCreateRequest(std::string_view body);

struct BatchValue {
  std::string metric;  // KeyToMetricName(key)
  double value;
};
struct BatchPoint {
  size_t index;      // in the request's points array
  int64_t step;
  int64_t ts_ms;
  std::vector<BatchValue> values;
  std::vector<std::pair<std::string, double>> keyed;  // (key, value) for the summary
  std::vector<RichValue> rich;  // histograms, images, text, tables (runs/media.h)
};
struct Rejection {
  size_t point;
  std::optional<std::string> key;  // absent: the whole point
  std::string error;
};
// POST /api/v1/runs/{id}/batches
struct BatchRequest {
  std::string batch_id;
  std::optional<int64_t> rank;
  std::string host;
  std::vector<BatchPoint> points;  // the storable ones, in request order
  std::vector<Rejection> rejected;
  Json summary = Json::object();
  size_t num_values() const;
};
Result<BatchRequest> ParseBatchRequest(std::string_view body);
Json RejectionsJson(const std::vector<Rejection>& r);

// POST /api/v1/runs/{id}/finish
struct FinishRequest {
  std::string status;  // finished or failed
  Json summary = Json::object();
  std::optional<int64_t> end_time_ms;  // `end_time` (unix seconds); default: now
};
Result<FinishRequest> ParseFinishRequest(std::string_view body);

// POST /api/v1/runs/{id}/alerts
Result<RunAlert> ParseAlertRequest(std::string_view body);

// POST /api/v1/runs/{id}/heartbeat: an empty body or {"rank": n} (default 0).
struct HeartbeatRequest {
  int64_t rank = 0;
};
Result<HeartbeatRequest> ParseHeartbeatRequest(std::string_view body);

// POST /api/v1/runs/{id}/actions/{n}: {"rank": n, "status": "done" | "failed"
// | "unhandled", "result": "..."}.
struct ActionAck {
  int64_t rank = 0;
  std::string status, result;
};
Result<int64_t> ParseActionId(std::string_view text);
Result<ActionAck> ParseActionAck(std::string_view body);

// POST /api/v1/runs/{id}/artifacts
struct ArtifactRequest {
  std::string name, type, sha256, uri;
  int64_t size = 0;
  Json metadata = Json::object();
};
Result<ArtifactRequest> ParseArtifactRequest(std::string_view body);
// POST /api/v1/runs/{id}/artifacts/use: version absent: the latest.
struct ArtifactUse {
  std::string name;
  std::optional<int64_t> version;
  std::optional<std::string> sha256;
};
Result<ArtifactUse> ParseArtifactUse(std::string_view body);

}  // namespace trainwatch::runs
