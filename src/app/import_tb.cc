#include "app/import_tb.h"


#include <httplib.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>

#include "app/api_client.h"
#include "base/base64.h"
#include "base/coding.h"
#include "base/crc32c.h"
#include "runs/run.h"

namespace trainwatch::app {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr size_t kBatchPoints = 5000;
// A batch of rich values stops growing past this much JSON (an image is
// up to 16 MiB of bytes, a third more in base64; the server takes 256 MiB).
constexpr size_t kBatchBytes = 8u << 20;
// The server's limits (docs/runs-api.md, "Rich values").
constexpr size_t kMaxBuckets = 4096;
constexpr size_t kMaxImageBytes = 16u << 20;
constexpr size_t kMaxTextBytes = 1u << 20;
constexpr size_t kMaxColumns = 1000;
constexpr size_t kMaxCells = 100000;
// Elements a tensor may have when decoded (a histogram, a few images, a text table).
constexpr uint64_t kMaxTensorElements = 1u << 24;

// ---- protobuf wire format, as far as event.proto needs it ----

enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// One field of a message: its number, wire type and payload.
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t varint = 0;    // kVarint, kFixed64 (raw bits), kFixed32 (raw bits)
  std::string_view bytes;  // kBytes
};

// Reads the next field off *in; false at a malformed field (groups included:
// event.proto has none).
bool NextField(std::string_view* in, Field* f) {
  uint64_t key;
  if (!GetVarint64(in, &key) || key >> 32 != 0) return false;
  f->number = static_cast<uint32_t>(key >> 3);
  f->wire = static_cast<uint32_t>(key & 7);
  if (f->number == 0) return false;
  switch (f->wire) {
    case kVarint: return GetVarint64(in, &f->varint);
    case kFixed64: return GetFixed64(in, &f->varint);
    case kFixed32: {
      uint32_t v;
      if (!GetFixed32(in, &v)) return false;
      f->varint = v;
      return true;
    }
    case kBytes: {
      uint64_t n;
      if (!GetVarint64(in, &n) || n > in->size()) return false;
      f->bytes = in->substr(0, n);
      in->remove_prefix(n);
      return true;
    }
    default: return false;
  }
}

float BitsToFloat(uint32_t b) {
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

double BitsToDouble(uint64_t b) {
  double v;
  std::memcpy(&v, &b, 8);
  return v;
}

// The values of a repeated numeric field, packed (kBytes) or not.
bool AppendRepeated(const Field& f, uint32_t element_wire, std::vector<uint64_t>* out) {
  if (f.wire == element_wire) {
    out->push_back(f.varint);
    return true;
  }
  if (f.wire != kBytes) return true;  // a wire type this field never has: ignored, as protobuf does
  std::string_view p = f.bytes;
  while (!p.empty()) {
    uint64_t v;
    bool ok = element_wire == kVarint    ? GetVarint64(&p, &v)
              : element_wire == kFixed64 ? GetFixed64(&p, &v)
                                         : [&] {
                                             uint32_t w;
                                             bool r = GetFixed32(&p, &w);
                                             v = w;
                                             return r;
                                           }();
    if (!ok) return false;
    out->push_back(v);
  }
  return true;
}

constexpr int kDtFloat = 1, kDtDouble = 2, kDtInt32 = 3, kDtInt64 = 9;

// TensorProto: a numeric scalar (DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64 of
// one element: rank 0, or every dimension 1) into *value; false otherwise.
// *ok is false when the bytes are malformed.
bool ScalarTensor(std::string_view in, double* value, bool* ok) {
  int64_t dtype = 0;
  int64_t elements = 1;
  std::string_view content;
  std::vector<uint64_t> vals[4];  // float_val, double_val, int_val, int64_val
  Field f;
  while (!in.empty()) {
    if (!NextField(&in, &f)) return *ok = false;
    switch (f.number) {
      case 1:
        if (f.wire == kVarint) dtype = static_cast<int64_t>(f.varint);
        break;
      case 2: {  // TensorShapeProto: dim = 2 (Dim: size = 1), unknown_rank = 3
        if (f.wire != kBytes) break;
        std::string_view shape = f.bytes;
        Field d;
        while (!shape.empty()) {
          if (!NextField(&shape, &d)) return *ok = false;
          if (d.number == 3 && d.wire == kVarint && d.varint != 0) elements = -1;
          if (d.number != 2 || d.wire != kBytes) continue;
          std::string_view dim = d.bytes;
          int64_t size = 0;
          Field s;
          while (!dim.empty()) {
            if (!NextField(&dim, &s)) return *ok = false;
            if (s.number == 1 && s.wire == kVarint) size = static_cast<int64_t>(s.varint);
          }
          if (size != 1) elements = -1;
        }
        break;
      }
      case 4:
        if (f.wire == kBytes) content = f.bytes;
        break;
      case 5:
        if (!AppendRepeated(f, kFixed32, &vals[0])) return *ok = false;
        break;
      case 6:
        if (!AppendRepeated(f, kFixed64, &vals[1])) return *ok = false;
        break;
      case 7:
        if (!AppendRepeated(f, kVarint, &vals[2])) return *ok = false;
        break;
      case 10:
        if (!AppendRepeated(f, kVarint, &vals[3])) return *ok = false;
        break;
      default: break;
    }
  }
  if (elements != 1) return false;
  int slot;
  size_t width;
  switch (dtype) {
    case kDtFloat: slot = 0, width = 4; break;
    case kDtDouble: slot = 1, width = 8; break;
    case kDtInt32: slot = 2, width = 4; break;
    case kDtInt64: slot = 3, width = 8; break;
    default: return false;
  }
  uint64_t raw;
  if (content.size() == width) {  // tensor_content: the value's bytes, little-endian
    raw = width == 4 ? DecodeFixed32(content.data()) : DecodeFixed64(content.data());
  } else if (content.empty() && vals[slot].size() == 1) {
    raw = vals[slot][0];
  } else {
    return false;
  }
  switch (dtype) {
    case kDtFloat: *value = BitsToFloat(static_cast<uint32_t>(raw)); break;
    case kDtDouble: *value = BitsToDouble(raw); break;
    // int32 is sign-extended to 64 bits on the wire; tensor_content holds 4 bytes.
    case kDtInt32: *value = static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(raw))); break;
    default: *value = static_cast<double>(static_cast<int64_t>(raw)); break;
  }
  return true;
}

