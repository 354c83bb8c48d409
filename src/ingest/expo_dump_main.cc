// expo_dump: prints what the exposition parser yields for a file, one JSON
// object per sample, for tests/e2e/exposition_e2e_test.py to compare with
// what a real Prometheus stores for the same file. Built for tests only.
//
//   expo_dump [--openmetrics] FILE
//   {"metric":{"__name__":"x","k":"v"},"value":"1.5","timestamp_ms":null}
//
// Values are written with 17 significant digits ("NaN", "+Inf", "-Inf" as
// strings); empty label values are dropped, as Prometheus does.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "ingest/text_parser.h"

namespace {

std::string Json(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string Value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace trainwatch::ingest;
  ParseOptions opts;
  std::string path;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--openmetrics") {
      opts.format = TextFormat::kOpenMetrics;
    } else {
      path = a;
    }
  }
  if (path.empty()) {
    std::cerr << "usage: expo_dump [--openmetrics] FILE\n";
    return 2;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "expo_dump: cannot read " << path << "\n";
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string body = ss.str();
  TextParser p(body, opts);
  std::string out;
  while (p.Next()) {
    const TextSample& s = p.sample();
    out += "{\"metric\":{\"__name__\":" + Json(s.name);
    for (size_t i = 0; i < s.num_labels; i++) {
      if (s.labels[i].value.empty()) continue;
      out += "," + Json(s.labels[i].name) + ":" + Json(s.labels[i].value);
    }
    out += "},\"value\":\"" + Value(s.value) + "\",\"timestamp_ms\":";
    out += s.has_timestamp ? std::to_string(s.timestamp_ms) : "null";
    out += "}\n";
  }
  if (!p.status().ok()) {
    std::cerr << "expo_dump: " << path << ": " << p.status().ToString() << "\n";
    return 1;
  }
  std::cout << out;
  return 0;
}
