#pragma once
// trainwatch C++ client: header-only, C++17, POSIX sockets, no dependency.
// The same model as the Python client (clients/python), same wire contract
// (docs/runs-api.md), same spool format (so `python -m trainwatch sync`
// can send what a C++ run left behind):
//
//   trainwatch::client::Options o;
//   o.project = "llama"; o.config_json = R"({"lr": 3e-4})"; o.total_steps = 20000;
//   std::string err;
//   auto run = trainwatch::client::Run::Init(o, &err);  // null + err when the server refuses the run
//   run->Log({{"loss", 0.3}, {"lr", 1e-4}}, step);      // queues and returns
//   run->Log("weights", trainwatch::Histogram(w), step); // rich values: Histogram, Image, Text, Table
//   run->Finish();                                      // flushes; rank 0 sets the status
//
// Log() only queues; a background thread batches the points (idempotent
// batch ids `<run id>.<rank>.<nonce>.<seq>`), sends them, and while the server is
// unreachable writes them to <spool dir>/op-<seq>.json, replayed oldest
// first. Each point carries the wall-clock time of its Log() call (unix ms;
// points may share one): the server keeps every point by step.
// Memory is bounded: past max_queue_points queued points (or max_queue_bytes
// of rich values), Log() spills them to the spool. Rank and world size
// default to $RANK and $WORLD_SIZE.
//
// Rich values (docs/runs-api.md, "Rich values"): trainwatch::Histogram (of
// values in equal-width bins, or FromCounts(counts, edges)),
// trainwatch::Image (PNG or JPEG bytes, or FromFile; the format read from
// the signature; a caption), trainwatch::Text (markdown) and
// trainwatch::Table (columns and rows of string, number, bool or null
// cells) are logged at a step next to the scalars, with Log(key, value,
// step) or Log(scalars, {{key, value}, ...}, step), and go in the same
// batches as {"_type": ...} objects (images base64-encoded). A value over
// the server's limits is built with ok() false and dropped by Log() with a
// warning.

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace trainwatch {
namespace client {

struct Options {
  std::string url;          // empty: $TRAINWATCH_URL, then http://127.0.0.1:9800 (http only; user:password@ for basic auth)
  // Bearer token of a server with --web.tokens.file; empty: $TRAINWATCH_TOKEN.
  // Without one: the URL's user and password, then $TRAINWATCH_USERNAME/PASSWORD.
  std::string token;
  std::string project = "default";
  std::string name;         // empty: the server's choice
  std::string id;           // empty: $TRAINWATCH_RUN_ID, then random; the same id resumes a run
  std::string config_json;  // a JSON object, stored as the run's config (rank 0)
  std::vector<std::string> tags;
  int64_t total_steps = -1;  // < 0: unknown
  int rank = -1;             // < 0: $RANK, then 0
  int world_size = -1;       // < 0: $WORLD_SIZE, then 1
  std::string host;          // empty: gethostname()
  std::string command;       // the command line to record
  std::string spool_dir;     // root; empty: $TRAINWATCH_SPOOL, then ~/.cache/trainwatch/spool
  double flush_interval_s = 0.5;
  double heartbeat_interval_s = 30;
  double finish_timeout_s = 60;
  double timeout_s = 10;     // per HTTP request
  size_t batch_points = 1000;
  size_t batch_bytes = 8u << 20;       // a batch stops growing past this much JSON (rich values are large)
  size_t max_queue_points = 20000;
  size_t max_queue_bytes = 64u << 20;  // rich values queued past this much JSON spill to the spool too
  bool verbose = true;       // warnings on stderr (server unreachable, refused values)
  // The time stamped on logged points, unix ms; empty: the system clock.
  std::function<int64_t()> now_ms;
};

namespace detail {

inline int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
inline double MonoSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Percent-encodes all but RFC 3986's unreserved characters (a query value).
inline std::string QueryEscape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

inline void AppendJsonString(std::string* out, const std::string& s) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

inline void AppendJsonNumber(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("\"NaN\"");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "\"Inf\"" : "\"-Inf\"");
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out->append(buf);
  }
}

// The string value of "key" in a JSON text (first occurrence, simple escapes), or "".
inline std::string FindJsonString(const std::string& doc, const std::string& key) {
  std::string pat = "\"" + key + "\":";
  size_t p = doc.find(pat);
  if (p == std::string::npos) return "";
  p += pat.size();
  while (p < doc.size() && doc[p] == ' ') p++;
  if (p >= doc.size() || doc[p] != '"') return "";
  std::string out;
  for (p++; p < doc.size() && doc[p] != '"'; p++) {
    if (doc[p] == '\\' && p + 1 < doc.size()) p++;
    out.push_back(doc[p]);
  }
  return out;
}

// The string value of `key` among the members of the objects nested `depth`
// levels deep (1: the document's own members), skipping deeper objects and
// strings, so a run's "name" is not taken from inside its config; "" when
// absent or not a string.
inline std::string FindJsonStringAt(const std::string& doc, const std::string& key, int depth) {
  int level = 0;
  for (size_t p = 0; p < doc.size(); p++) {
    char c = doc[p];
    if (c == '{' || c == '[') {
      level++;
    } else if (c == '}' || c == ']') {
      level--;
    } else if (c == '"') {
      size_t start = p + 1;
      for (p++; p < doc.size() && doc[p] != '"'; p++) {
        if (doc[p] == '\\') p++;
      }
      if (level != depth || doc.compare(start, p - start, key) != 0 || p - start != key.size()) continue;
      size_t q = p + 1;
      while (q < doc.size() && doc[q] == ' ') q++;
      if (q >= doc.size() || doc[q] != ':') continue;  // a value, not a member name
      return FindJsonString(doc.substr(start - 1), key);
    }
  }
  return "";
}

struct Url {
  std::string host = "127.0.0.1";
  std::string port = "80";
  std::string prefix;
  std::string user, password;  // from user:password@; empty: none
  bool has_userinfo = false;
  bool ok = false;
};

inline std::string Base64(const std::string& s) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t n = static_cast<uint32_t>(static_cast<unsigned char>(s[i])) << 16;
    if (i + 1 < s.size()) n |= static_cast<uint32_t>(static_cast<unsigned char>(s[i + 1])) << 8;
    if (i + 2 < s.size()) n |= static_cast<unsigned char>(s[i + 2]);
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(i + 1 < s.size() ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back(i + 2 < s.size() ? kAlphabet[n & 63] : '=');
  }
  return out;
}

inline std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