// SummaryMetadata: plugin_data (1) . plugin_name (1), content (2).
bool PluginData(std::string_view in, std::string* name, std::string* content) {
  Field f;
  while (!in.empty()) {
    if (!NextField(&in, &f)) return false;
    if (f.number != 1 || f.wire != kBytes) continue;
    std::string_view pd = f.bytes;
    Field g;
    while (!pd.empty()) {
      if (!NextField(&pd, &g)) return false;
      if (g.number == 1 && g.wire == kBytes) *name = std::string(g.bytes);
      if (g.number == 2 && g.wire == kBytes) *content = std::string(g.bytes);
    }
  }
  return true;
}

// HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5 (doubles),
// bucket_limit 6 and bucket 7 (repeated doubles, packed).
bool ParseHistogram(std::string_view in, TbHistogram* h) {
  Field f;
  std::vector<uint64_t> limits, counts;
  while (!in.empty()) {
    if (!NextField(&in, &f)) return false;
    if (f.number >= 1 && f.number <= 5 && f.wire == kFixed64) {
      double* fields[] = {&h->min, &h->max, &h->num, &h->sum, &h->sum_squares};
      *fields[f.number - 1] = BitsToDouble(f.varint);
    } else if (f.number == 6) {
      if (!AppendRepeated(f, kFixed64, &limits)) return false;
    } else if (f.number == 7) {
      if (!AppendRepeated(f, kFixed64, &counts)) return false;
    }
  }
  for (uint64_t b : limits) h->limits.push_back(BitsToDouble(b));
  for (uint64_t b : counts) h->counts.push_back(BitsToDouble(b));
  return true;
}

// Summary.Image: height 1, width 2, colorspace 3, encoded_image_string 4.
bool ParseImage(std::string_view in, TbImage* img) {
  Field f;
  while (!in.empty()) {
    if (!NextField(&in, &f)) return false;
    if (f.number >= 1 && f.number <= 3 && f.wire == kVarint) {
      int64_t* fields[] = {&img->height, &img->width, &img->colorspace};
      *fields[f.number - 1] = static_cast<int64_t>(f.varint);
    } else if (f.number == 4 && f.wire == kBytes) {
      img->encoded = std::string(f.bytes);
    }
  }
  return true;
}

Status ParseValue(std::string_view in, TbValue* v) {
  Field f;
  enum { kNothing, kSimple, kHisto, kImage, kAudio, kTensorValue } which = kNothing;
  std::string_view tensor;
  float simple = 0;
  while (!in.empty()) {
    if (!NextField(&in, &f)) return Status::Corruption("malformed Summary.Value");
    switch (f.number) {
      case 1:
        if (f.wire == kBytes) v->tag = std::string(f.bytes);
        break;
      case 2:
        if (f.wire == kFixed32) which = kSimple, simple = BitsToFloat(static_cast<uint32_t>(f.varint));
        break;
      case 3:  // obsolete_old_style_histogram: no HistogramProto (left empty: not imported)
        if (f.wire == kBytes) which = kHisto, v->histo = TbHistogram();
        break;
      case 5:  // histo
        if (f.wire != kBytes) break;
        which = kHisto, v->histo = TbHistogram();
        if (!ParseHistogram(f.bytes, &v->histo)) return Status::Corruption("malformed HistogramProto");
        break;
      case 4:
        if (f.wire != kBytes) break;
        which = kImage, v->image = TbImage();
        if (!ParseImage(f.bytes, &v->image)) return Status::Corruption("malformed Summary.Image");
        break;
      case 6:
        if (f.wire == kBytes) which = kAudio;
        break;
      case 8:
        if (f.wire == kBytes) which = kTensorValue, tensor = f.bytes;
        break;
      case 9:
        if (f.wire == kBytes && !PluginData(f.bytes, &v->plugin, &v->plugin_content)) {
          return Status::Corruption("malformed SummaryMetadata");
        }
        break;
      default: break;
    }
  }
  switch (which) {
    case kNothing: v->kind = TbValue::Kind::kNone; break;
    case kSimple: v->kind = TbValue::Kind::kScalar, v->value = simple; break;
    case kHisto: v->kind = TbValue::Kind::kHistogram; break;
    case kImage: v->kind = TbValue::Kind::kImage; break;
    case kAudio: v->kind = TbValue::Kind::kAudio; break;
    case kTensorValue: {
      bool ok = true;
      v->kind = TbValue::Kind::kTensor;
      v->scalar_tensor = ScalarTensor(tensor, &v->value, &ok);
      if (!ok) return Status::Corruption("malformed TensorProto");
      v->tensor = std::string(tensor);
      break;
    }
  }
  return Status::OK();
}


