#include "app/api_client.h"
#include "app/export_cmd.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/ascii.h"

namespace trainwatch::app {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr std::string_view kCsvHeader = "rank,key,step,timestamp,value";

bool ParseInt(std::string_view s, int64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

bool ParseDouble(std::string_view s, double* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

bool ValidId(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

// A file written under a temporary name and renamed into place when
// complete, so a failed export leaves no half file behind.
class OutFile {
 public:
  explicit OutFile(fs::path path) : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
    out_.open(tmp_, std::ios::binary | std::ios::trunc);
  }
  ~OutFile() {
    if (!done_) {
      out_.close();
      std::error_code ec;
      fs::remove(tmp_, ec);
    }
  }
  bool ok() const { return static_cast<bool>(out_); }
  void Write(std::string_view s) { out_.write(s.data(), static_cast<std::streamsize>(s.size())); }
  Status Commit() {
    out_.close();
    if (!out_) return Status::IOError(tmp_.string() + ": write failed");
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec) return Status::IOError(path_.string() + ": " + ec.message());
    done_ = true;
    return Status::OK();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_, tmp_;
  std::ofstream out_;
  bool done_ = false;
};

// GET `path` for its envelope's data; `*status` gets the HTTP status.
Result<Json> GetData(httplib::Client& c, const std::string& display, const std::string& path, int* status) {
  auto res = c.Get(path);
  if (!res) return Status::Unavailable(display + path + ": " + httplib::to_string(res.error()));
  *status = res->status;
  if (res->status != 200) return Status::InvalidArgument(display + path + ": " + std::to_string(res->status) + " " + res->body);
  Json env = Json::parse(res->body, nullptr, false);
  if (!env.is_object() || !env.contains("data")) return Status::InvalidArgument(display + path + ": no JSON envelope");
  return std::move(env["data"]);
}

// The media index of run `id` into `out`: per key (GET
// /api/v1/runs/media/keys), its ranks (the last entry of each: `step` at the
// end of time), then each rank's entries in pages by step. Returns the lines.
Result<uint64_t> WriteMediaIndex(ApiClient& client, const std::string& id, OutFile* out) {
  httplib::Client& c = *client.http;
  const std::string base = client.prefix + "/api/v1/runs/media";
  constexpr int64_t kPage = 100000;  // the route's largest limit
  int status = 0;
  auto keys = GetData(c, client.display, base + "/keys?ids=" + PercentEncode(id), &status);
  if (!keys.ok()) {
    // A server from before rich values: nothing to index.
    if (status == 404) return uint64_t{0};
    return keys.error();
  }
  uint64_t lines = 0;
  for (const Json& k : *keys) {
    if (!k.is_object() || k.value("run", std::string()) != id || !k["key"].is_string()) continue;
    const std::string key = k["key"].get<std::string>();
    const std::string query = base + "?ids=" + PercentEncode(id) + "&key=" + PercentEncode(key);
    auto last = GetData(c, client.display, query + "&step=" + std::to_string(INT64_MAX), &status);
    if (!last.ok()) return last.error();
    std::vector<int64_t> ranks;
    for (const Json& e : *last) ranks.push_back(e.contains("rank") && e["rank"].is_number_integer() ? e["rank"].get<int64_t>() : -1);
    for (int64_t rank : ranks) {
      for (int64_t start = 0;;) {
        auto page = GetData(c, client.display,
                            query + "&rank=" + std::to_string(rank) + "&start=" + std::to_string(start) +
                                "&limit=" + std::to_string(kPage),
                            &status);
        if (!page.ok()) return page.error();
        if (!page->is_array()) return Status::InvalidArgument(client.display + base + ": the answer is no array");
        std::string text;
        for (const Json& e : *page) {
          text += MediaIndexLine(e, key, client.prefix).dump(-1, ' ', false, Json::error_handler_t::replace);
          text += '\n';
          lines++;
        }
        out->Write(text);
        if (static_cast<int64_t>(page->size()) < kPage || page->empty()) break;
        int64_t next = page->back().value("step", int64_t{-1}) + 1;
        if (next <= start) break;  // no progress: a server that ignores start
        start = next;
      }
    }
  }
  return lines;
}

}  // namespace

Json MediaIndexLine(const Json& entry, std::string_view key, std::string_view url_prefix) {
  Json line = entry.is_object() ? entry : Json::object();
  line["key"] = std::string(key);
  line.erase("data");  // an image is indexed by its URL, not its bytes
  if (line.contains("url") && line["url"].is_string()) line["url"] = std::string(url_prefix) + line["url"].get<std::string>();
  return line;
}

Status HistoryCsvToJsonl::Feed(std::string_view chunk, std::string* out) {
  size_t start = 0;
  for (size_t i = 0; i < chunk.size(); i++) {
    char c = chunk[i];
    if (c == '"') {
      quoted_ = !quoted_;  // "" inside a quoted key toggles twice
    } else if (c == '\n' && !quoted_) {
      line_.append(chunk.substr(start, i - start));
      start = i + 1;
      RETURN_IF_ERROR(Row(out));
      line_.clear();
    }
  }
  line_.append(chunk.substr(start));
  return Status::OK();
}

Status HistoryCsvToJsonl::Finish(std::string* out) {
  if (quoted_) return Status::Corruption("history CSV: ends inside a quoted key");
  if (!line_.empty()) {
    RETURN_IF_ERROR(Row(out));
    line_.clear();
  }
  if (header_) return Status::Corruption("history CSV: no header");
  return Status::OK();
}

Status HistoryCsvToJsonl::Row(std::string* out) {
  line_no_++;
  std::string_view l = line_;
  if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
  auto bad = [&](std::string_view what) {
    return Status::Corruption("history CSV line " + std::to_string(line_no_) + ": " + std::string(what) + ": \"" +
                              std::string(l.substr(0, 200)) + "\"");
  };
  if (header_) {
    if (l != kCsvHeader) return bad("expected the header " + std::string(kCsvHeader));
    header_ = false;
    return Status::OK();
  }
  if (l.empty()) return Status::OK();
  // rank
  size_t comma = l.find(',');
  if (comma == std::string_view::npos) return bad("expected 5 fields");
  std::string_view rank_s = l.substr(0, comma);
  l.remove_prefix(comma + 1);
  // key, RFC 4180-quoted when it needs to be
  std::string key;
  if (!l.empty() && l.front() == '"') {
    size_t i = 1;
    for (;; i++) {
      if (i >= l.size()) return bad("unterminated quoted key");
      if (l[i] == '"') {
        if (i + 1 < l.size() && l[i + 1] == '"') {
          key += '"';
          i++;
        } else {
          break;
        }
      } else {
        key += l[i];
      }
    }
    l.remove_prefix(i + 1);
    if (l.empty() || l.front() != ',') return bad("expected a comma after the quoted key");
    l.remove_prefix(1);
  } else {
    comma = l.find(',');
    if (comma == std::string_view::npos) return bad("expected 5 fields");
    key = std::string(l.substr(0, comma));
    l.remove_prefix(comma + 1);
  }
  std::string_view f[3];
  for (int i = 0; i < 3; i++) {
    comma = l.find(',');
    if ((i < 2) != (comma != std::string_view::npos)) return bad("expected 5 fields");
    f[i] = l.substr(0, comma);
    if (i < 2) l.remove_prefix(comma + 1);
  }
  Json row = Json::object();
  int64_t rank = 0, step = 0;
  if (rank_s.empty()) {
    row["rank"] = nullptr;
  } else if (ParseInt(rank_s, &rank)) {
    row["rank"] = rank;
  } else {
    return bad("rank is not an integer");
  }
  row["key"] = key;
  if (!ParseInt(f[0], &step)) return bad("step is not an integer");
  row["step"] = step;
  double ts = 0;
  if (!ParseDouble(f[1], &ts)) return bad("timestamp is not a number");
  row["timestamp"] = std::llround(ts * 1000);
  double v = 0;
  if (f[2] == "NaN") {
    row["value"] = "NaN";
  } else if (f[2] == "+Inf" || f[2] == "Inf") {
    row["value"] = "Inf";
  } else if (f[2] == "-Inf") {
    row["value"] = "-Inf";
  } else if (ParseDouble(f[2], &v)) {
    row["value"] = v;
  } else {
    return bad("value is not a number");
  }
  *out += row.dump(-1, ' ', false, Json::error_handler_t::replace);
  *out += '\n';
  rows_++;
  return Status::OK();
}

int RunExport(const ExportOptions& o) {
  auto fail = [](const std::string& msg) {
    std::cerr << "trainwatch export: " << msg << "\n";
    return 1;
  };
  if (!ValidId(o.id)) return fail("run id \"" + o.id + "\": expected 1-64 characters of [A-Za-z0-9_.-]");
  const fs::path dir = o.out_dir.empty() ? fs::path(".") : fs::path(o.out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": " + ec.message());

  auto client = NewApiClient(o.url);
  if (!client.ok()) return fail("--url: " + client.error().message());
  httplib::Client& c = *client->http;
  const std::string& url = client->display;
  c.set_read_timeout(300, 0);
  const std::string run_path = client->prefix + "/api/v1/runs/" + o.id;
  auto res = c.Get(run_path);
  if (!res) return fail(url + run_path + ": " + httplib::to_string(res.error()));
  if (res->status == 404) return fail("run " + o.id + ": not found on " + url);
  if (res->status != 200) return fail(url + run_path + ": " + std::to_string(res->status) + " " + res->body);
  Json env = Json::parse(res->body, nullptr, false);
  if (!env.is_object() || !env["data"].is_object()) return fail(url + run_path + ": the answer is no run");

  OutFile json_file(dir / (o.id + ".json")), csv_file(dir / (o.id + ".csv")), jsonl_file(dir / (o.id + ".jsonl")),
      media_file(dir / (o.id + ".media.jsonl"));
  for (OutFile* f : {&json_file, &csv_file, &jsonl_file, &media_file}) {
    if (!f->ok()) return fail(f->path().string() + ".tmp: cannot be written");
  }
  json_file.Write(env["data"].dump(2, ' ', false, Json::error_handler_t::replace) + "\n");

  // The history as CSV, written as it arrives and turned into JSON lines on the way.
  HistoryCsvToJsonl conv;
  Status conv_status;
  int status = 0;
  std::string body, jsonl;
  auto hist = c.Get(
      run_path + "/history?format=csv",
      [&](const httplib::Response& r) {
        status = r.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (status != 200) {  // an error's body: kept for the message
          body.append(data, std::min(n, size_t{4096} - std::min(body.size(), size_t{4096})));
          return true;
        }
        csv_file.Write(std::string_view(data, n));
        if (conv_status.ok()) conv_status = conv.Feed(std::string_view(data, n), &jsonl);
        if (jsonl.size() >= (1 << 20)) {
          jsonl_file.Write(jsonl);
          jsonl.clear();
        }
        return true;
      });
  if (!hist) return fail(url + run_path + "/history: " + httplib::to_string(hist.error()));
  if (status != 200) return fail(url + run_path + "/history: " + std::to_string(status) + " " + body);
  if (conv_status.ok()) conv_status = conv.Finish(&jsonl);
  if (!conv_status.ok()) return fail(conv_status.message());
  jsonl_file.Write(jsonl);
  auto media = WriteMediaIndex(*client, o.id, &media_file);
  if (!media.ok()) return fail("media index: " + media.error().message());
  for (OutFile* f : {&json_file, &csv_file, &jsonl_file, &media_file}) {
    if (Status s = f->Commit(); !s.ok()) return fail(s.message());
  }
  std::cout << "trainwatch export: run " << o.id << ": " << conv.rows() << " points into " << json_file.path().string()
            << ", " << csv_file.path().string() << " and " << jsonl_file.path().string() << "; " << *media
            << " rich values indexed in " << media_file.path().string() << "\n";
  return 0;
}

}  // namespace trainwatch::app