inline Url ParseUrl(const std::string& url) {
  Url u;
  std::string s = url;
  const std::string scheme = "http://";
  if (s.compare(0, scheme.size(), scheme) == 0) {
    s = s.substr(scheme.size());
  } else if (s.find("://") != std::string::npos) {
    return u;  // https and others: not supported by this client
  }
  size_t slash = s.find('/');
  std::string hostport = s.substr(0, slash);
  if (slash != std::string::npos) u.prefix = s.substr(slash);
  size_t at = hostport.rfind('@');
  if (at != std::string::npos) {
    std::string userinfo = hostport.substr(0, at);
    hostport = hostport.substr(at + 1);
    size_t c = userinfo.find(':');
    u.user = PercentDecode(userinfo.substr(0, c));
    if (c != std::string::npos) u.password = PercentDecode(userinfo.substr(c + 1));
    u.has_userinfo = true;
  }
  while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
  size_t colon = hostport.rfind(':');
  if (colon != std::string::npos && hostport.find(']') == std::string::npos) {
    u.host = hostport.substr(0, colon);
    u.port = hostport.substr(colon + 1);
  } else if (!hostport.empty()) {
    u.host = hostport;
  }
  if (u.host.size() > 2 && u.host.front() == '[') u.host = u.host.substr(1, u.host.size() - 2);
  u.ok = !u.host.empty() && !u.port.empty();
  return u;
}

// One keep-alive HTTP/1.1 connection. Status < 0: unreachable / broken.
class Http {
 public:
  // `authorization`: the Authorization header's value; empty: none.
  Http(Url url, double timeout_s, std::string authorization = "")
      : url_(std::move(url)), timeout_s_(timeout_s), authorization_(std::move(authorization)) {}
  ~Http() { Close(); }
  Http(const Http&) = delete;
  Http& operator=(const Http&) = delete;

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int Post(const std::string& path, const std::string& body, std::string* answer,
           const char* content_type = "application/json") {
    return Request("POST", path, body, answer, content_type);
  }
  int Get(const std::string& path, std::string* answer) { return Request("GET", path, "", answer, nullptr); }

  int Request(const char* method, const std::string& path, const std::string& body, std::string* answer,
              const char* content_type) {
    std::string req = std::string(method) + " " + url_.prefix + path + " HTTP/1.1\r\nHost: " + url_.host + ":" +
                      url_.port + "\r\n";
    if (!authorization_.empty()) req += "Authorization: " + authorization_ + "\r\n";
    if (content_type != nullptr) req += std::string("Content-Type: ") + content_type + "\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: keep-alive\r\n\r\n" + body;
    for (int attempt = 0; attempt < 2; attempt++) {
      bool fresh = fd_ < 0;
      if (fresh && !Connect()) return -1;
      int status = Exchange(req, answer);
      if (status >= 0) return status;
      Close();
      if (fresh) return -1;  // a kept-alive connection the server closed: one retry on a fresh one
    }
    return -1;
  }

 private:
  bool Connect() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(url_.host.c_str(), url_.port.c_str(), &hints, &res) != 0) return false;
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      int fl = fcntl(fd, F_GETFL, 0);
      fcntl(fd, F_SETFL, fl | O_NONBLOCK);
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof err;
        if (poll(&p, 1, static_cast<int>(timeout_s_ * 1000)) == 1 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
          rc = 0;
        }
      }
      if (rc == 0) {
        fcntl(fd, F_SETFL, fl);
        timeval tv{static_cast<time_t>(timeout_s_), static_cast<suseconds_t>(std::fmod(timeout_s_, 1.0) * 1e6)};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fd_ = fd;
        break;
      }
      ::close(fd);
    }
    freeaddrinfo(res);
    return fd_ >= 0;
  }

  bool SendAll(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads until `buf_` holds at least n bytes; false on EOF or error.
  bool Fill(size_t n) {
    char tmp[16384];
    while (buf_.size() < n) {
      ssize_t r = ::recv(fd_, tmp, sizeof tmp, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      buf_.append(tmp, static_cast<size_t>(r));
    }
    return true;
  }

  bool ReadLine(std::string* line) {
    for (;;) {
      size_t p = buf_.find("\r\n");
      if (p != std::string::npos) {
        *line = buf_.substr(0, p);
        buf_.erase(0, p + 2);
        return true;
      }
      if (!Fill(buf_.size() + 1)) return false;
    }
  }

  int Exchange(const std::string& req, std::string* answer) {
    buf_.clear();
    if (!SendAll(req)) return -1;
    std::string line;
    if (!ReadLine(&line) || line.compare(0, 5, "HTTP/") != 0 || line.size() < 12) return -1;
    int status = std::atoi(line.c_str() + 9);
    int64_t length = -1;
    bool chunked = false, close = false;
    for (;;) {
      if (!ReadLine(&line)) return -1;
      if (line.empty()) break;
      std::string lower = line;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      if (lower.compare(0, 15, "content-length:") == 0) length = std::atoll(lower.c_str() + 15);
      if (lower.compare(0, 18, "transfer-encoding:") == 0 && lower.find("chunked") != std::string::npos) {
        chunked = true;
      }
      if (lower.compare(0, 11, "connection:") == 0 && lower.find("close") != std::string::npos) close = true;
    }
    answer->clear();
    if (chunked) {
      for (;;) {
        if (!ReadLine(&line)) return -1;
        size_t n = std::strtoul(line.c_str(), nullptr, 16);
        if (!Fill(n + 2)) return -1;
        answer->append(buf_, 0, n);
        buf_.erase(0, n + 2);
        if (n == 0) break;
      }
    } else if (length >= 0) {
      if (!Fill(static_cast<size_t>(length))) return -1;
      answer->assign(buf_, 0, static_cast<size_t>(length));
    } else {
      while (Fill(buf_.size() + 1)) {
      }
      *answer = buf_;
      close = true;
    }
    if (close) Close();
    return status;
  }

  Url url_;
  double timeout_s_;
  std::string authorization_;
  int fd_ = -1;
  std::string buf_;
};

inline void MakeDirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); i++) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty()) mkdir(cur.c_str(), 0755);
    }
    if (i < path.size()) cur.push_back(path[i]);
  }
}

inline bool WriteFileAtomic(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return false;
    f << data;
    if (!f.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

inline std::string EnvOr(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : def;
}

}  // namespace detail


// ---- rich values (docs/runs-api.md, "Rich values") ----

namespace detail {

// `s` with every byte sequence that is not UTF-8 replaced by U+FFFD, so a
// JSON body with it stays valid.
inline std::string ValidUtf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; ok && k < n; k++) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      ok = (d & 0xc0) == 0x80;
      cp = (cp << 6) | (d & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    ok = ok && !(n == 2 && cp < 0x80) && !(n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) &&
         !(n == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      out.append("\xef\xbf\xbd");
      i++;
    }
  }
  return out;
}