// ---- rich values ----

// A count as JSON: an integer where it is whole.
Json CountJson(double c) {
  if (c == std::floor(c) && c < 9007199254740992.0) return static_cast<int64_t>(c);
  return c;
}

// {"_type": "histogram"} of buckets (lower, upper, count), ascending; more
// than the server's 4096 merged in groups of adjacent buckets.
Json HistogramJson(const std::vector<std::array<double, 3>>& b) {
  const size_t group = (b.size() + kMaxBuckets - 1) / kMaxBuckets;
  Json buckets = Json::array();
  for (size_t i = 0; i < b.size(); i += group) {
    const size_t end = std::min(b.size(), i + group);
    double count = 0;
    for (size_t k = i; k < end; k++) count += b[k][2];
    buckets.push_back(Json::array({b[i][0], b[end - 1][1], CountJson(count)}));
  }
  return {{"_type", "histogram"}, {"buckets", std::move(buckets)}};
}

// google.protobuf.Value (struct.proto): null_value 1, number_value 2,
// string_value 3, bool_value 4, struct_value 5, list_value 6.
bool ProtoValueJson(std::string_view in, int depth, Json* out);

// The map entries (key 1, value 2) in field 1 of a message: Struct.fields,
// SessionStartInfo.hparams. Other fields skipped.
bool ProtoMapJson(std::string_view in, int depth, Json* obj) {
  Field f;
  while (!in.empty()) {
    if (!NextField(&in, &f)) return false;
    if (f.number != 1 || f.wire != kBytes) continue;
    std::string_view entry = f.bytes;
    std::string key;
    Json value;  // absent: null
    Field e;
    while (!entry.empty()) {
      if (!NextField(&entry, &e)) return false;
      if (e.number == 1 && e.wire == kBytes) key = std::string(e.bytes);
      if (e.number == 2 && e.wire == kBytes && !ProtoValueJson(e.bytes, depth + 1, &value)) return false;
    }
    (*obj)[key] = std::move(value);
  }
  return true;
}

bool ProtoValueJson(std::string_view in, int depth, Json* out) {
  if (depth > 32) return false;
  *out = nullptr;
  Field f;
  while (!in.empty()) {
    if (!NextField(&in, &f)) return false;
    switch (f.number) {
      case 1:
        if (f.wire == kVarint) *out = nullptr;
        break;
      case 2:
        if (f.wire == kFixed64) *out = runs::NumberJson(BitsToDouble(f.varint));
        break;
      case 3:
        if (f.wire == kBytes) *out = std::string(f.bytes);
        break;
      case 4:
        if (f.wire == kVarint) *out = f.varint != 0;
        break;
      case 5: {
        if (f.wire != kBytes) break;
        Json obj = Json::object();
        if (!ProtoMapJson(f.bytes, depth + 1, &obj)) return false;
        *out = std::move(obj);
        break;
      }
      case 6: {  // ListValue: values 1
        if (f.wire != kBytes) break;
        Json list = Json::array();
        std::string_view l = f.bytes;
        Field g;
        while (!l.empty()) {
          if (!NextField(&l, &g)) return false;
          if (g.number != 1 || g.wire != kBytes) continue;
          Json item;
          if (!ProtoValueJson(g.bytes, depth + 1, &item)) return false;
          list.push_back(std::move(item));
        }
        *out = std::move(list);
        break;
      }
      default: break;
    }
  }
  return true;
}

// ---- the logdir ----

bool IsEventFile(const fs::path& p) { return p.filename().string().find("tfevents") != std::string::npos; }

std::string Hex(uint64_t v, int digits) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(digits, '0');
  for (int i = digits - 1; i >= 0; i--, v >>= 4) s[i] = kHex[v & 15];
  return s;
}

// What a value not imported counts as, by plugin name.
std::string SkippedKind(std::string_view plugin) {
  if (plugin == "histograms") return "histogram";
  if (plugin == "images") return "image";
  if (plugin == "audio") return "audio";
  if (plugin == "text") return "text";
  if (plugin == "hparams") return "hparams";
  if (plugin.empty() || plugin == "scalars") return "tensor";
  return std::string(plugin);
}

