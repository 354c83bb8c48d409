#include "logs/shippers.h"


#include <atomic>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/json.h"
#include "base/snappy.h"
#include "logs/json_record.h"
#include "logs/query.h"

namespace trainwatch::logs {

using nlohmann::json;

Result<model::Labels> MergeLabels(const model::Labels& base, const std::vector<model::Label>& extra) {
  if (extra.empty()) return base;
  // n log n: LabelsBuilder::Set scans the whole set per label, quadratic on
  // a hostile line with 100k labels. Sort `extra` by name (stable, so the
  // last of a repeated name is last), then merge it into the sorted base.
  std::vector<const model::Label*> ex;
  ex.reserve(extra.size());
  for (const model::Label& l : extra) {
    if (!model::IsValidLabelName(l.name)) return Status::InvalidArgument("invalid label name \"" + l.name + "\"");
    if (!IsValidUtf8(l.value)) {
      return Status::InvalidArgument("label \"" + l.name + "\": value is not valid UTF-8");
    }
    ex.push_back(&l);
  }
  std::stable_sort(ex.begin(), ex.end(), [](const model::Label* a, const model::Label* b) { return a->name < b->name; });
  std::vector<model::Label> out;
  out.reserve(base.size() + ex.size());
  auto b = base.begin();
  for (size_t i = 0; i < ex.size(); ++i) {
    if (i + 1 < ex.size() && ex[i + 1]->name == ex[i]->name) continue;  // a later one wins
    while (b != base.end() && b->name < ex[i]->name) out.push_back(*b++);
    if (b != base.end() && b->name == ex[i]->name) ++b;
    if (!ex[i]->value.empty()) out.push_back(*ex[i]);  // an empty value deletes
  }
  out.insert(out.end(), b, base.end());
  return model::Labels(std::move(out));
}

namespace {

// Calls fn(line_number, line) for each non-empty line.
template <typename Fn>
Status ForEachLine(std::string_view body, Fn fn) {
  size_t n = 0;
  while (!body.empty()) {
    size_t nl = body.find('\n');
    std::string_view line = body.substr(0, nl);
    body.remove_prefix(nl == std::string_view::npos ? body.size() : nl + 1);
    ++n;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    RETURN_IF_ERROR(fn(n, line));
  }
  return Status::OK();
}

std::string NewDocId() {
  static std::atomic<uint64_t> counter{0};
  static const char* kAlpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  uint64_t a = static_cast<uint64_t>(NowMillis()), b = counter.fetch_add(1) * 0x9E3779B97F4A7C15ull ^ a;
  std::string id;
  for (int i = 0; i < 8; ++i, a >>= 6) id += kAlpha[a & 63];
  for (int i = 0; i < 12; ++i, b >>= 5) id += kAlpha[b & 63];
  return id;
}

}  // namespace

Status ParseNative(std::string_view body, const model::Labels& stream, int64_t receive_ns, std::vector<Record>* out,
                   TimeBounds* bounds) {
  std::vector<model::Label> extra;
  RecordDecoder decoder;
  return ForEachLine(body, [&](size_t n, std::string_view line) -> Status {
    Record r;
    extra.clear();
    Status s = decoder.NativeLine(line, receive_ns, &r, &extra);
    if (!s.ok()) return s.Annotate("line " + std::to_string(n));
    InferMissingLevel(&r);
    if (bounds != nullptr) RETURN_IF_ERROR(bounds->Check(r.time_ns).Annotate("line " + std::to_string(n)));
    auto labels = MergeLabels(stream, extra);
    if (!labels.ok()) return labels.error().Annotate("line " + std::to_string(n) + ": field \"labels\"");
    r.labels = std::move(*labels);
    out->push_back(std::move(r));
    return Status::OK();
  });
}

Status ParseBulk(std::string_view body, std::string_view default_index, int64_t receive_ns, BulkRequest* out,
                 TimeBounds* bounds) {
  bool want_source = false;
  BulkItem pending;
  std::vector<model::Label> extra;
  RecordDecoder decoder;
  std::vector<JsonMember> action, meta;
  std::string buf;
  Status st = ForEachLine(body, [&](size_t n, std::string_view line) -> Status {
    if (!want_source) {
      // Exactly one (live) member, an object.
      const JsonMember* a = nullptr;
      size_t members = 0;
      if (ScanJsonObject(line, &action)) {
        for (const JsonMember& m : action) {
          if (m.live) ++members, a = &m;
        }
      }
      if (members != 1 || a->value.type != JsonType::kObject) {
        return Status::InvalidArgument("line " + std::to_string(n) + ": malformed action/metadata line, expected {\"index\":{...}}");
      }
      pending = BulkItem{};
      pending.action = std::string(a->key);
      ScanJsonObject(a->value.text, &meta);  // scanned before: valid
      const JsonMember* idx = FindMember(meta, "_index");
      pending.index = idx != nullptr && idx->value.type == JsonType::kString ? std::string(JsonScalarText(idx->value, &buf))
                                                                            : std::string(default_index);
      const JsonMember* id = FindMember(meta, "_id");
      pending.id = id != nullptr && id->value.type == JsonType::kString ? std::string(JsonScalarText(id->value, &buf))
                                                                       : NewDocId();
      if (pending.action == "delete") {
        pending.status = 400;
        pending.error_type = "illegal_argument_exception";
        pending.error_reason = "delete is not supported by trainwatch's log store";
        out->items.push_back(pending);
        return Status::OK();
      }
      if (pending.action != "index" && pending.action != "create" && pending.action != "update") {
        return Status::InvalidArgument("line " + std::to_string(n) + ": unknown action \"" + pending.action + "\"");
      }
      want_source = true;
      return Status::OK();
    }
    want_source = false;
    BulkItem item = pending;
    auto fail = [&](std::string type, std::string reason) {
      item.status = 400;
      item.error_type = std::move(type);
      item.error_reason = "line " + std::to_string(n) + ": " + reason;
      out->items.push_back(std::move(item));
      return Status::OK();
    };
    if (item.action == "update") return fail("illegal_argument_exception", "update is not supported by trainwatch's log store");
    if (item.index.empty()) return fail("action_request_validation_exception", "index is missing");
    Record r;
    extra.clear();
    Result<bool> decoded = decoder.Decode(line, ElasticKeys(), receive_ns, &r, &extra);
    if (!decoded.ok()) return fail("mapper_parsing_exception", decoded.error().message());
    if (!*decoded) return fail("mapper_parsing_exception", "failed to parse: the document is not a JSON object");
    InferMissingLevel(&r);
    if (bounds != nullptr) RETURN_IF_ERROR(bounds->Check(r.time_ns).Annotate("line " + std::to_string(n)));
    extra.insert(extra.begin(), model::Label{"index", item.index});
    auto labels = MergeLabels(model::Labels(), extra);
    if (!labels.ok()) return fail("mapper_parsing_exception", labels.error().message());
    r.labels = std::move(*labels);
    out->records.push_back(std::move(r));
    out->items.push_back(std::move(item));
    return Status::OK();
  });
  if (!st.ok()) return st;
  if (want_source) return Status::InvalidArgument("the bulk request must be terminated by a newline [\\n] and each action needs its document");
  return Status::OK();
}

std::string BulkResponseJson(const BulkRequest& req, int64_t took_ms) {
  bool errors = false;
  for (const BulkItem& it : req.items) errors = errors || it.status >= 300;
  std::string out = "{\"took\":" + std::to_string(took_ms) + ",\"errors\":" + (errors ? "true" : "false") + ",\"items\":[";
  int64_t seq = 0;
  for (size_t i = 0; i < req.items.size(); ++i) {
    const BulkItem& it = req.items[i];
    if (i) out += ',';
    out += "{";
    AppendJsonEscaped(&out, it.action);
    out += ":{\"_index\":";
    AppendJsonEscaped(&out, it.index);
    out += ",\"_type\":\"_doc\",\"_id\":";
    AppendJsonEscaped(&out, it.id);
    if (it.status < 300) {
      out += ",\"_version\":1,\"result\":\"created\",\"_shards\":{\"total\":1,\"successful\":1,\"failed\":0},\"_seq_no\":" +
             std::to_string(seq++) + ",\"_primary_term\":1";
    } else {
      out += ",\"error\":{\"type\":";
      AppendJsonEscaped(&out, it.error_type);
      out += ",\"reason\":";
      AppendJsonEscaped(&out, it.error_reason);
      out += "}";
    }
    out += ",\"status\":" + std::to_string(it.status) + "}}";
  }
  return out + "]}";
}

std::string ElasticErrorJson(std::string_view type, std::string_view reason, int status) {
  std::string cause = "{\"type\":";
  AppendJsonEscaped(&cause, type);
  cause += ",\"reason\":";
  AppendJsonEscaped(&cause, reason);
  cause += "}";
  std::string out = "{\"error\":{\"root_cause\":[" + cause + "],";
  out += cause.substr(1, cause.size() - 2);
  out += "},\"status\":" + std::to_string(status) + "}";
  return out;
}

namespace {

// A Loki line: a JSON object is decoded like a native line; else a plain message.
Status LokiEntry(RecordDecoder& decoder, std::string_view line, int64_t t, const model::Labels& stream,
                 const std::vector<model::Label>& metadata, std::vector<Record>* out, std::string_view where,
                 TimeBounds* bounds) {
  if (bounds != nullptr) RETURN_IF_ERROR(bounds->Check(t).Annotate(where));
  Record r;
  std::vector<model::Label> extra;
  Status s = decoder.NativeLine(line, t, &r, &extra);
  if (!s.ok()) return s.Annotate(where);
  r.time_ns = t;  // Loki's own timestamp wins over one inside the line
  if (r.level.empty()) {
    for (const model::Label& m : metadata) {
      if (m.name == "level" || m.name == "detected_level") r.level = NormalizeLevel(m.value);
    }
    if (r.level.empty() && stream.Has("level")) r.level = NormalizeLevel(stream.Get("level"));
    InferMissingLevel(&r);
  }
  if (!metadata.empty()) {
    json f = r.fields.empty() ? json::object() : json::parse(r.fields);
    for (const model::Label& m : metadata) {
      if (m.name != "level" && m.name != "detected_level") f[m.name] = m.value;
    }
    r.fields = f.empty() ? std::string() : f.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  auto labels = MergeLabels(stream, extra);
  if (!labels.ok()) return labels.error().Annotate(where);
  r.labels = std::move(*labels);
  out->push_back(std::move(r));
  return Status::OK();
}

Result<int64_t> ParseNanos(std::string_view s, std::string_view where) {
  int64_t v = 0;
  if (s.empty()) return Status::InvalidArgument(std::string(where) + ": empty timestamp");
  for (char c : s) {
    if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10) {
      return Status::InvalidArgument(std::string(where) + ": timestamp \"" + std::string(s) +
                                     "\" is not unix nanoseconds");
    }
    v = v * 10 + (c - '0');
  }
  return v;
}

Result<model::Labels> LabelsFromSelector(std::string_view sel, std::string_view where) {
  auto q = Query::Parse(sel);
  if (!q.ok() || !q->texts.empty() || !q->fields.empty() || !q->levels.empty() || !q->lines.empty()) {
    return Status::InvalidArgument(std::string(where) + ": invalid stream labels \"" + std::string(sel.substr(0, 200)) + "\"");
  }
  std::vector<model::Label> ls;
  for (const model::Matcher& m : q->matchers) {
    if (m.type() != model::MatchType::kEqual) {
      return Status::InvalidArgument(std::string(where) + ": stream labels must use =");
    }
    // As the JSON push checks its stream object (found by fuzz/loki_proto_fuzz.cc:
    // the selector parser took {@run="r1"}).
    if (!model::IsValidLabelName(m.name())) {
      return Status::InvalidArgument(std::string(where) + ": invalid label name \"" + m.name() + "\"");
    }
    if (!IsValidUtf8(m.value())) {
      return Status::InvalidArgument(std::string(where) + ": stream label \"" + m.name() + "\": value is not valid UTF-8");
    }
    ls.push_back({m.name(), m.value()});
  }
  auto l = model::Labels::FromUnsorted(std::move(ls));
  if (!l.ok()) return l.error().Annotate(where);
  return l;
}

}  // namespace

Status ParseLokiJson(std::string_view body, int64_t receive_ns, std::vector<Record>* out, TimeBounds* bounds) {
  (void)receive_ns;
  RecordDecoder decoder;
  RETURN_IF_ERROR(CheckJsonDepth(body));
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("streams") || !j["streams"].is_array()) {
    return Status::InvalidArgument("expected {\"streams\":[...]}");
  }
  size_t si = 0;
  for (const json& st : j["streams"]) {
    std::string where = "streams[" + std::to_string(si++) + "]";
    if (!st.is_object()) return Status::InvalidArgument(where + ": expected an object");
    std::vector<model::Label> ls;
    auto sl = st.find("stream");
    if (sl != st.end()) {
      if (!sl->is_object()) return Status::InvalidArgument(where + ".stream: expected an object of strings");
      for (auto& [k, v] : sl->items()) {
        if (!v.is_string()) return Status::InvalidArgument(where + ".stream." + k + ": expected a string");
        if (!model::IsValidLabelName(k)) return Status::InvalidArgument(where + ".stream: invalid label name \"" + k + "\"");
        ls.push_back({k, v.get<std::string>()});
      }
    }
    auto labels = model::Labels::FromUnsorted(std::move(ls));
    if (!labels.ok()) return labels.error().Annotate(where + ".stream");
    auto vals = st.find("values");
    if (vals == st.end() || !vals->is_array()) return Status::InvalidArgument(where + ".values: expected an array");
    size_t vi = 0;
    for (const json& e : *vals) {
      std::string w = where + ".values[" + std::to_string(vi++) + "]";
      if (!e.is_array() || e.size() < 2 || !e[0].is_string() || !e[1].is_string()) {
        return Status::InvalidArgument(w + ": expected [\"<unix ns>\", \"<line>\"]");
      }
      ASSIGN_OR_RETURN(int64_t t, ParseNanos(e[0].get_ref<const std::string&>(), w));
      std::vector<model::Label> md;
      if (e.size() > 2 && e[2].is_object()) {
        for (auto& [k, v] : e[2].items()) md.push_back({k, v.is_string() ? v.get<std::string>() : v.dump()});
      }
      RETURN_IF_ERROR(LokiEntry(decoder, e[1].get_ref<const std::string&>(), t, *labels, md, out, w, bounds));
    }
  }
  return Status::OK();
}