inline void AppendJsonText(std::string* out, const std::string& s) { AppendJsonString(out, ValidUtf8(s)); }

}  // namespace detail

// The server's limits for rich values.
constexpr size_t kMaxHistogramBuckets = 4096;
constexpr size_t kMaxImageBytes = 16u << 20;
constexpr size_t kMaxTextBytes = 1u << 20;
constexpr size_t kMaxTableColumns = 1000;
constexpr size_t kMaxTableCells = 100000;

// A rich value logged at a step next to scalars: a Histogram, Image, Text
// or Table. Each is a snapshot taken when it is built (counted, copied,
// encoded); json() is the `{"_type": ...}` object a batch carries. A value
// the server would refuse is built with ok() false and error() saying why;
// Run::Log() drops it with a warning rather than failing the training.
class Media {
 public:
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& json() const { return json_; }
  const std::string& type() const { return type_; }  // "histogram", "image", "text" or "table"

 protected:
  explicit Media(std::string type) : type_(std::move(type)) {}
  void Fail(const std::string& why) {
    error_ = "trainwatch." + std::string(type_ == "histogram" ? "Histogram" : type_ == "image" ? "Image"
                                         : type_ == "text"    ? "Text"
                                                              : "Table") +
             ": " + why;
    json_.clear();
  }
  std::string type_, json_, error_;
};

// A histogram: of values (NaN and infinities dropped) in `bins` equal-width
// buckets between their min and max (constant values: one bucket [v, v, n]),
// or given as counts and edges (edges.size() == counts.size() + 1,
// ascending), as numpy.histogram returns them:
//   trainwatch::Histogram(weights, 64)
//   trainwatch::Histogram(tensor.data_ptr<float>(), tensor.numel())
//   trainwatch::Histogram::FromCounts({3, 5}, {0.0, 0.5, 1.0})
// Sent as {"_type": "histogram", "buckets": [[lower, upper, count], ...]}.
class Histogram : public Media {
 public:
  struct Bucket {
    double lower, upper, count;
  };
  explicit Histogram(const std::vector<double>& values, int bins = 64) : Media("histogram") {
    Count(values.data(), values.size(), bins);
  }
  template <typename T, typename std::enable_if<std::is_arithmetic<T>::value, int>::type = 0>
  explicit Histogram(const std::vector<T>& values, int bins = 64) : Media("histogram") {
    Count(values.data(), values.size(), bins);
  }
  template <typename T, typename std::enable_if<std::is_arithmetic<T>::value, int>::type = 0>
  Histogram(const T* values, size_t n, int bins = 64) : Media("histogram") {
    Count(values, n, bins);
  }
  static Histogram FromCounts(const std::vector<double>& counts, const std::vector<double>& edges) {
    Histogram h;
    std::string why = CheckCounts(counts, edges);
    if (!why.empty()) {
      h.Fail(why);
      return h;
    }
    std::vector<Bucket> b;
    for (size_t i = 0; i < counts.size(); i++) b.push_back({edges[i], edges[i + 1], counts[i]});
    h.Set(std::move(b));
    return h;
  }
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  Histogram() : Media("histogram") {}

  static std::string CheckCounts(const std::vector<double>& counts, const std::vector<double>& edges) {
    if (counts.empty()) return "counts is empty";
    if (counts.size() > kMaxHistogramBuckets) {
      return std::to_string(counts.size()) + " buckets: at most " + std::to_string(kMaxHistogramBuckets);
    }
    if (edges.size() != counts.size() + 1) {
      return std::to_string(edges.size()) + " edges for " + std::to_string(counts.size()) +
             " counts: expected counts.size() + 1";
    }
    for (size_t i = 0; i < edges.size(); i++) {
      if (!std::isfinite(edges[i])) return "edges[" + std::to_string(i) + "] is not finite";
      if (i > 0 && edges[i] < edges[i - 1]) {
        return "edges[" + std::to_string(i) + "] is below edges[" + std::to_string(i - 1) + "]: expected ascending";
      }
    }
    for (size_t i = 0; i < counts.size(); i++) {
      if (!std::isfinite(counts[i]) || counts[i] < 0) return "counts[" + std::to_string(i) + "]: expected a finite count >= 0";
    }
    return "";
  }

  template <typename T>
  void Count(const T* values, size_t n, int bins) {
    if (bins < 1 || static_cast<size_t>(bins) > kMaxHistogramBuckets) {
      return Fail("bins=" + std::to_string(bins) + ": expected 1.." + std::to_string(kMaxHistogramBuckets));
    }
    double lo = 0, hi = 0;
    size_t finite = 0;
    for (size_t i = 0; i < n; i++) {
      const double v = static_cast<double>(values[i]);
      if (!std::isfinite(v)) continue;
      lo = finite == 0 ? v : std::min(lo, v);
      hi = finite == 0 ? v : std::max(hi, v);
      finite++;
    }
    if (finite == 0) return Fail("no finite values to count");
    if (lo == hi) return Set({{lo, hi, static_cast<double>(finite)}});
    std::vector<double> counts(static_cast<size_t>(bins), 0.0);
    const double scale = bins / (hi - lo);
    for (size_t i = 0; i < n; i++) {
      const double v = static_cast<double>(values[i]);
      if (!std::isfinite(v)) continue;
      const double pos = (v - lo) * scale;
      const size_t k = pos >= bins - 1 ? static_cast<size_t>(bins - 1) : static_cast<size_t>(pos);
      counts[k] += 1;
    }
    std::vector<Bucket> b;
    const double width = (hi - lo) / bins;
    for (int i = 0; i < bins; i++) {
      b.push_back({lo + i * width, i + 1 == bins ? hi : lo + (i + 1) * width, counts[static_cast<size_t>(i)]});
    }
    Set(std::move(b));
  }

  void Set(std::vector<Bucket> b) {
    buckets_ = std::move(b);
    json_ = "{\"_type\":\"histogram\",\"buckets\":[";
    for (size_t i = 0; i < buckets_.size(); i++) {
      json_ += i ? ",[" : "[";
      detail::AppendJsonNumber(&json_, buckets_[i].lower);
      json_ += ",";
      detail::AppendJsonNumber(&json_, buckets_[i].upper);
      json_ += ",";
      detail::AppendJsonNumber(&json_, buckets_[i].count);
      json_ += "]";
    }
    json_ += "]}";
  }

