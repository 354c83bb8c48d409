#include "app/import_tb.h"


#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/api_client.h"
#include "base/coding.h"
#include "base/crc32c.h"
#include "runs/run.h"

namespace trainwatch::app {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr size_t kBatchPoints = 5000;

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

// SummaryMetadata: plugin_data (1) . plugin_name (1).
bool PluginName(std::string_view in, std::string* name) {
  Field f;
  while (!in.empty()) {
    if (!NextField(&in, &f)) return false;
    if (f.number != 1 || f.wire != kBytes) continue;
    std::string_view pd = f.bytes;
    Field g;
    while (!pd.empty()) {
      if (!NextField(&pd, &g)) return false;
      if (g.number == 1 && g.wire == kBytes) *name = std::string(g.bytes);
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
      case 3:  // obsolete_old_style_histogram
      case 5:  // histo
        if (f.wire == kBytes) which = kHisto;
        break;
      case 4:
        if (f.wire == kBytes) which = kImage;
        break;
      case 6:
        if (f.wire == kBytes) which = kAudio;
        break;
      case 8:
        if (f.wire == kBytes) which = kTensorValue, tensor = f.bytes;
        break;
      case 9:
        if (f.wire == kBytes && !PluginName(f.bytes, &v->plugin)) return Status::Corruption("malformed SummaryMetadata");
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
      break;
    }
  }
  return Status::OK();
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
    for (TbValue& v : e.values) {
      if (!v.plugin.empty()) (*plugins)[v.tag] = v.plugin;
      std::string plugin = v.plugin;
      if (plugin.empty()) {
        auto it = plugins->find(v.tag);
        if (it != plugins->end()) plugin = it->second;
      }
      switch (v.kind) {
        case TbValue::Kind::kScalar: run->scalars[v.tag].push_back({e.step, ts_ms, v.value}); break;
        case TbValue::Kind::kHistogram: run->skipped["histogram"]++; break;
        case TbValue::Kind::kImage: run->skipped["image"]++; break;
        case TbValue::Kind::kAudio: run->skipped["audio"]++; break;
        case TbValue::Kind::kTensor:
          if (v.scalar_tensor && (plugin.empty() || plugin == "scalars")) {
            run->scalars[v.tag].push_back({e.step, ts_ms, v.value});
          } else {
            run->skipped[SkippedKind(plugin)]++;
          }
          break;
        case TbValue::Kind::kNone:  // metadata only (hparams' session infos): counted by plugin
          if (!plugin.empty()) run->skipped[SkippedKind(plugin)]++;
          break;
      }
    }
  });
  if (!end.clean) {
    warnings->push_back(path.string() + ": offset " + std::to_string(end.offset) + ": " + end.error + "; the rest of the file (" +
                        std::to_string(size - end.offset) + " bytes) skipped");
  }
}

// The run into the server; returns the values the server stored anew.
Result<size_t> SendRun(ApiClient& c, const TbRun& r, const std::string& project) {
  Json create = {{"id", r.id}, {"project", project}, {"name", r.name}};
  if (r.start_time > 0) create["start_time"] = r.start_time;
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
      Json answer;
      RETURN_IF_ERROR(PostJson(c, "/api/v1/runs/" + r.id + "/batches",
                           {{"batch_id", prefix + std::to_string(n) + "." + Hex(digest, 8)}, {"points", points}}, &answer));
      if (answer.is_object() && answer["data"].is_object()) {
        stored += answer["data"].value("accepted", size_t{0});
        for (const Json& rej : answer["data"].value("rejected", Json::array())) {
          std::cerr << "trainwatch import: run " << r.name << " tag " << tag << ": " << rej.dump() << "\n";
        }
      }
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
  return s.empty() ? s : s + " values not imported (scalars only)";
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
  size_t values = 0, logged = 0;
  std::map<std::string, size_t> skipped;
  for (const TbRun& r : *runs) {
    for (const auto& [tag, pts] : r.scalars) logged += pts.size();
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
              << " from " << count(r.files.size(), "event file") << (report.empty() ? "" : "; " + report) << "\n";
  }
  std::cout << "trainwatch import: " << runs->size() << " runs, " << logged << " metric values (" << values
            << " stored now, the rest already there) from " << o.dir << " into " << c.display << "\n";
  if (std::string report = TbSkippedReport(skipped); !report.empty()) std::cout << "trainwatch import: " << report << "\n";
  if (!warnings.empty()) std::cout << "trainwatch import: " << warnings.size() << " warnings (above): those parts were skipped\n";
  return 0;
}

}  // namespace trainwatch::app
