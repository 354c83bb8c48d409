#pragma once
// `trainwatch import tensorboard LOGDIR`: the event files TensorBoard reads
// (`events.out.tfevents.*`, written by TensorFlow's summary writers,
// torch.utils.tensorboard.SummaryWriter, tensorboardX, ...) become trainwatch
// runs, one per directory, through the runs API of a server
// (docs/runs-api.md, "Import"). Parsed by hand: TFRecord framing (length,
// masked CRC-32C of the length, data, masked CRC-32C of the data) around
// tensorboard's Event protos (event.proto, summary.proto, tensor.proto,
// histogram.proto, plugins/hparams/plugin_data.proto). Imported: scalars
// (`simple_value` and scalar tensors of DT_FLOAT, DT_DOUBLE, DT_INT32,
// DT_INT64), histograms (HistogramProto and the histograms plugin's [k, 3]
// tensors), images (Summary.Image and the images plugin's string tensors,
// PNG and JPEG), text (the text plugin's string tensors: text, or a table
// when 2-D) as rich values, and hparams (the session start info's map) as
// the run's config. Audio, graphs and other plugins' values are counted and
// reported, not imported.

#include <cstdint>
#include <functional>
#include <istream>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

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

// A HistogramProto (histogram.proto): bucket i counts the values in
// (bucket_limit[i-1], bucket_limit[i]]; the first bucket's lower edge is min.
struct TbHistogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> limits;  // bucket_limit
  std::vector<double> counts;  // bucket
};

// A Summary.Image: the encoded file (PNG, JPEG or GIF as the writer chose).
struct TbImage {
  int64_t height = 0, width = 0, colorspace = 0;
  std::string encoded;
};

// A TensorProto, decoded as far as the import needs: numeric tensors of
// DT_FLOAT, DT_DOUBLE, DT_INT32 and DT_INT64 (from tensor_content or the
// *_val fields, a short *_val list padded with its last value as TensorFlow
// does) and DT_STRING tensors.
struct TbTensor {
  int dtype = 0;
  std::vector<int64_t> dims;  // the shape; empty: a scalar
  std::vector<double> numbers;       // numeric dtypes: every element, row-major
  std::vector<std::string> strings;  // DT_STRING: every element, row-major
};
// An error when the bytes are malformed, the shape is unknown, or the values
// do not fill the shape (or the dtype is none of the above).
Status ParseTbTensor(std::string_view data, TbTensor* t);

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
  std::string plugin_content;  // metadata.plugin_data.content (hparams: an HParamsPluginData)
  std::string tensor;          // kTensor: the TensorProto's bytes
  TbHistogram histo;           // kHistogram
  TbImage image;               // kImage
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

// Rich values (docs/runs-api.md, "Rich values") from what the writers
// write; each an error saying why the value cannot be imported.
// HistogramProto -> {"_type": "histogram", "buckets": [[lower, upper, count]]}:
// every bucket kept (empty ones too), edges clamped into [min, max] so no
// +-DBL_MAX limit goes out; more than 4096 buckets are merged in groups.
Result<nlohmann::json> TbHistogramValue(const TbHistogram& h);
// The histograms plugin's tensor: shape [k, 3] of (left, right, count).
Result<nlohmann::json> TbTensorHistogramValue(const TbTensor& t);
// "png" or "jpeg" by the bytes' signature; "" for anything else.
std::string TbImageFormat(std::string_view bytes);
// {"_type": "image", "format", "data": base64}; an error for what is neither
// PNG nor JPEG or is over the server's 16 MiB.
Result<nlohmann::json> TbImageValue(std::string_view encoded);
// The images plugin's tensor: DT_STRING [width, height, image, image, ...]:
// the images.
Result<std::vector<std::string>> TbTensorImages(const TbTensor& t);
// The text plugin's tensor (DT_STRING): a scalar is the text, a vector its
// elements joined by newlines, a matrix a table (columns "0", "1", ...).
Result<nlohmann::json> TbTextValue(const TbTensor& t);
// The hparams plugin's content (HParamsPluginData): a session start info's
// hparams as a JSON object into *config (merged: later keys win); true when
// it was one. Experiment and session end infos are read and nothing taken.
Result<bool> TbHparams(std::string_view content, nlohmann::json* config);

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
  struct RichPoint {
    int64_t step;
    int64_t ts_ms;
    nlohmann::json value;  // {"_type": ...}
  };
  // Histograms, images and text by key (sorted), in file order like scalars.
  // Key: the tag; an images-plugin tensor of several images puts the first
  // under the tag and image i (i >= 1) under "<tag>/<i>".
  std::map<std::string, std::vector<RichPoint>> media;
  nlohmann::json config = nlohmann::json::object();  // the hparams
  // Values not imported, by kind ("audio", "graph", another plugin's name,
  // or why: "malformed histogram", "image (not PNG or JPEG)", ...).
  std::map<std::string, size_t> skipped;
};

// Reads every `events.out.tfevents.*` file under `logdir`, grouped by
// directory (sorted by name, files by name). A corrupt or truncated tail is
// reported in *warnings (file and offset) and the rest of that file skipped;
// an unreadable file or a record that is no Event is reported and skipped. A
// logdir with no event file is an error.
Result<std::vector<TbRun>> ReadTensorboardLogdir(const std::string& logdir, std::vector<std::string>* warnings);

// "3 audio, 1 graph values not imported", or "" when none.
std::string TbSkippedReport(const std::map<std::string, size_t>& skipped);

int RunImportTensorboard(const ImportOptions& o);

}  // namespace trainwatch::app
