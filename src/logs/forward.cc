#include "logs/forward.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "base/log.h"
#include "common/http_client.h"
#include "common/url.h"

namespace trainwatch::logs {

using nlohmann::json;

namespace {

json FieldsOf(const Record& r) {
  if (r.fields.empty()) return json::object();
  json f = json::parse(r.fields, nullptr, false);
  return f.is_object() ? f : json::object();
}

json LabelsOf(const Record& r) {
  json l = json::object();
  for (const model::Label& p : r.labels) l[p.name] = p.value;
  return l;
}

// Connecting, sending a batch and reading the answer, each.
constexpr int64_t kTimeoutMs = 30'000;

// "http://host:port/prefix" as the client base and the path prefix (no
// trailing '/').
Status SplitUrl(const std::string& url, std::string* base, std::string* prefix) {
  auto u = common::Url::Parse(url);
  if (!u.ok()) return Status::InvalidArgument("forward URL: " + u.status().message());
  *base = u->Base();
  *prefix = u->path;
  while (!prefix->empty() && prefix->back() == '/') prefix->pop_back();
  return Status::OK();
}

}  // namespace

std::string ForwardBody(const ForwardTarget& t, const std::vector<Record>& records) {
  if (t.kind == ForwardTarget::Kind::kElasticsearch) {
    std::string out;
    json action = {{"index", {{"_index", t.index}}}};
    std::string action_line = action.dump() + "\n";
    for (const Record& r : records) {
      json doc = FieldsOf(r);
      std::string ts;
      AppendRfc3339Nano(&ts, r.time_ns);
      doc["@timestamp"] = ts;
      doc["message"] = r.message;
      if (!r.level.empty()) doc["level"] = r.level;
      doc["labels"] = LabelsOf(r);
      out += action_line;
      out += doc.dump(-1, ' ', false, json::error_handler_t::replace);
      out += '\n';
    }
    return out;
  }
  // Loki: one stream per label set; a line with a level or fields is sent as JSON.
  std::map<std::string, std::pair<json, json>> streams;
  for (const Record& r : records) {
    auto& s = streams[r.labels.ToString()];
    if (s.first.is_null()) s = {LabelsOf(r), json::array()};
    std::string line = r.message;
    if (!r.level.empty() || !r.fields.empty()) {
      json obj = FieldsOf(r);
      obj["message"] = r.message;
      if (!r.level.empty()) obj["level"] = r.level;
      line = obj.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    s.second.push_back(json::array({std::to_string(r.time_ns), line}));
  }
  json push = {{"streams", json::array()}};
  for (auto& [k, s] : streams) push["streams"].push_back({{"stream", s.first}, {"values", s.second}});
  return push.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::unique_ptr<Forwarder>> Forwarder::Make(ForwardTarget t, LogStore* store) {
  std::string base, prefix;
  RETURN_IF_ERROR(SplitUrl(t.url, &base, &prefix));
  if (!common::NewHttpClient(base, common::HttpClientConfig{}, kTimeoutMs).ok()) {
    return Status::InvalidArgument("invalid forward URL \"" + t.url + "\"");
  }
  std::unique_ptr<Forwarder> f(new Forwarder());
  f->t_ = std::move(t);
  f->store_ = store;
  if (!f->t_.state_path.empty() && file::Exists(f->t_.state_path)) {
    std::string text;
    RETURN_IF_ERROR(file::ReadFile(f->t_.state_path, &text));
    json j = json::parse(text, nullptr, false);
    if (!j.is_object()) return Status::Corruption(f->t_.state_path + ": not a forwarder position file");
    for (auto& [k, v] : j.items()) f->pos_[std::stoll(k)] = v.get<int64_t>();
  }
  return f;
}

Forwarder::~Forwarder() { Stop(); }

Status Forwarder::SaveState() {
  if (t_.state_path.empty()) return Status::OK();
  json j = json::object();
  for (auto& [p, id] : pos_) j[std::to_string(p)] = id;
  return file::WriteFileAtomic(t_.state_path, j.dump() + "\n");
}

Status Forwarder::SendOnce(bool* sent_any) {
  *sent_any = false;
  std::map<int64_t, int64_t> next = pos_;
  ASSIGN_OR_RETURN(std::vector<Record> recs, store_->ReadAfter(&next, t_.batch));
  if (recs.empty()) return Status::OK();
  std::string base, prefix;
  RETURN_IF_ERROR(SplitUrl(t_.url, &base, &prefix));
  ASSIGN_OR_RETURN(std::unique_ptr<httplib::Client> client,
                   common::NewHttpClient(base, common::HttpClientConfig{}, kTimeoutMs));
  httplib::Client& c = *client;
  bool es = t_.kind == ForwardTarget::Kind::kElasticsearch;
  std::string body = ForwardBody(t_, recs);
  auto res = c.Post(prefix + (es ? "/_bulk" : "/loki/api/v1/push"), body,
                    es ? "application/x-ndjson" : "application/json");
  if (!res) return Status::Unavailable("forward to " + t_.url + ": " + httplib::to_string(res.error()));
  if (res->status < 200 || res->status >= 300) {
    return Status::Unavailable("forward to " + t_.url + ": HTTP " + std::to_string(res->status) + ": " +
                               res->body.substr(0, 300));
  }
  if (es) {
    json r = json::parse(res->body, nullptr, false);
    if (r.is_object() && r.value("errors", false) && r["items"].is_array()) {
      size_t rejected = 0, retry = 0;
      for (const json& it : r["items"]) {
        int st = it.is_object() && !it.empty() ? it.begin()->value("status", 0) : 0;
        if (st == 429 || st >= 500) ++retry;
        else if (st >= 400) ++rejected;
      }
      // Overload answers per item: send the whole batch again (the target dedups nothing, so some may repeat).
      if (retry > 0) return Status::Unavailable("forward to " + t_.url + ": " + std::to_string(retry) + " items to retry");
      if (rejected > 0) TW_LOG(Warn, "logs: forward to {}: {} documents rejected", t_.url, rejected);
    }
  }
  pos_ = std::move(next);
  *sent_any = true;
  return SaveState();
}

void Forwarder::Start() {
  thread_ = std::thread([this] {
    int64_t backoff = t_.poll_ms;
    base::MutexLock l(&mu_);
    while (!stop_) {
      l.Unlock();
      bool any = false;
      Status s = SendOnce(&any);
      l.Lock();
      if (!s.ok()) {
        TW_LOG(Warn, "logs: {}", s.ToString());
        backoff = std::min<int64_t>(backoff * 2, 30000);
      } else {
        backoff = t_.poll_ms;
        if (any) continue;  // more may be waiting
      }
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff);
      while (!stop_ && cv_.WaitUntil(&mu_, deadline)) {
      }
    }
  });
}

void Forwarder::Stop() {
  {
    base::MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

}  // namespace trainwatch::logs
