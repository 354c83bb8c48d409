#include "collect/family.h"

#include <charconv>
#include <cmath>

namespace trainwatch::collect {

void Add(Families* out, std::string_view name, std::string_view help, MetricType type, model::Labels labels,
         double value) {
  if (out->empty() || out->back().name != name) {
    out->push_back(Family{std::string(name), std::string(help), type, {}});
  }
  out->back().metrics.push_back(Metric{std::move(labels), value});
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

namespace {

void AppendEscaped(std::string_view s, bool is_help, std::string* out) {
  for (char c : s) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && !is_help) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kGauge: return "gauge";
    case MetricType::kCounter: return "counter";
    case MetricType::kUntyped: return "untyped";
  }
  return "untyped";
}

}  // namespace

void RenderText(const Families& families, std::string* out) {
  for (const Family& f : families) {
    if (f.metrics.empty()) continue;
    out->append("# HELP ").append(f.name).push_back(' ');
    AppendEscaped(f.help, true, out);
    out->append("\n# TYPE ").append(f.name).append(" ").append(TypeName(f.type)).push_back('\n');
    for (const Metric& m : f.metrics) {
      out->append(f.name);
      if (!m.labels.empty()) {
        out->push_back('{');
        bool first = true;
        for (const model::Label& l : m.labels) {
          if (!first) out->push_back(',');
          first = false;
          out->append(l.name).append("=\"");
          AppendEscaped(l.value, false, out);
          out->push_back('"');
        }
        out->push_back('}');
      }
      out->push_back(' ');
      out->append(FormatValue(m.value)).push_back('\n');
    }
  }
}

}  // namespace trainwatch::collect
