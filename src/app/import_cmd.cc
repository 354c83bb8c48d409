#include "app/import_cmd.h"


#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/api_client.h"
#include "runs/run.h"

#include "app/import_tb.h"

namespace trainwatch::app {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr size_t kBatchPoints = 5000;

Result<std::string> ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return Status::IOError(p.string() + ": cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// MLflow's meta.yaml files are flat `key: value` maps (values plain,
// single- or double-quoted scalars, or `[]`); nothing else is read.
std::vector<std::pair<std::string, std::string>> ParseMeta(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == ' ' || line[0] == '-' || line[0] == '#') continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(' '));
    while (!v.empty() && (v.back() == '\r' || v.back() == ' ')) v.pop_back();
    if (v.size() >= 2 && ((v.front() == '\'' && v.back() == '\'') || (v.front() == '"' && v.back() == '"'))) {
      char q = v.front();
      v = v.substr(1, v.size() - 2);
      if (q == '\'') {  // '' is a quote inside single quotes
        std::string u;
        for (size_t i = 0; i < v.size(); i++) {
          u += v[i];
          if (v[i] == '\'' && i + 1 < v.size() && v[i + 1] == '\'') i++;
        }
        v = u;
      }
    }
    out.emplace_back(std::move(key), std::move(v));
  }
  return out;
}

std::string Get(const std::vector<std::pair<std::string, std::string>>& m, std::string_view k) {
  for (const auto& [key, v] : m) {
    if (key == k) return v;
  }
  return {};
}

int64_t ToInt(const std::string& s) {
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// Every file under `root` as (path relative to root with '/', contents):
// MLflow keeps a key with '/' in nested directories.
void ReadTree(const fs::path& root, std::vector<std::pair<std::string, std::string>>* out,
              std::vector<std::string>* warnings) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    auto text = ReadFile(it->path());
    if (!text.ok()) {
      warnings->push_back(text.error().message());
      continue;
    }
    out->emplace_back(fs::relative(it->path(), root, ec).generic_string(), std::move(*text));
  }
  if (ec) warnings->push_back(root.string() + ": " + ec.message());
  std::sort(out->begin(), out->end());
}