// One event file into `run`; `plugins` remembers each tag's plugin (the
// writers put the metadata on a tag's first value only).
void ReadEventFile(const fs::path& path, TbRun* run, std::map<std::string, std::string>* plugins,
                   std::vector<std::string>* warnings) {
  std::error_code ec;
  uint64_t size = fs::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) {
    warnings->push_back(path.string() + ": cannot be read" + (ec ? ": " + ec.message() : std::string()));
    return;
  }
  TbEvent e;
  TfRecordEnd end = ReadTfRecords(in, size, [&](uint64_t offset, std::string_view data) {
    e = TbEvent();
    Status s = ParseTbEvent(data, &e);
    if (!s.ok()) {
      warnings->push_back(path.string() + ": offset " + std::to_string(offset) + ": record is no Event (" + s.message() +
                          "); record skipped");
      return;
    }
    if (e.wall_time > 0) {
      if (run->start_time == 0 || e.wall_time < run->start_time) run->start_time = e.wall_time;
      run->end_time = std::max(run->end_time, e.wall_time);
    }
    if (e.graph) run->skipped["graph"]++;
    const int64_t ts_ms = std::llround(e.wall_time * 1000);
    auto add = [&](const std::string& key, Json value) {
      run->media[key].push_back({e.step, ts_ms, std::move(value)});
    };
    auto skip = [&](const std::string& why) { run->skipped[why]++; };
    auto hparams = [&](const TbValue& v) {
      auto r = TbHparams(v.plugin_content, &run->config);
      if (!r.ok()) skip("malformed hparams");
    };
    for (TbValue& v : e.values) {
      if (!v.plugin.empty()) (*plugins)[v.tag] = v.plugin;
      std::string plugin = v.plugin;
      if (plugin.empty()) {
        auto it = plugins->find(v.tag);
        if (it != plugins->end()) plugin = it->second;
      }
      switch (v.kind) {
        case TbValue::Kind::kScalar: run->scalars[v.tag].push_back({e.step, ts_ms, v.value}); break;
        case TbValue::Kind::kHistogram: {
          auto h = TbHistogramValue(v.histo);
          if (h.ok()) add(v.tag, std::move(*h));
          else skip("malformed histogram");
          break;
        }
        case TbValue::Kind::kImage: {
          auto img = TbImageValue(v.image.encoded);
          if (img.ok()) add(v.tag, std::move(*img));
          else skip(img.error().message());
          break;
        }
        case TbValue::Kind::kAudio: skip("audio"); break;
        case TbValue::Kind::kTensor: {
          if (v.scalar_tensor && (plugin.empty() || plugin == "scalars")) {
            run->scalars[v.tag].push_back({e.step, ts_ms, v.value});
            break;
          }
          if (plugin == "hparams") {
            hparams(v);
            break;
          }
          if (plugin != "histograms" && plugin != "images" && plugin != "text") {
            skip(SkippedKind(plugin));
            break;
          }
          TbTensor t;
          Status parsed = ParseTbTensor(v.tensor, &t);
          if (plugin == "histograms") {
            auto h = parsed.ok() ? TbTensorHistogramValue(t) : Result<Json>(parsed);
            if (h.ok()) add(v.tag, std::move(*h));
            else skip(parsed.ok() && t.dims.size() == 2 && t.dims[0] == 0 ? "empty histogram" : "malformed histogram");
          } else if (plugin == "images") {
            auto images = parsed.ok() ? TbTensorImages(t) : Result<std::vector<std::string>>(parsed);
            if (!images.ok()) {
              skip("malformed image");
              break;
            }
            for (size_t i = 0; i < images->size(); i++) {
              auto img = TbImageValue((*images)[i]);
              if (img.ok()) add(i == 0 ? v.tag : v.tag + "/" + std::to_string(i), std::move(*img));
              else skip(img.error().message());
            }
          } else {
            auto text = parsed.ok() ? TbTextValue(t) : Result<Json>(Status::InvalidArgument("malformed text"));
            if (text.ok()) add(v.tag, std::move(*text));
            else skip(text.error().message());
          }
          break;
        }
        case TbValue::Kind::kNone:  // metadata only (hparams' experiment and session infos)
          if (plugin == "hparams") hparams(v);
          else if (!plugin.empty()) skip(SkippedKind(plugin));
          break;
      }
    }
  });
  if (!end.clean) {
    warnings->push_back(path.string() + ": offset " + std::to_string(end.offset) + ": " + end.error + "; the rest of the file (" +
                        std::to_string(size - end.offset) + " bytes) skipped");
  }
}

// Posts one batch of the run; adds what the server stored anew to *stored
// and reports what it rejected.
Status PostBatch(ApiClient& c, const TbRun& r, const std::string& key, const std::string& batch_id, Json points,
                 size_t* stored) {
  Json answer;
  RETURN_IF_ERROR(
      PostJson(c, "/api/v1/runs/" + r.id + "/batches", {{"batch_id", batch_id}, {"points", std::move(points)}}, &answer));
  if (answer.is_object() && answer["data"].is_object()) {
    *stored += answer["data"].value("accepted", size_t{0});
    for (const Json& rej : answer["data"].value("rejected", Json::array())) {
      std::cerr << "trainwatch import: run " << r.name << " tag " << key << ": " << rej.dump() << "\n";
    }
  }
  return Status::OK();
}

