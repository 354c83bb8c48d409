#pragma once
// `trainwatch import tensorboard LOGDIR`: the event files TensorBoard reads
// (`events.out.tfevents.*`, written by TensorFlow's summary writers,
// torch.utils.tensorboard.SummaryWriter, tensorboardX, ...) become trainwatch
// runs, one per directory, through the runs API of a server
// (docs/runs-api.md, "Import"). Parsed by hand: TFRecord framing (length,
// masked CRC-32C of the length, data, masked CRC-32C of the data) around
// tensorboard's Event protos (event.proto, summary.proto, tensor.proto).
// Scalars only: `simple_value` and scalar tensors of DT_FLOAT, DT_DOUBLE,
// DT_INT32, DT_INT64; histograms, images, audio, text, hparams and other
// plugins' values are counted and reported, not imported.

#include <cstdint>
#include <functional>
#include <istream>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "app/import_cmd.h"
#include "base/status.h"

namespace trainwatch::app {

// TFRecord's masked CRC-32C (tensorflow/core/lib/hash/crc32c.h).
uint32_t TfRecordMaskedCrc(std::string_view data);

// Where reading a TFRecord stream stopped.
struct TfRecordEnd {
  bool clean = true;    // false: a corrupt or truncated record at `offset`
  uint64_t offset = 0;  // clean: the stream's size; else where the bad record starts
  std::string error;    // what is wrong there (empty when clean)
};

// Calls fn(offset, data) for each record of the `size` bytes of `in`, in
// order, until the end or the first record whose framing is bad: a short
// header or body (a truncated tail) or a CRC that does not match. Nothing
// after a bad record is read (its length cannot be trusted).
TfRecordEnd ReadTfRecords(std::istream& in, uint64_t size,
                          const std::function<void(uint64_t offset, std::string_view data)>& fn);

// One Summary.Value as far as the import cares.
struct TbValue {
  enum class Kind {
    kNone,    // no value, only metadata (hparams' session infos)
    kScalar,  // simple_value, in `value`
    kHistogram,
    kImage,
    kAudio,
    kTensor,  // a TensorProto: whose it is, `plugin` tells (or the tag's earlier metadata)
  };
  std::string tag;
  Kind kind = Kind::kNone;
  // kScalar: the value; kTensor: the value when scalar_tensor.
  double value = 0;
  // kTensor: a numeric scalar (DT_FLOAT, DT_DOUBLE, DT_INT32 or DT_INT64 with
  // rank 0 or every dimension 1, one value in *_val or tensor_content).
  bool scalar_tensor = false;
  std::string plugin;  // metadata.plugin_data.plugin_name, when the value carries metadata
};

// One Event proto.
struct TbEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;  // "brain.Event:2" in a file's first event
  bool graph = false;        // graph_def, meta_graph_def or tagged_run_metadata
  std::vector<TbValue> values;  // the summary's values
};

// Parses an Event proto (unknown fields skipped); an error when the bytes
// are not a well-formed message.
Status ParseTbEvent(std::string_view data, TbEvent* e);

// A directory of event files, read.
struct TbRun {
  std::string dir;   // absolute
  std::string name;  // relative to the logdir ('/'), or the logdir's name
  std::string id;    // "tb-" + 16 hex digits of a hash of `dir`
  std::vector<std::string> files;  // the event files read, in order
  double start_time = 0, end_time = 0;  // first and last event's wall_time (unix seconds)
  struct Point {
    int64_t step;
    int64_t ts_ms;
    double value;
  };
  // By tag (sorted); points in the order the files hold them (a step written
  // twice, as after a restart, is kept twice: the later one wins on import).
  std::map<std::string, std::vector<Point>> scalars;
  // Values that are not scalars, by kind ("histogram", "image", "audio",
  // "text", "hparams", "graph", or another plugin's name): not imported.
  std::map<std::string, size_t> skipped;
};

// Reads every `events.out.tfevents.*` file under `logdir`, grouped by
// directory (sorted by name, files by name). A corrupt or truncated tail is
// reported in *warnings (file and offset) and the rest of that file skipped;
// an unreadable file or a record that is no Event is reported and skipped. A
// logdir with no event file is an error.
Result<std::vector<TbRun>> ReadTensorboardLogdir(const std::string& logdir, std::vector<std::string>* warnings);

// "12 histogram, 3 image values not imported (scalars only)", or "" when none.
std::string TbSkippedReport(const std::map<std::string, size_t>& skipped);

int RunImportTensorboard(const ImportOptions& o);

}  // namespace trainwatch::app