// A metric value as MLflow writes it (Python's repr of a float).
bool ParseValue(std::string_view s, double* v) {
  if (s == "nan" || s == "NaN") {
    *v = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (s == "inf" || s == "Infinity") {
    *v = std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == "-inf" || s == "-Infinity") {
    *v = -std::numeric_limits<double>::infinity();
    return true;
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseInt(std::string_view s, int64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

std::vector<MlflowRun::Point> ParseMetric(const std::string& path, const std::string& text,
                                          std::vector<std::string>* warnings) {
  std::vector<MlflowRun::Point> pts;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); n++) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::istringstream f(line);
    std::string ts, value, step, extra;
    f >> ts >> value >> step >> extra;
    MlflowRun::Point p{0, 0, 0};
    if (!ParseInt(ts, &p.ts_ms) || !ParseValue(value, &p.value) || (!step.empty() && !ParseInt(step, &p.step)) ||
        !extra.empty()) {
      warnings->push_back(path + ":" + std::to_string(n) + ": expected \"timestamp value [step]\", got \"" + line + "\"");
      continue;
    }
    pts.push_back(p);
  }
  return pts;
}

// A param as a config value: a number when it reads as one, else the string.
Json ParamJson(const std::string& v) {
  double d;
  if (!v.empty() && v.find_first_of(" \t\n") == std::string::npos && ParseValue(v, &d) && std::isfinite(d)) {
    return d;
  }
  if (v == "True" || v == "true") return true;
  if (v == "False" || v == "false") return false;
  return v;
}

// The run `r` into the server; returns the values the server stored anew.
Result<size_t> SendRun(ApiClient& c, const MlflowRun& r, const std::string& project) {
  const std::string id = "mlflow-" + r.run_id;
  Json create = {{"id", id}, {"project", project}, {"name", r.name.empty() ? r.run_id : r.name}};
  Json config = Json::object();
  for (const auto& [k, v] : r.params) config[k] = ParamJson(v);
  create["config"] = config;
  Json tags = Json::array();
  for (const auto& [k, v] : r.tags) {
    if (k == "mlflow.source.git.commit") create["git_commit"] = v;
    else if (k == "mlflow.source.name") create["command"] = v;
    else if (k.rfind("mlflow.", 0) != 0) tags.push_back(v.empty() ? k : k + "=" + v);
  }
  create["tags"] = tags;
  if (r.start_time_ms > 0) create["start_time"] = r.start_time_ms / 1000.0;
  RETURN_IF_ERROR(PostJson(c, "/api/v1/runs", create, nullptr));
  size_t stored = 0;
  for (const auto& [key, pts] : r.metrics) {
    const std::string prefix = "mlflow." + r.run_id + "." + std::to_string(ImportHash(key)) + ".";
    for (size_t i = 0, n = 0; i < pts.size(); i += kBatchPoints, n++) {
      Json points = Json::array();
      for (size_t j = i; j < std::min(pts.size(), i + kBatchPoints); j++) {
        points.push_back({{"step", pts[j].step}, {"ts", pts[j].ts_ms}, {"values", {{key, runs::NumberJson(pts[j].value)}}}});
      }
      Json answer;
      RETURN_IF_ERROR(PostJson(c, "/api/v1/runs/" + id + "/batches", {{"batch_id", prefix + std::to_string(n)}, {"points", points}},
                           &answer));
      if (answer.is_object() && answer["data"].is_object()) {
        stored += answer["data"].value("accepted", size_t{0});
        for (const Json& rej : answer["data"].value("rejected", Json::array())) {
          std::cerr << "trainwatch import: run " << r.run_id << " metric " << key << ": " << rej.dump() << "\n";
        }
      }
    }
  }
  if (r.status == "FINISHED" || r.status == "FAILED" || r.status == "KILLED") {
    Json fin = {{"status", r.status == "FINISHED" ? "finished" : "failed"}};
    if (r.end_time_ms > 0) fin["end_time"] = r.end_time_ms / 1000.0;
    RETURN_IF_ERROR(PostJson(c, "/api/v1/runs/" + id + "/finish", fin, nullptr));
  }
  return stored;
}

}  // namespace