// The run into the server; returns the values the server stored anew.
Result<size_t> SendRun(ApiClient& c, const TbRun& r, const std::string& project) {
  Json create = {{"id", r.id}, {"project", project}, {"name", r.name}};
  if (r.start_time > 0) create["start_time"] = r.start_time;
  if (!r.config.empty()) create["config"] = r.config;
  RETURN_IF_ERROR(PostJson(c, "/api/v1/runs", create, nullptr));
  size_t stored = 0;
  for (const auto& [tag, pts] : r.scalars) {
    // Batch ids: the run, the tag, the chunk's number and a digest of its
    // points: the same logdir again stores nothing; a chunk that grew since
    // (training went on) goes again, with its new points.
    const std::string prefix = r.id + "." + Hex(ImportHash(tag), 16) + ".";
    for (size_t i = 0, n = 0; i < pts.size(); i += kBatchPoints, n++) {
      Json points = Json::array();
      uint64_t digest = ImportHash("");
      for (size_t j = i; j < std::min(pts.size(), i + kBatchPoints); j++) {
        const TbRun::Point& p = pts[j];
        points.push_back({{"step", p.step}, {"ts", p.ts_ms}, {"values", {{tag, runs::NumberJson(p.value)}}}});
        char raw[24];
        std::memcpy(raw, &p.step, 8);
        std::memcpy(raw + 8, &p.ts_ms, 8);
        std::memcpy(raw + 16, &p.value, 8);
        digest = ImportHash(std::string_view(raw, sizeof raw), digest);
      }
      RETURN_IF_ERROR(PostBatch(c, r, tag, prefix + std::to_string(n) + "." + Hex(digest, 8), std::move(points), &stored));
    }
  }
  for (const auto& [key, pts] : r.media) {
    // Rich values the same way ("m" apart from the scalars), in chunks of
    // at most kBatchPoints values and, past the first, kBatchBytes of JSON.
    const std::string prefix = r.id + ".m" + Hex(ImportHash(key), 16) + ".";
    for (size_t i = 0, n = 0; i < pts.size(); n++) {
      Json points = Json::array();
      uint64_t digest = ImportHash("");
      for (size_t bytes = 0; i < pts.size() && points.size() < kBatchPoints && (points.empty() || bytes < kBatchBytes); i++) {
        const TbRun::RichPoint& p = pts[i];
        std::string value = p.value.dump(-1, ' ', false, Json::error_handler_t::replace);
        bytes += value.size();
        char raw[16];
        std::memcpy(raw, &p.step, 8);
        std::memcpy(raw + 8, &p.ts_ms, 8);
        digest = ImportHash(value, ImportHash(std::string_view(raw, sizeof raw), digest));
        points.push_back({{"step", p.step}, {"ts", p.ts_ms}, {"values", {{key, p.value}}}});
      }
      RETURN_IF_ERROR(PostBatch(c, r, key, prefix + std::to_string(n) + "." + Hex(digest, 8), std::move(points), &stored));
    }
  }
  Json fin = {{"status", "finished"}};
  if (r.end_time > 0) fin["end_time"] = r.end_time;
  RETURN_IF_ERROR(PostJson(c, "/api/v1/runs/" + r.id + "/finish", fin, nullptr));
  return stored;
}

}  // namespace