  std::vector<Bucket> buckets_;
};

// An image: the bytes of a PNG or JPEG file (the format read from their
// signature), at most 16 MiB, with an optional caption:
//   trainwatch::Image(png_bytes, "epoch 3")
//   trainwatch::Image::FromFile("samples/0003.jpg")
// Sent as {"_type": "image", "format": "png" | "jpeg", "data": base64, "caption"?}.
class Image : public Media {
 public:
  explicit Image(const std::string& bytes, const std::string& caption = "") : Media("image") { Set(bytes, caption); }
  static Image FromFile(const std::string& path, const std::string& caption = "") {
    Image img;
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      img.Fail("cannot read " + path + ": " + std::strerror(errno));
      return img;
    }
    std::string bytes;
    char buf[65536];
    while (f.read(buf, sizeof buf) || f.gcount() > 0) {
      bytes.append(buf, static_cast<size_t>(f.gcount()));
      if (bytes.size() > kMaxImageBytes) break;  // Set() says it is too large
    }
    img.Set(bytes, caption, path);
    return img;
  }
  // "png" or "jpeg" by the bytes' signature; "" for anything else.
  static std::string FormatOf(const std::string& bytes) {
    if (bytes.size() >= 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0) return "png";
    if (bytes.size() >= 3 && bytes.compare(0, 3, "\xff\xd8\xff", 3) == 0) return "jpeg";
    return "";
  }
  const std::string& format() const { return format_; }

 private:
  Image() : Media("image") {}
  void Set(const std::string& bytes, const std::string& caption, const std::string& what = "the data") {
    format_ = FormatOf(bytes);
    if (format_.empty()) return Fail(what + " is neither PNG nor JPEG");
    if (bytes.size() > kMaxImageBytes) return Fail(what + " is over 16 MiB (the server's limit for an image)");
    json_ = "{\"_type\":\"image\",\"format\":\"" + format_ + "\",\"data\":\"" + detail::Base64(bytes) + "\"";
    if (!caption.empty()) {
      json_ += ",\"caption\":";
      detail::AppendJsonText(&json_, caption);
    }
    json_ += "}";
  }
  std::string format_;
};

// Markdown text, at most 1 MiB. Sent as {"_type": "text", "text": ...}.
class Text : public Media {
 public:
  explicit Text(const std::string& markdown) : Media("text") {
    if (markdown.size() > kMaxTextBytes) {
      Fail(std::to_string(markdown.size()) + " bytes: at most " + std::to_string(kMaxTextBytes) + " (1 MiB)");
      return;
    }
    json_ = "{\"_type\":\"text\",\"text\":";
    detail::AppendJsonText(&json_, markdown);
    json_ += "}";
  }
};

// A table cell: a string, a number (integers exactly), a boolean or null
// (also what NaN and infinities become: JSON has no NaN).
class Cell {
 public:
  Cell() = default;
  Cell(std::nullptr_t) {}  // NOLINT: implicit, as every cell type
  Cell(const char* s) : kind_(s != nullptr ? kString : kNull), s_(s != nullptr ? s : "") {}  // NOLINT
  Cell(std::string s) : kind_(kString), s_(std::move(s)) {}  // NOLINT
  Cell(bool b) : kind_(kBool), i_(b ? 1 : 0) {}  // NOLINT
  template <typename T,
            typename std::enable_if<std::is_integral<T>::value && !std::is_same<T, bool>::value, int>::type = 0>
  Cell(T v) : kind_(kInt), i_(static_cast<int64_t>(v)) {  // NOLINT
    if (std::is_unsigned<T>::value && static_cast<uint64_t>(v) > static_cast<uint64_t>(INT64_MAX)) {
      kind_ = kDouble, d_ = static_cast<double>(v);
    }
  }
  template <typename T, typename std::enable_if<std::is_floating_point<T>::value, int>::type = 0>
  Cell(T v) : kind_(std::isfinite(v) ? kDouble : kNull), d_(static_cast<double>(v)) {}  // NOLINT

  void AppendJson(std::string* out) const {
    switch (kind_) {
      case kNull: out->append("null"); break;
      case kString: detail::AppendJsonText(out, s_); break;
      case kBool: out->append(i_ ? "true" : "false"); break;
      case kInt: out->append(std::to_string(i_)); break;
      case kDouble: detail::AppendJsonNumber(out, d_); break;
    }
  }

 private:
  enum Kind { kNull, kString, kBool, kInt, kDouble };
  Kind kind_ = kNull;
  std::string s_;
  int64_t i_ = 0;
  double d_ = 0;
};

// A table: column names and rows of cells, each row as long as the columns;
// 1-1000 columns, at most 100,000 cells:
//   trainwatch::Table({"input", "label", "score"}, {{"a cat", 3, 0.91}, {"a dog", 5, nullptr}})
// Sent as {"_type": "table", "columns": [...], "rows": [[...], ...]}.
class Table : public Media {
 public:
  Table(const std::vector<std::string>& columns, const std::vector<std::vector<Cell>>& rows) : Media("table") {
    if (columns.empty() || columns.size() > kMaxTableColumns) {
      Fail(std::to_string(columns.size()) + " columns: expected 1.." + std::to_string(kMaxTableColumns));
      return;
    }
    if (columns.size() * rows.size() > kMaxTableCells) {
      Fail(std::to_string(columns.size() * rows.size()) + " cells: at most " + std::to_string(kMaxTableCells));
      return;
    }
    json_ = "{\"_type\":\"table\",\"columns\":[";
    for (size_t c = 0; c < columns.size(); c++) {
      if (c) json_ += ",";
      detail::AppendJsonText(&json_, columns[c]);
    }
    json_ += "],\"rows\":[";
    for (size_t r = 0; r < rows.size(); r++) {
      if (rows[r].size() != columns.size()) {
        Fail("row " + std::to_string(r) + " has " + std::to_string(rows[r].size()) + " cells for " +
             std::to_string(columns.size()) + " columns");
        return;
      }
      json_ += r ? ",[" : "[";
      for (size_t c = 0; c < rows[r].size(); c++) {
        if (c) json_ += ",";
        rows[r][c].AppendJson(&json_);
      }
      json_ += "]";
    }
    json_ += "]}";
  }
};

class Run {
 public:
  // Registers the run (or resumes the run with options.id) and starts the
  // sender. Null with *error set when the options are invalid or the server
  // refuses the run; an unreachable server is not an error (the run
  // registers once it answers; until then everything is spooled).
  static std::unique_ptr<Run> Init(Options o, std::string* error) {
    std::unique_ptr<Run> run(new Run());
    if (!run->Setup(std::move(o), error)) return nullptr;
    return run;
  }