uint64_t ImportHash(std::string_view s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

Result<ApiClient> ImportClient(const std::string& url) {
  auto c = NewApiClient(url);
  if (!c.ok()) return c.error().Annotate("--url");
  c->http->set_read_timeout(300, 0);  // a run's batches are large
  c->http->set_write_timeout(300, 0);
  return c;
}

Status PostJson(ApiClient& c, const std::string& path, const Json& body, Json* answer) {
  // Keys are free text: bytes that are not UTF-8 are sent as U+FFFD rather than failing the dump.
  auto res = c.http->Post(c.prefix + path, body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
  if (!res) return Status::Unavailable(path + ": " + httplib::to_string(res.error()));
  if (res->status / 100 != 2) return Status::InvalidArgument(path + ": " + std::to_string(res->status) + " " + res->body);
  if (answer != nullptr) *answer = Json::parse(res->body, nullptr, false);
  return Status::OK();
}

Result<std::vector<MlflowRun>> ReadMlflowStore(const std::string& dir, std::vector<std::string>* warnings) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::InvalidArgument(dir + ": not a directory");
  std::vector<fs::path> experiments;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory() && fs::exists(e.path() / "meta.yaml") && e.path().filename().string()[0] != '.') {
      experiments.push_back(e.path());
    }
  }
  if (ec) return Status::IOError(dir + ": " + ec.message());
  if (experiments.empty()) {
    return Status::InvalidArgument(dir + ": no MLflow experiment in it (expected <experiment id>/meta.yaml: an mlruns directory)");
  }
  std::sort(experiments.begin(), experiments.end());
  std::vector<MlflowRun> runs;
  for (const fs::path& exp : experiments) {
    auto meta = ReadFile(exp / "meta.yaml");
    if (!meta.ok()) {
      warnings->push_back(meta.error().message());
      continue;
    }
    auto em = ParseMeta(*meta);
    if (Get(em, "lifecycle_stage") == "deleted") continue;
    std::string exp_name = Get(em, "name");
    if (exp_name.empty()) exp_name = exp.filename().string();
    std::vector<fs::path> run_dirs;
    for (const auto& e : fs::directory_iterator(exp, ec)) {
      if (e.is_directory() && fs::exists(e.path() / "meta.yaml")) run_dirs.push_back(e.path());
    }
    std::sort(run_dirs.begin(), run_dirs.end());
    for (const fs::path& rd : run_dirs) {
      auto rmeta = ReadFile(rd / "meta.yaml");
      if (!rmeta.ok()) {
        warnings->push_back(rmeta.error().message());
        continue;
      }
      auto rm = ParseMeta(*rmeta);
      if (Get(rm, "lifecycle_stage") == "deleted") continue;
      MlflowRun r;
      r.experiment = exp_name;
      r.run_id = Get(rm, "run_id");
      if (r.run_id.empty()) r.run_id = Get(rm, "run_uuid");
      if (r.run_id.empty()) r.run_id = rd.filename().string();
      bool id_ok = !r.run_id.empty() && r.run_id.size() <= 57 &&
                   std::all_of(r.run_id.begin(), r.run_id.end(), [](char ch) {
                     return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-';
                   });
      if (!id_ok) {
        warnings->push_back((rd / "meta.yaml").string() + ": run id \"" + r.run_id + "\" is not 1-57 of [A-Za-z0-9_.-]; run skipped");
        continue;
      }
      r.name = Get(rm, "run_name");
      static const char* kStatus[] = {"", "RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED"};
      int64_t st = ToInt(Get(rm, "status"));
      r.status = st >= 1 && st <= 5 ? kStatus[st] : "FINISHED";
      r.start_time_ms = ToInt(Get(rm, "start_time"));
      r.end_time_ms = ToInt(Get(rm, "end_time"));
      ReadTree(rd / "params", &r.params, warnings);
      ReadTree(rd / "tags", &r.tags, warnings);
      for (auto& [k, v] : r.tags) {
        if (k == "mlflow.runName" && r.name.empty()) r.name = v;
      }
      std::vector<std::pair<std::string, std::string>> metric_files;
      ReadTree(rd / "metrics", &metric_files, warnings);
      for (auto& [key, text] : metric_files) {
        r.metrics.emplace_back(key, ParseMetric((rd / "metrics" / key).string(), text, warnings));
      }
      runs.push_back(std::move(r));
    }
  }
  return runs;
}

int RunImport(const ImportOptions& o) {
  if (o.format == "tensorboard") return RunImportTensorboard(o);
  std::vector<std::string> warnings;
  auto runs = ReadMlflowStore(o.dir, &warnings);
  for (const std::string& w : warnings) std::cerr << "trainwatch import: " << w << "\n";
  if (!runs.ok()) {
    std::cerr << "trainwatch import: " << runs.error().message() << "\n";
    return 1;
  }
  auto client = ImportClient(o.url);
  if (!client.ok()) {
    std::cerr << "trainwatch import: " << client.error().message() << "\n";
    return 1;
  }
  ApiClient& c = *client;
  size_t values = 0, logged = 0;
  for (const MlflowRun& r : *runs) {
    for (const auto& m : r.metrics) logged += m.second.size();
    auto n = SendRun(c, r, o.project.empty() ? r.experiment : o.project);
    if (!n.ok()) {
      std::cerr << "trainwatch import: run " << r.run_id << ": " << n.error().message() << "\n";
      return 1;
    }
    values += *n;
  }
  std::cout << "trainwatch import: " << runs->size() << " runs, " << logged << " metric values (" << values
            << " stored now, the rest already there) from " << o.dir << " into " << c.display << "\n";
  if (!warnings.empty()) std::cout << "trainwatch import: " << warnings.size() << " warnings (above): those parts were skipped\n";
  return 0;
}

}  // namespace trainwatch::app