namespace {

// Minimal protobuf wire reader.
struct Pb {
  std::string_view d;
  size_t pos = 0;
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && pos < d.size(); shift += 7) {
      uint8_t b = static_cast<uint8_t>(d[pos++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Next field: number, wire type and (for LEN) the bytes; false at the end or on error (err set).
  bool Next(uint32_t* field, uint32_t* wt, std::string_view* bytes, uint64_t* num, bool* err) {
    if (pos >= d.size()) return false;
    uint64_t key;
    if (!Varint(&key)) return *err = true, false;
    *field = static_cast<uint32_t>(key >> 3);
    *wt = static_cast<uint32_t>(key & 7);
    switch (*wt) {
      case 0: if (!Varint(num)) return *err = true, false; return true;
      case 1: if (pos + 8 > d.size()) return *err = true, false; pos += 8; return true;
      case 5: if (pos + 4 > d.size()) return *err = true, false; pos += 4; return true;
      case 2: {
        uint64_t n;
        if (!Varint(&n) || n > d.size() - pos) return *err = true, false;
        *bytes = d.substr(pos, n);
        pos += n;
        return true;
      }
      default: return *err = true, false;
    }
  }
};

}  // namespace

Status ParseLokiProto(std::string_view body, int64_t receive_ns, size_t max_decoded_bytes, std::vector<Record>* out,
                      TimeBounds* bounds) {
  (void)receive_ns;
  std::string buf;
  auto raw = SnappyBlockDecode(body, &buf, max_decoded_bytes);
  if (!raw.ok()) return raw.error();
  RecordDecoder decoder;
  Pb req{*raw};
  uint32_t f, wt;
  std::string_view b;
  uint64_t num;
  bool err = false;
  size_t si = 0;
  while (req.Next(&f, &wt, &b, &num, &err)) {
    if (f != 1 || wt != 2) continue;
    std::string where = "streams[" + std::to_string(si++) + "]";
    Pb st{b};
    std::string_view sel;
    std::vector<std::string_view> entries;
    while (st.Next(&f, &wt, &b, &num, &err)) {
      if (f == 1 && wt == 2) sel = b;
      if (f == 2 && wt == 2) entries.push_back(b);
    }
    if (err) return Status::InvalidArgument("protobuf: " + where + ": malformed");
    ASSIGN_OR_RETURN(model::Labels labels, LabelsFromSelector(sel, where));
    size_t ei = 0;
    for (std::string_view e : entries) {
      std::string w = where + ".entries[" + std::to_string(ei++) + "]";
      Pb en{e};
      int64_t secs = 0, nanos = 0;
      std::string_view line;
      std::vector<model::Label> md;
      while (en.Next(&f, &wt, &b, &num, &err)) {
        if (f == 1 && wt == 2) {
          Pb ts{b};
          uint32_t tf, twt;
          std::string_view tb;
          uint64_t tn;
          while (ts.Next(&tf, &twt, &tb, &tn, &err)) {
            if (tf == 1 && twt == 0) secs = static_cast<int64_t>(tn);
            if (tf == 2 && twt == 0) nanos = static_cast<int64_t>(static_cast<int32_t>(tn));
          }
        } else if (f == 2 && wt == 2) {
          line = b;
        } else if (f == 3 && wt == 2) {
          Pb lp{b};
          uint32_t lf, lwt;
          std::string_view lb;
          uint64_t ln;
          model::Label l;
          while (lp.Next(&lf, &lwt, &lb, &ln, &err)) {
            if (lf == 1 && lwt == 2) l.name = std::string(lb);
            if (lf == 2 && lwt == 2) l.value = std::string(lb);
          }
          md.push_back(std::move(l));
        }
      }
      if (err) return Status::InvalidArgument("protobuf: " + w + ": malformed");
      // Checked: secs comes from a uint64 varint, and secs * 1e9 + nanos overflowed.
      int64_t t = 0;
      if (__builtin_mul_overflow(secs, int64_t{1000000000}, &t) || __builtin_add_overflow(t, nanos, &t)) {
        return Status::InvalidArgument(w + ": timestamp " + std::to_string(secs) +
                                       "s is out of range (years 1678 to 2262)");
      }
      RETURN_IF_ERROR(LokiEntry(decoder, line, t, labels, md, out, w, bounds));
    }
  }
  if (err) return Status::InvalidArgument("protobuf: malformed PushRequest");
  return Status::OK();
}

}  // namespace trainwatch::logs