uint32_t TfRecordMaskedCrc(std::string_view data) {
  uint32_t crc = crc32c::Value(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TfRecordEnd ReadTfRecords(std::istream& in, uint64_t size,
                          const std::function<void(uint64_t offset, std::string_view data)>& fn) {
  uint64_t pos = 0;
  std::string buf;
  while (pos < size) {
    const uint64_t rest = size - pos;
    if (rest < 12) {
      return {false, pos, "truncated record: " + std::to_string(rest) + " of the 12 header bytes"};
    }
    char hdr[12];
    if (!in.read(hdr, 12)) return {false, pos, "truncated record: the header cannot be read"};
    const uint64_t len = DecodeFixed64(hdr);
    if (TfRecordMaskedCrc(std::string_view(hdr, 8)) != DecodeFixed32(hdr + 8)) {
      return {false, pos, "corrupt record: the length's CRC does not match"};
    }
    if (rest - 12 < 4 || len > rest - 12 - 4) {
      return {false, pos,
              "truncated record: " + std::to_string(len) + " data bytes and a CRC announced, " + std::to_string(rest - 12) +
                  " bytes left"};
    }
    buf.resize(len);
    char crc[4];
    if (!in.read(buf.data(), static_cast<std::streamsize>(len)) || !in.read(crc, 4)) {
      return {false, pos, "truncated record: the data cannot be read"};
    }
    if (TfRecordMaskedCrc(buf) != DecodeFixed32(crc)) return {false, pos, "corrupt record: the data's CRC does not match"};
    fn(pos, buf);
    pos += 12 + len + 4;
  }
  return {true, pos, ""};
}

Status ParseTbEvent(std::string_view in, TbEvent* e) {
  Field f;
  while (!in.empty()) {
    if (!NextField(&in, &f)) return Status::Corruption("malformed Event");
    switch (f.number) {
      case 1:
        if (f.wire == kFixed64) e->wall_time = BitsToDouble(f.varint);
        break;
      case 2:
        if (f.wire == kVarint) e->step = static_cast<int64_t>(f.varint);
        break;
      case 3:
        if (f.wire == kBytes) e->file_version = std::string(f.bytes);
        break;
      case 4:  // graph_def
      case 8:  // tagged_run_metadata
      case 9:  // meta_graph_def
        if (f.wire == kBytes) e->graph = true;
        break;
      case 5: {  // summary: value = 1
        if (f.wire != kBytes) break;
        std::string_view s = f.bytes;
        Field v;
        while (!s.empty()) {
          if (!NextField(&s, &v)) return Status::Corruption("malformed Summary");
          if (v.number != 1 || v.wire != kBytes) continue;
          TbValue tv;
          RETURN_IF_ERROR(ParseValue(v.bytes, &tv));
          e->values.push_back(std::move(tv));
        }
        break;
      }
      default: break;
    }
  }
  return Status::OK();
}

Status ParseTbTensor(std::string_view in, TbTensor* t) {
  *t = TbTensor();
  std::string_view content;
  bool unknown_rank = false;
  std::vector<uint64_t> vals[4];  // float_val, double_val, int_val, int64_val
  std::vector<std::string_view> strings;
  Field f;
  while (!in.empty()) {
    if (!NextField(&in, &f)) return Status::Corruption("malformed TensorProto");
    switch (f.number) {
      case 1:
        if (f.wire == kVarint) t->dtype = static_cast<int>(f.varint);
        break;
      case 2: {  // TensorShapeProto: dim = 2 (Dim: size = 1), unknown_rank = 3
        if (f.wire != kBytes) break;
        std::string_view shape = f.bytes;
        Field d;
        while (!shape.empty()) {
          if (!NextField(&shape, &d)) return Status::Corruption("malformed TensorShapeProto");
          if (d.number == 3 && d.wire == kVarint && d.varint != 0) unknown_rank = true;
          if (d.number != 2 || d.wire != kBytes) continue;
          std::string_view dim = d.bytes;
          int64_t size = 0;
          Field sz;
          while (!dim.empty()) {
            if (!NextField(&dim, &sz)) return Status::Corruption("malformed TensorShapeProto.Dim");
            if (sz.number == 1 && sz.wire == kVarint) size = static_cast<int64_t>(sz.varint);
          }
          t->dims.push_back(size);
        }
        break;
      }
      case 4:
        if (f.wire == kBytes) content = f.bytes;
        break;
      case 5:
        if (!AppendRepeated(f, kFixed32, &vals[0])) return Status::Corruption("malformed float_val");
        break;
      case 6:
        if (!AppendRepeated(f, kFixed64, &vals[1])) return Status::Corruption("malformed double_val");
        break;
      case 7:
        if (!AppendRepeated(f, kVarint, &vals[2])) return Status::Corruption("malformed int_val");
        break;
      case 8:
        if (f.wire == kBytes) strings.push_back(f.bytes);
        break;
      case 10:
        if (!AppendRepeated(f, kVarint, &vals[3])) return Status::Corruption("malformed int64_val");
        break;
      default: break;
    }
  }
  if (unknown_rank) return Status::InvalidArgument("a tensor of unknown rank");
  uint64_t n = 1;
  for (int64_t d : t->dims) {
    if (d < 0) return Status::InvalidArgument("a tensor dimension of unknown size");
    if (d != 0 && n > kMaxTensorElements / static_cast<uint64_t>(d)) {
      return Status::InvalidArgument("a tensor of more than " + std::to_string(kMaxTensorElements) + " elements");
    }
    n *= static_cast<uint64_t>(d);
  }
  if (t->dtype == 7) {  // DT_STRING
    if (strings.size() != n) {
      return Status::InvalidArgument(std::to_string(strings.size()) + " strings for a tensor of " + std::to_string(n) +
                                     " elements");
    }
    t->strings.assign(strings.begin(), strings.end());
    return Status::OK();
  }
  int slot;
  size_t width;
  switch (t->dtype) {
    case kDtFloat: slot = 0, width = 4; break;
    case kDtDouble: slot = 1, width = 8; break;
    case kDtInt32: slot = 2, width = 4; break;
    case kDtInt64: slot = 3, width = 8; break;
    default: return Status::InvalidArgument("a tensor of dtype " + std::to_string(t->dtype));
  }
  std::vector<uint64_t> raw;
  if (!content.empty()) {  // tensor_content: the values' bytes, little-endian
    if (content.size() != n * width) {
      return Status::InvalidArgument("tensor_content of " + std::to_string(content.size()) + " bytes for " +
                                     std::to_string(n) + " elements");
    }
    for (size_t i = 0; i < n; i++) {
      raw.push_back(width == 4 ? DecodeFixed32(content.data() + i * 4) : DecodeFixed64(content.data() + i * 8));
    }
  } else {
    raw = std::move(vals[slot]);
    if (raw.size() > n) {
      return Status::InvalidArgument(std::to_string(raw.size()) + " values for a tensor of " + std::to_string(n) +
                                     " elements");
    }
    // Fewer values than elements: the last one repeated (none: zeros), as TensorFlow reads them.
    raw.resize(n, raw.empty() ? 0 : raw.back());
  }
  t->numbers.reserve(raw.size());
  for (uint64_t r : raw) {
    switch (t->dtype) {
      case kDtFloat: t->numbers.push_back(BitsToFloat(static_cast<uint32_t>(r))); break;
      case kDtDouble: t->numbers.push_back(BitsToDouble(r)); break;
      case kDtInt32: t->numbers.push_back(static_cast<int32_t>(static_cast<uint32_t>(r))); break;
      default: t->numbers.push_back(static_cast<double>(static_cast<int64_t>(r))); break;
    }
  }
  return Status::OK();
}

Result<Json> TbHistogramValue(const TbHistogram& h) {
  const size_t n = h.limits.size();
  if (n == 0) return Status::InvalidArgument("a histogram without buckets");
  if (h.counts.size() != n) {
    return Status::InvalidArgument(std::to_string(n) + " bucket limits for " + std::to_string(h.counts.size()) +
                                   " buckets");
  }
  for (size_t i = 0; i < n; i++) {
    if (!std::isfinite(h.counts[i]) || h.counts[i] < 0) {
      return Status::InvalidArgument("bucket " + std::to_string(i) + ": a count that is no finite number >= 0");
    }
    if (std::isnan(h.limits[i]) || (i > 0 && h.limits[i] < h.limits[i - 1])) {
      return Status::InvalidArgument("bucket limits not ascending at " + std::to_string(i));
    }
  }
  // Every edge into [min, max]: the first bucket's lower edge is min, and
  // the writers' outer limits (+-DBL_MAX in TensorFlow's) do not go out.
  double lo = h.min, hi = h.max;
  if (!(std::isfinite(lo) && std::isfinite(hi) && lo <= hi && std::fabs(lo) < DBL_MAX && std::fabs(hi) < DBL_MAX)) {
    // No usable min and max (an empty histogram's DBL_MAX, -DBL_MAX): the finite limits' range.
    auto usable = [](double x) { return std::fabs(x) < DBL_MAX; };
    auto first = std::find_if(h.limits.begin(), h.limits.end(), usable);
    auto last = std::find_if(h.limits.rbegin(), h.limits.rend(), usable);
    if (first == h.limits.end()) return Status::InvalidArgument("a histogram without a finite range");
    lo = *first, hi = *last;
  }
  auto clamp = [&](double x) { return std::min(std::max(x, lo), hi); };
  std::vector<std::array<double, 3>> b(n);
  for (size_t i = 0; i < n; i++) b[i] = {i == 0 ? lo : clamp(h.limits[i - 1]), clamp(h.limits[i]), h.counts[i]};
  return HistogramJson(b);
}

Result<Json> TbTensorHistogramValue(const TbTensor& t) {
  if (t.dims.size() != 2 || t.dims[1] != 3 || t.numbers.size() != static_cast<size_t>(t.dims[0]) * 3) {
    return Status::InvalidArgument("a histogram tensor that is no numeric [k, 3] tensor");
  }
  if (t.dims[0] == 0) return Status::InvalidArgument("an empty histogram");
  std::vector<std::array<double, 3>> b;
  double prev = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < t.numbers.size(); i += 3) {
    double l = t.numbers[i], r = t.numbers[i + 1], c = t.numbers[i + 2];
    if (!std::isfinite(l) || !std::isfinite(r) || !std::isfinite(c) || c < 0 || l > r) {
      return Status::InvalidArgument("histogram bucket " + std::to_string(i / 3) + " is no (left <= right, count >= 0)");
    }
    if (l < prev) {  // an edge a float rounding below the previous bucket's right edge: that edge
      if (prev - l > 1e-6 * std::max({1.0, std::fabs(l), std::fabs(prev)}) || prev > r) {
        return Status::InvalidArgument("histogram buckets overlap at " + std::to_string(i / 3));
      }
      l = prev;
    }
    b.push_back({l, r, c});
    prev = r;
  }
  return HistogramJson(b);
}

std::string TbImageFormat(std::string_view b) {
  if (b.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) return "png";
  if (b.substr(0, 3) == std::string_view("\xff\xd8\xff", 3)) return "jpeg";
  return "";
}

Result<Json> TbImageValue(std::string_view encoded) {
  std::string format = TbImageFormat(encoded);
  if (format.empty()) return Status::InvalidArgument("image not PNG or JPEG");
  if (encoded.size() > kMaxImageBytes) return Status::InvalidArgument("image over 16 MiB");
  return Json{{"_type", "image"}, {"format", format}, {"data", Base64Encode(encoded)}};
}

Result<std::vector<std::string>> TbTensorImages(const TbTensor& t) {
  if (t.dtype != 7 || t.dims.size() != 1 || t.strings.size() < 2) {
    return Status::InvalidArgument("malformed image");  // not [width, height, images...]
  }
  return std::vector<std::string>(t.strings.begin() + 2, t.strings.end());
}

Result<Json> TbTextValue(const TbTensor& t) {
  if (t.dtype != 7) return Status::InvalidArgument("malformed text");
  if (t.dims.size() <= 1) {
    std::string text;
    for (size_t i = 0; i < t.strings.size(); i++) text += (i ? "\n" : "") + t.strings[i];
    if (text.size() > kMaxTextBytes) return Status::InvalidArgument("text over 1 MiB");
    return Json{{"_type", "text"}, {"text", std::move(text)}};
  }
  if (t.dims.size() > 2) return Status::InvalidArgument("text of rank " + std::to_string(t.dims.size()));
  const size_t rows = static_cast<size_t>(t.dims[0]), cols = static_cast<size_t>(t.dims[1]);
  if (cols == 0 || cols > kMaxColumns || rows * cols > kMaxCells) {
    return Status::InvalidArgument("text table over the limits");
  }
  Json columns = Json::array(), out_rows = Json::array();
  for (size_t c = 0; c < cols; c++) columns.push_back(std::to_string(c));
  for (size_t r = 0; r < rows; r++) {
    Json row = Json::array();
    for (size_t c = 0; c < cols; c++) row.push_back(t.strings[r * cols + c]);
    out_rows.push_back(std::move(row));
  }
  return Json{{"_type", "table"}, {"columns", std::move(columns)}, {"rows", std::move(out_rows)}};
}

Result<bool> TbHparams(std::string_view content, Json* config) {
  // HParamsPluginData: version 1, experiment 2, session_start_info 3, session_end_info 4.
  Field f;
  bool start = false;
  Json hparams = Json::object();
  while (!content.empty()) {
    if (!NextField(&content, &f)) return Status::Corruption("malformed HParamsPluginData");
    if (f.number != 3 || f.wire != kBytes) continue;
    start = true;  // SessionStartInfo: hparams 1 (map<string, google.protobuf.Value>)
    if (!ProtoMapJson(f.bytes, 0, &hparams)) return Status::Corruption("malformed SessionStartInfo");
  }
  for (auto& [k, v] : hparams.items()) (*config)[k] = v;
  return start;
}

Result<std::vector<TbRun>> ReadTensorboardLogdir(const std::string& logdir, std::vector<std::string>* warnings) {
  std::error_code ec;
  if (!fs::is_directory(logdir, ec)) return Status::InvalidArgument(logdir + ": not a directory");
  fs::path root = fs::weakly_canonical(fs::absolute(logdir, ec), ec);
  if (ec) root = fs::absolute(logdir).lexically_normal();
  std::map<fs::path, std::vector<fs::path>> by_dir;
  auto opts = fs::directory_options::skip_permission_denied;
  for (fs::recursive_directory_iterator it(root, opts, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2) && IsEventFile(it->path())) by_dir[it->path().parent_path()].push_back(it->path());
  }
  if (ec) warnings->push_back(root.string() + ": " + ec.message() + "; the directories after it were not read");
  if (by_dir.empty()) {
    return Status::InvalidArgument(logdir + ": no TensorBoard event file in it (expected events.out.tfevents.* files)");
  }
  const std::string root_name = root.filename().empty() ? root.string() : root.filename().string();
  std::vector<TbRun> runs;
  for (auto& [dir, files] : by_dir) {
    std::sort(files.begin(), files.end());
    TbRun r;
    r.dir = dir.string();
    std::string rel = dir.lexically_relative(root).generic_string();
    r.name = rel.empty() || rel == "." ? root_name : rel;
    r.id = "tb-" + Hex(ImportHash(r.dir), 16);
    std::map<std::string, std::string> plugins;
    for (const fs::path& f : files) {
      r.files.push_back(f.string());
      ReadEventFile(f, &r, &plugins, warnings);
    }
    runs.push_back(std::move(r));
  }
  return runs;
}

