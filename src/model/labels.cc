#include "model/labels.h"

#include <algorithm>

#include "base/coding.h"
#include "base/hash.h"
#include "base/json.h"

namespace trainwatch::model {

static void SortLabels(std::vector<Label>* v) {
  std::sort(v->begin(), v->end(), [](const Label& a, const Label& b) { return a.name < b.name; });
}

Labels::Labels(std::initializer_list<std::pair<std::string_view, std::string_view>> pairs) {
  for (auto& [n, v] : pairs) labels_.push_back({std::string(n), std::string(v)});
  SortLabels(&labels_);
}

Labels::Labels(std::vector<Label> labels) : labels_(std::move(labels)) { SortLabels(&labels_); }

void Labels::Sort() { SortLabels(&labels_); }

Result<Labels> Labels::FromUnsorted(std::vector<Label> labels) {
  std::vector<Label> kept;
  kept.reserve(labels.size());
  for (auto& l : labels) {
    if (l.name.empty()) return Status::InvalidArgument("empty label name");
    if (!l.value.empty()) kept.push_back(std::move(l));
  }
  SortLabels(&kept);
  for (size_t i = 1; i < kept.size(); i++) {
    if (kept[i].name == kept[i - 1].name) return Status::InvalidArgument("duplicate label name \"" + kept[i].name + "\"");
  }
  Labels out;
  out.labels_ = std::move(kept);
  return out;
}

std::string_view Labels::Get(std::string_view name) const {
  for (const auto& l : labels_) {
    if (l.name == name) return l.value;
  }
  return {};
}

bool Labels::Has(std::string_view name) const {
  for (const auto& l : labels_) {
    if (l.name == name) return true;
  }
  return false;
}

uint64_t HashLabelPairs(const std::pair<std::string_view, std::string_view>* pairs, size_t n) {
  uint64_t h = 0x51af3c29d5e2b1a7ull;
  for (size_t i = 0; i < n; i++) {
    h = HashString(pairs[i].first, h);
    h = HashString(pairs[i].second, h ^ 0xff);
  }
  return h;
}

uint64_t Labels::Hash() const {
  uint64_t h = 0x51af3c29d5e2b1a7ull;
  for (const auto& l : labels_) {
    h = HashString(l.name, h);
    h = HashString(l.value, h ^ 0xff);
  }
  return h;
}

static void AppendEscaped(std::string* out, std::string_view v) {
  for (char c : v) {
    switch (c) {
      case '\\': *out += "\\\\"; break;
      case '"': *out += "\\\""; break;
      case '\n': *out += "\\n"; break;
      default: *out += c;
    }
  }
}

std::string Labels::ToString() const {
  std::string out(MetricName());
  out += '{';
  bool first = true;
  for (const auto& l : labels_) {
    if (l.name == kMetricName) continue;
    if (!first) out += ", ";
    first = false;
    out += l.name;
    out += "=\"";
    AppendEscaped(&out, l.value);
    out += '"';
  }
  out += '}';
  return out;
}

void LabelsBuilder::Set(std::string_view name, std::string_view value) {
  Del(name);
  if (!value.empty()) labels_.push_back({std::string(name), std::string(value)});
}

void LabelsBuilder::Del(std::string_view name) {
  std::erase_if(labels_, [&](const Label& l) { return l.name == name; });
}

Labels LabelsBuilder::Build() const { return Labels(labels_); }

static bool IsNameStart(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}

static bool IsNameChar(char c, bool colon) { return IsNameStart(c, colon) || (c >= '0' && c <= '9'); }

bool IsValidMetricName(std::string_view s) {
  if (s.empty() || !IsNameStart(s[0], true)) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsNameChar(c, true); });
}

bool IsValidLabelName(std::string_view s) {
  if (s.empty() || !IsNameStart(s[0], false)) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsNameChar(c, false); });
}

void AppendEncodedLabels(const Labels& labels, std::string* out) {
  PutVarint64(out, labels.size());
  for (const Label& l : labels) {
    PutLengthPrefixed(out, l.name);
    PutLengthPrefixed(out, l.value);
  }
}

bool DecodeEncodedLabels(std::string_view in, Labels* out) {
  uint64_t n = 0;
  if (!GetVarint64(&in, &n) || n > in.size() / 2) return false;
  std::vector<Label> v(n);
  for (Label& l : v) {
    std::string_view name, value;
    if (!GetLengthPrefixed(&in, &name) || !GetLengthPrefixed(&in, &value)) return false;
    l.name = name;
    l.value = value;
  }
  if (!in.empty()) return false;
  *out = Labels(std::move(v));
  return true;
}

void AppendLabelsJson(std::string* out, const Labels& labels) {
  out->push_back('{');
  bool first = true;
  for (const Label& l : labels) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(out, l.name);
    out->push_back(':');
    AppendJsonString(out, l.value);
  }
  out->push_back('}');
}

Labels WithoutEmptyValues(const Labels& labels) {
  bool has_empty = false;
  for (const Label& l : labels) has_empty = has_empty || l.value.empty();
  if (!has_empty) return labels;
  LabelsBuilder b(labels);
  for (const Label& l : labels) {
    if (l.value.empty()) b.Del(l.name);
  }
  return b.Build();
}

Status CheckSeriesLabels(const model::Labels& labels) {
  if (labels.empty()) return Status::InvalidArgument("series without labels");
  for (size_t i = 0; i < labels.size(); ++i) {
    const model::Label& l = labels.pairs()[i];
    if (l.name.empty()) return Status::InvalidArgument("series " + labels.ToString() + ": empty label name");
    if (l.value.empty()) return Status::InvalidArgument("series " + labels.ToString() + ": empty value of label " + l.name);
    if (i > 0 && !(labels.pairs()[i - 1].name < l.name)) {
      return Status::InvalidArgument("series " + labels.ToString() + ": unsorted or duplicate label name " + l.name);
    }
  }
  return Status::OK();
}

}  // namespace trainwatch::model