  ~Run() { Finish("finished"); }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  using Values = std::vector<std::pair<std::string, double>>;
  // Rich values by key: Histogram, Image, Text, Table (sliced to Media: only their JSON is kept).
  using RichValues = std::vector<std::pair<std::string, Media>>;

  // Queues the values at `step` (< 0: previous step + 1) and returns.
  void Log(Values values, int64_t step = -1) { Log(std::move(values), RichValues(), step); }
  // Scalars and rich values at one step:
  //   run->Log({{"loss", loss}}, {{"weights", trainwatch::Histogram(w)}, {"sample", trainwatch::Image(png)}}, step);
  // A rich value that is not ok() is dropped with a warning (the scalars are kept).
  void Log(Values values, RichValues rich, int64_t step = -1) {
    bool spill = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (finished_) return;
      std::vector<std::pair<std::string, std::string>> media;
      size_t bytes = 0;
      for (auto& kv : rich) {
        if (!kv.second.ok()) {
          Warn("\"" + kv.first + "\" not logged: " + kv.second.error());
          continue;
        }
        bytes += kv.first.size() + kv.second.json().size();
        media.emplace_back(std::move(kv.first), kv.second.json());
      }
      if (values.empty() && media.empty() && !rich.empty()) return;  // nothing left to log
      int64_t ts = o_.now_ms ? o_.now_ms() : detail::NowMillis();
      if (step < 0) step = step_ + 1;
      if (!phases_.empty() && step > step_) {
        // Phase time since the previous Log(), per step since it.
        const double n = step_ >= 0 ? static_cast<double>(step - step_) : 1.0;
        for (const auto& phase : phases_) {
          const std::string& key = phase.first;
          bool logged = std::any_of(values.begin(), values.end(), [&](const auto& kv) { return kv.first == key; });
          if (!logged) values.emplace_back(key, phase.second / n);
        }
        phases_.clear();
      }
      step_ = step;
      points_.push_back(Point{step, ts, std::move(values), std::move(media), bytes});
      queued_bytes_ += bytes;
      spill = points_.size() > o_.max_queue_points || queued_bytes_ > o_.max_queue_bytes;
    }
    if (spill) {
      std::lock_guard<std::mutex> s(send_mu_);
      SpillQueued();
    } else if (Queued() >= o_.batch_points) {
      cv_.notify_one();
    }
  }
  // One rich value: run->Log("weights", trainwatch::Histogram(w), step).
  void Log(const std::string& key, const Media& value, int64_t step = -1) {
    Log(Values(), RichValues{{key, value}}, step);
  }
  void Log(std::initializer_list<std::pair<const char*, double>> values, int64_t step = -1) {
    Values v;
    v.reserve(values.size());
    for (const auto& kv : values) v.emplace_back(kv.first, kv.second);
    Log(std::move(v), step);
  }

  // Times one phase of the training step (any name: data, forward, backward,
  // optimizer, comm, ...) for as long as it lives:
  //   { auto t = run->Time("data"); batch = loader.Next(); }
  // A phase's seconds are summed until the next Log() of a later step, which
  // sends them as step_phase/<phase> = seconds per step over the steps since
  // the previous Log() (the run's first Log() counts one step); the server
  // keeps them as trainwatch_step_phase_seconds{phase="<phase>"} too
  // (docs/training-metrics.md).
  class PhaseTimer {
   public:
    PhaseTimer(PhaseTimer&& o) noexcept : run_(o.run_), key_(std::move(o.key_)), t0_(o.t0_) { o.run_ = nullptr; }
    PhaseTimer(const PhaseTimer&) = delete;
    PhaseTimer& operator=(const PhaseTimer&) = delete;
    PhaseTimer& operator=(PhaseTimer&&) = delete;
    ~PhaseTimer() { Stop(); }
    // Ends the phase now rather than at the end of the scope.
    void Stop() {
      if (run_ == nullptr) return;
      std::chrono::duration<double> d = std::chrono::steady_clock::now() - t0_;
      run_->AddPhaseKey(key_, d.count());
      run_ = nullptr;
    }

   private:
    friend class Run;
    PhaseTimer(Run* run, std::string key) : run_(run), key_(std::move(key)), t0_(std::chrono::steady_clock::now()) {}
    Run* run_;
    std::string key_;
    std::chrono::steady_clock::time_point t0_;
  };
  PhaseTimer Time(const std::string& phase) { return PhaseTimer(this, kPhasePrefix + phase); }
  // Adds seconds measured elsewhere (CUDA events, a profiler) to a phase.
  void AddPhaseSeconds(const std::string& phase, double seconds) { AddPhaseKey(kPhasePrefix + phase, seconds); }

  // Sets summary[key] (sent with the next batch).
  void SetSummary(const std::string& key, double value) {
    std::string v;
    detail::AppendJsonNumber(&v, value);
    SetSummaryJson(key, v);
  }
  void SetSummaryJson(const std::string& key, const std::string& json_value) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& kv : summary_) {
      if (kv.first == key) {
        kv.second = json_value;
        return;
      }
    }
    summary_.emplace_back(key, json_value);
  }

  // Records an alert with the run: level "info", "warning" or "error".
  // Sends one log line with the run, as the Python client's output capture
  // does: stream labels project, run, rank, host and source="app"; `level`
  // empty lets the server read it from the message ("RuntimeError: CUDA
  // error: ..." is ERROR). Queued like an alert, spooled while the server is
  // unreachable, stored once (each line carries its own batch id).
  void LogLine(const std::string& message, const std::string& level = "") {
    std::string body = "{\"time\":";
    detail::AppendJsonNumber(&body, static_cast<double>(o_.now_ms ? o_.now_ms() : detail::NowMillis()) / 1000.0);
    body += ",\"message\":";
    detail::AppendJsonString(&body, message);
    if (!level.empty()) {
      body += ",\"level\":";
      detail::AppendJsonString(&body, level);
    }
    body += "}\n";
    std::lock_guard<std::mutex> l(mu_);
    if (finished_) return;
    std::string path = "/api/v1/logs?project=" + detail::QueryEscape(o_.project) +
                       "&run=" + detail::QueryEscape(name_.empty() ? id_ : name_) + "&rank=" + std::to_string(rank_) +
                       "&host=" + detail::QueryEscape(o_.host) + "&source=app&batch_id=" +
                       detail::QueryEscape(id_ + "." + std::to_string(rank_) + "." + nonce_ + ".L" +
                                           std::to_string(++log_seq_));
    ops_.emplace_back(std::move(path), std::move(body));
    cv_.notify_one();
  }

  void Alert(const std::string& title, const std::string& text, const std::string& level = "info") {
    std::string body = "{\"title\":";
    detail::AppendJsonString(&body, title);
    body += ",\"text\":";
    detail::AppendJsonString(&body, text);
    body += ",\"level\":";
    detail::AppendJsonString(&body, level);
    body += "}";
    std::lock_guard<std::mutex> l(mu_);
    ops_.emplace_back("/api/v1/runs/" + id_ + "/alerts", body);
    cv_.notify_one();
  }

  // Sends everything queued and, on rank 0, the status ("finished" or
  // "failed"); waits up to finish_timeout_s. True when nothing is left
  // spooled. Later calls do nothing (and return the first answer).
  bool Finish(const std::string& status = "finished") {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (finished_) return finish_result_;
      finished_ = true;
      if (rank_ == 0) {
        std::string body = "{\"status\":";
        detail::AppendJsonString(&body, status);
        body += "}";
        ops_.emplace_back("/api/v1/runs/" + id_ + "/finish", body);
      }
      deadline_ = detail::MonoSeconds() + o_.finish_timeout_s;
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> s(send_mu_);
    SpillQueued();
    finish_result_ = spooled_ == 0;
    if (finish_result_) {
      RemoveSpoolDir();
    } else if (o_.verbose) {
      std::fprintf(stderr, "trainwatch: server unreachable; %zu requests of run %s kept in %s\n", spooled_,
                   id_.c_str(), spool_dir_.c_str());
    }
    return finish_result_;
  }

  const std::string& id() const { return id_; }
  std::string name() const {
    std::lock_guard<std::mutex> l(mu_);
    return name_;
  }
  int rank() const { return rank_; }
  const std::string& spool_dir() const { return spool_dir_; }
  size_t spooled() const {
    std::lock_guard<std::mutex> s(send_mu_);
    return spooled_;
  }
  size_t Queued() const {
    std::lock_guard<std::mutex> l(mu_);
    return points_.size();
  }
  uint64_t sent_batches() const { return sent_batches_.load(); }

 private:
  struct Point {
    int64_t step;
    int64_t ts;
    Values values;
    std::vector<std::pair<std::string, std::string>> rich;  // key, the value's JSON
    size_t rich_bytes;
  };
  struct Op {
    uint64_t seq;
    std::string path;
    std::string body;
  };
  enum class Sent { kOk, kRetry };

  Run() = default;

  // The URL's user and password, else the token (Options or
  // $TRAINWATCH_TOKEN), else $TRAINWATCH_USERNAME/$TRAINWATCH_PASSWORD.
  std::string Authorization(const detail::Url& url) const {
    if (url.has_userinfo) return "Basic " + detail::Base64(url.user + ":" + url.password);
    std::string token = !o_.token.empty() ? o_.token : detail::EnvOr("TRAINWATCH_TOKEN", "");
    if (!token.empty()) return "Bearer " + token;
    std::string user = detail::EnvOr("TRAINWATCH_USERNAME", "");
    if (!user.empty()) return "Basic " + detail::Base64(user + ":" + detail::EnvOr("TRAINWATCH_PASSWORD", ""));
    return "";
  }
  static std::string WithoutUserinfo(const std::string& url) {
    size_t start = url.find("://");
    start = start == std::string::npos ? 0 : start + 3;
    size_t at = url.find('@', start), slash = url.find('/', start);
    if (at == std::string::npos || (slash != std::string::npos && at > slash)) return url;
    return url.substr(0, start) + url.substr(at + 1);
  }
  static std::string Redacted(const std::string& url) {
    size_t start = url.find("://");
    start = start == std::string::npos ? 0 : start + 3;
    size_t at = url.find('@', start), slash = url.find('/', start);
    if (at == std::string::npos || (slash != std::string::npos && at > slash)) return url;
    size_t colon = url.find(':', start);
    if (colon == std::string::npos || colon > at) return url;
    return url.substr(0, colon + 1) + "xxxxx" + url.substr(at);
  }

  bool Setup(Options o, std::string* error) {
    o_ = std::move(o);
    if (o_.url.empty()) o_.url = detail::EnvOr("TRAINWATCH_URL", "http://127.0.0.1:9800");
    detail::Url url = detail::ParseUrl(o_.url);
    if (!url.ok) {
      *error = "trainwatch: url \"" + Redacted(o_.url) + "\": expected http://host:port";
      return false;
    }
    rank_ = o_.rank >= 0 ? o_.rank : std::atoi(detail::EnvOr("RANK", "0").c_str());
    int world = o_.world_size > 0 ? o_.world_size : std::atoi(detail::EnvOr("WORLD_SIZE", "1").c_str());
    if (o_.host.empty()) {
      char buf[256] = {0};
      gethostname(buf, sizeof buf - 1);
      o_.host = buf;
    }
    id_ = o_.id.empty() ? detail::EnvOr("TRAINWATCH_RUN_ID", "") : o_.id;
    std::random_device rd;
    auto hex = [&rd](int n) {
      static const char* d = "0123456789abcdef";
      std::string s;
      for (int i = 0; i < n; i++) s.push_back(d[rd() % 16]);
      return s;
    };
    if (id_.empty()) id_ = hex(16);
    bool id_ok = !id_.empty() && id_.size() <= 64 && id_ != "metrics";
    for (char c : id_) id_ok = id_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
    if (!id_ok) {
      *error = "trainwatch: id \"" + id_ + "\": expected 1-64 characters of [A-Za-z0-9_.-], not \"metrics\"";
      return false;
    }
    nonce_ = hex(8);
    name_ = o_.name;
    // The registration body (rank 0 owns config and status).
    std::string b = "{\"id\":";
    detail::AppendJsonString(&b, id_);
    b += ",\"project\":";
    detail::AppendJsonString(&b, o_.project);
    b += ",\"rank\":" + std::to_string(rank_) + ",\"world_size\":" + std::to_string(world) + ",\"host\":";
    detail::AppendJsonString(&b, o_.host);
    b += ",\"pid\":" + std::to_string(getpid());
    if (!o_.name.empty()) {  // every rank: whichever registers first creates the run
      b += ",\"name\":";
      detail::AppendJsonString(&b, o_.name);
    }
    if (rank_ == 0) {
      if (!o_.config_json.empty()) b += ",\"config\":" + o_.config_json;
      b += ",\"tags\":[";
      for (size_t i = 0; i < o_.tags.size(); i++) {
        if (i) b += ",";
        detail::AppendJsonString(&b, o_.tags[i]);
      }
      b += "]";
      if (o_.total_steps >= 0) b += ",\"total_steps\":" + std::to_string(o_.total_steps);
      if (!o_.command.empty()) {
        b += ",\"command\":";
        detail::AppendJsonString(&b, o_.command);
      }
    }
    b += "}";
    register_body_ = b;

    std::string root = o_.spool_dir;
    if (root.empty()) root = detail::EnvOr("TRAINWATCH_SPOOL", "");
    if (root.empty()) root = detail::EnvOr("HOME", "/tmp") + "/.cache/trainwatch/spool";
    spool_dir_ = root + "/" + id_ + ".r" + std::to_string(rank_);
    detail::MakeDirs(spool_dir_);
    std::vector<std::pair<uint64_t, std::string>> files = SpoolFiles();
    spooled_ = files.size();
    if (!files.empty()) {
      seq_ = files.back().first + 1;
      online_ = false;  // replay what an earlier process left first
    }
    std::string meta = "{\"url\":";
    detail::AppendJsonString(&meta, WithoutUserinfo(o_.url));  // never a password on disk
    meta += ",\"run_id\":";
    detail::AppendJsonString(&meta, id_);
    meta += ",\"rank\":" + std::to_string(rank_) + ",\"register\":" + register_body_ + "}";
    if (!detail::WriteFileAtomic(spool_dir_ + "/meta.json", meta)) {
      *error = "trainwatch: cannot write spool dir " + spool_dir_ + ": " + std::strerror(errno);
      return false;
    }
    http_ = std::make_unique<detail::Http>(url, o_.timeout_s, Authorization(url));
    {
      std::lock_guard<std::mutex> s(send_mu_);
      Register();
      if (disabled_) {
        *error = "trainwatch: the server refused run " + id_ + ": " + last_error_;
        return false;
      }
    }
    thread_ = std::thread([this] { Loop(); });
    return true;
  }

  void Warn(const std::string& msg) {
    if (o_.verbose) std::fprintf(stderr, "trainwatch: %s\n", msg.c_str());
  }

  // ---- spool (send_mu_ held) ----
  std::vector<std::pair<uint64_t, std::string>> SpoolFiles() const {
    std::vector<std::pair<uint64_t, std::string>> out;
    DIR* d = opendir(spool_dir_.c_str());
    if (d == nullptr) return out;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 8 && n.compare(0, 3, "op-") == 0 && n.compare(n.size() - 5, 5, ".json") == 0) {
        out.emplace_back(std::strtoull(n.c_str() + 3, nullptr, 10), n);
      }
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
  }

  void Spool(const Op& op) {
    char name[64];
    std::snprintf(name, sizeof name, "/op-%016llu.json", static_cast<unsigned long long>(op.seq));
    std::string doc = "{\"path\":";
    detail::AppendJsonString(&doc, op.path);
    doc += ",\"body\":" + op.body + "}";
    if (!detail::WriteFileAtomic(spool_dir_ + name, doc)) {
      Warn("cannot write spool file " + spool_dir_ + name + ": " + std::strerror(errno) + "; batch lost");
      return;
    }
    spooled_++;
  }

  void RemoveSpoolDir() {
    if (!SpoolFiles().empty()) return;
    std::remove((spool_dir_ + "/meta.json").c_str());
    rmdir(spool_dir_.c_str());
  }

  // The next request in queue order (send_mu_ held; takes mu_).
  bool Form(Op* op) {
    std::lock_guard<std::mutex> l(mu_);
    if (points_.empty() && summary_.empty() && ops_.empty()) return false;
    op->seq = seq_++;
    if (points_.empty() && summary_.empty()) {
      op->path = std::move(ops_.front().first);
      op->body = std::move(ops_.front().second);
      ops_.pop_front();
      return true;
    }
    std::string& b = op->body;
    b = "{\"batch_id\":";
    detail::AppendJsonString(&b, id_ + "." + std::to_string(rank_) + "." + nonce_ + "." + std::to_string(op->seq));
    b += ",\"rank\":" + std::to_string(rank_) + ",\"host\":";
    detail::AppendJsonString(&b, o_.host);
    b += ",\"points\":[";
    // At most batch_points points and, past the first, batch_bytes of body (images are large).
    for (size_t n = 0; n < o_.batch_points && !points_.empty() && (n == 0 || b.size() < o_.batch_bytes); n++) {
      const Point& p = points_.front();
      if (n) b += ",";
      b += "{\"step\":" + std::to_string(p.step) + ",\"ts\":" + std::to_string(p.ts) + ",\"values\":{";
      for (size_t i = 0; i < p.values.size(); i++) {
        if (i) b += ",";
        detail::AppendJsonString(&b, p.values[i].first);
        b += ":";
        detail::AppendJsonNumber(&b, p.values[i].second);
      }
      for (size_t i = 0; i < p.rich.size(); i++) {
        if (i || !p.values.empty()) b += ",";
        detail::AppendJsonText(&b, p.rich[i].first);
        b += ":" + p.rich[i].second;
      }
      b += "}}";
      queued_bytes_ -= p.rich_bytes;
      points_.pop_front();
    }
    b += "]";
    if (!summary_.empty()) {
      b += ",\"summary\":{";
      for (size_t i = 0; i < summary_.size(); i++) {
        if (i) b += ",";
        detail::AppendJsonString(&b, summary_[i].first);
        b += ":" + summary_[i].second;
      }
      b += "}";
      summary_.clear();
    }
    b += "}";
    op->path = "/api/v1/runs/" + id_ + "/batches";
    return true;
  }

  void SpillQueued() {
    Op op;
    while (Form(&op)) Spool(op);
  }

  // ---- sending (send_mu_ held) ----
  void WentOffline(const std::string& why) {
    if (online_) Warn("server " + Redacted(o_.url) + " unreachable (" + why + "); spooling to " + spool_dir_);
    online_ = false;
    backoff_s_ = std::min(5.0, std::max(0.2, backoff_s_ * 2));
    next_retry_ = detail::MonoSeconds() + backoff_s_;
  }

  bool Register() {
    std::string answer;
    int status = http_->Post("/api/v1/runs", register_body_, &answer);
    if (status == 200) {
      registered_ = true;
      last_contact_ = detail::MonoSeconds();
      std::string name = detail::FindJsonStringAt(answer, "name", 2);  // data.name, not data.config...name
      std::lock_guard<std::mutex> l(mu_);
      if (!name.empty()) name_ = name;
      return true;
    }
    // 401: credentials changed on the server mid-run; kept until they work again.
    if (status < 0 || status == 401 || status == 404 || status == 408 || status == 429 || status >= 500) {
      WentOffline(status < 0 ? "connection failed" : "status " + std::to_string(status));
      return false;
    }
    disabled_ = true;
    last_error_ = std::to_string(status) + " " + detail::FindJsonString(answer, "error");
    Warn("registering run " + id_ + " refused: " + last_error_ + "; nothing of this run is sent");
    return false;
  }

  Sent Send(const Op& op) {
    if (disabled_) return Sent::kOk;
    if (!registered_ && !Register()) return Sent::kRetry;
    std::string answer;
    int status = http_->Post(op.path, op.body, &answer);
    if (status >= 200 && status < 300) {
      last_contact_ = detail::MonoSeconds();
      if (op.path.size() > 8 && op.path.compare(op.path.size() - 8, 8, "/batches") == 0) sent_batches_++;
      if (answer.find("\"rejected\":[{") != std::string::npos && !warned_rejected_) {
        warned_rejected_ = true;
        Warn("server rejected values: " + answer.substr(0, 300));
      }
      return Sent::kOk;
    }
    if (status == 404) {
      registered_ = false;
      WentOffline("run unknown to the server; registering again");
      return Sent::kRetry;
    }
    if (status < 0 || status == 401 || status == 408 || status == 429 || status >= 500) {
      WentOffline(status < 0 ? "connection failed" : "status " + std::to_string(status));
      return Sent::kRetry;
    }
    Warn(op.path + " refused: " + std::to_string(status) + " " + detail::FindJsonString(answer, "error"));
    return Sent::kOk;
  }

  bool ReadSpoolFile(const std::string& path, Op* op) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string doc = ss.str();
    op->path = detail::FindJsonString(doc, "path");
    size_t b = doc.find(",\"body\":");
    if (op->path.empty() || b == std::string::npos || doc.empty() || doc.back() != '}') return false;
    op->body = doc.substr(b + 8, doc.size() - b - 9);
    return true;
  }

  bool Replay() {
    for (;;) {
      auto files = SpoolFiles();
      if (files.empty()) break;
      for (const auto& f : files) {
        std::string path = spool_dir_ + "/" + f.second;
        Op op;
        if (!ReadSpoolFile(path, &op)) {
          Warn("spool file " + path + " unreadable; skipped");
        } else if (Send(op) == Sent::kRetry) {
          return false;
        }
        std::remove(path.c_str());
        spooled_--;
      }
    }
    if (!online_) Warn("server " + Redacted(o_.url) + " reachable again; spool replayed");
    online_ = true;
    backoff_s_ = 0;
    return true;
  }

  void Cycle() {
    if (!online_ && detail::MonoSeconds() < next_retry_) {
      SpillQueued();  // offline: keep memory bounded
      return;
    }
    if (spooled_ > 0 && !Replay()) {
      SpillQueued();
      return;
    }
    Op op;
    while (Form(&op)) {
      if (spooled_ > 0 || !online_) {
        Spool(op);
        continue;
      }
      if (Send(op) == Sent::kRetry) {
        Spool(op);
        SpillQueued();
        return;
      }
    }
    if (online_ && !disabled_ && detail::MonoSeconds() - last_contact_ >= o_.heartbeat_interval_s) {
      std::string answer;
      if (!registered_ && !Register()) return;
      int status = http_->Post("/api/v1/runs/" + id_ + "/heartbeat", "{}", &answer);
      if (status >= 200 && status < 300) {
        last_contact_ = detail::MonoSeconds();
      } else if (status == 404) {
        registered_ = false;
      } else if (status < 0) {
        WentOffline("connection failed");
      }
    }
  }

  void Loop() {
    for (;;) {
      bool stopping;
      double deadline;
      {
        std::lock_guard<std::mutex> l(mu_);
        stopping = stop_;
        deadline = deadline_;
      }
      bool idle, full, online, disabled;
      double wait = o_.flush_interval_s;
      {
        std::lock_guard<std::mutex> s(send_mu_);
        Cycle();
        online = online_;
        disabled = disabled_;
        if (!online) wait = std::max(0.05, std::min(wait, next_retry_ - detail::MonoSeconds()));
        std::lock_guard<std::mutex> l(mu_);
        idle = points_.empty() && ops_.empty() && summary_.empty() && spooled_ == 0;
        full = points_.size() >= o_.batch_points;
      }
      if (stopping && (idle || disabled || detail::MonoSeconds() >= deadline)) break;
      if (full && online) continue;
      if (stopping) wait = std::min(wait, 0.05);
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, std::chrono::duration<double>(wait),
                   [this, stopping] { return stop_ != stopping || points_.size() >= o_.batch_points; });
    }
    std::lock_guard<std::mutex> s(send_mu_);
    http_->Close();
  }

  static constexpr const char* kPhasePrefix = "step_phase/";
  void AddPhaseKey(const std::string& key, double seconds) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [k, s] : phases_) {
      if (k == key) {
        s += seconds;
        return;
      }
    }
    phases_.emplace_back(key, seconds);
  }

  Options o_;
  std::string id_, nonce_, register_body_, spool_dir_, last_error_;
  int rank_ = 0;
  std::unique_ptr<detail::Http> http_;
  std::thread thread_;

  // mu_: the queues and the run's identity, shared with the training thread.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string name_;
  std::deque<Point> points_;
  size_t queued_bytes_ = 0;  // the rich values' JSON in points_
  std::deque<std::pair<std::string, std::string>> ops_;
  std::vector<std::pair<std::string, std::string>> summary_;  // key, JSON value
  int64_t step_ = -1;
  uint64_t log_seq_ = 0;
  Values phases_;  // step_phase/<phase> -> seconds since the last Log() of a later step
  uint64_t seq_ = 0;
  bool finished_ = false;
  bool finish_result_ = false;
  bool stop_ = false;
  double deadline_ = 0;

  // send_mu_: the connection and the spool dir (sender thread; Log() when it spills).
  mutable std::mutex send_mu_;
  size_t spooled_ = 0;
  bool online_ = true;
  bool registered_ = false;
  bool disabled_ = false;
  bool warned_rejected_ = false;
  double backoff_s_ = 0;
  double next_retry_ = 0;
  double last_contact_ = 0;
  std::atomic<uint64_t> sent_batches_{0};
};

}  // namespace client

// The rich values as trainwatch::Histogram, trainwatch::Image, ... (as the Python client's trainwatch.Histogram).
using client::Cell;
using client::Histogram;
using client::Image;
using client::Media;
using client::Table;
using client::Text;

}  // namespace trainwatch