std::string TbSkippedReport(const std::map<std::string, size_t>& skipped) {
  std::string s;
  for (const auto& [kind, n] : skipped) {
    if (n == 0) continue;
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  }
  return s.empty() ? s : s + " values not imported";
}

int RunImportTensorboard(const ImportOptions& o) {
  std::vector<std::string> warnings;
  auto runs = ReadTensorboardLogdir(o.dir, &warnings);
  for (const std::string& w : warnings) std::cerr << "trainwatch import: " << w << "\n";
  if (!runs.ok()) {
    std::cerr << "trainwatch import: " << runs.error().message() << "\n";
    return 1;
  }
  std::string project = o.project;
  if (project.empty()) {
    std::error_code ec;
    fs::path root = fs::weakly_canonical(fs::absolute(o.dir, ec), ec);
    project = ec || root.filename().empty() ? "tensorboard" : root.filename().string();
  }
  auto client = ImportClient(o.url);
  if (!client.ok()) {
    std::cerr << "trainwatch import: " << client.error().message() << "\n";
    return 1;
  }
  ApiClient& c = *client;
  size_t values = 0, logged = 0, rich = 0;
  std::map<std::string, size_t> skipped;
  for (const TbRun& r : *runs) {
    for (const auto& [tag, pts] : r.scalars) logged += pts.size();
    for (const auto& [key, pts] : r.media) rich += pts.size();
    for (const auto& [kind, n] : r.skipped) skipped[kind] += n;
    auto n = SendRun(c, r, project);
    if (!n.ok()) {
      std::cerr << "trainwatch import: run " << r.name << " (" << r.dir << "): " << n.error().message() << "\n";
      return 1;
    }
    values += *n;
    std::string report = TbSkippedReport(r.skipped);
    auto count = [](size_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
    std::cout << "trainwatch import: run " << r.name << " (id " << r.id << "): " << count(r.scalars.size(), "scalar tag")
              << ", " << count(r.media.size(), "rich key")
              << (r.config.empty() ? "" : ", " + count(r.config.size(), "hparam")) << " from "
              << count(r.files.size(), "event file") << (report.empty() ? "" : "; " + report) << "\n";
  }
  std::cout << "trainwatch import: " << runs->size() << " runs, " << logged << " metric values and " << rich
            << " histograms, images and texts (" << values
            << " stored now, the rest already there) from " << o.dir << " into " << c.display << "\n";
  if (std::string report = TbSkippedReport(skipped); !report.empty()) std::cout << "trainwatch import: " << report << "\n";
  if (!warnings.empty()) std::cout << "trainwatch import: " << warnings.size() << " warnings (above): those parts were skipped\n";
  return 0;
}

}  // namespace trainwatch::app
