#pragma once
// What a collector produces: metric families (name, help, type) of series
// (labels without __name__, value), in the order an exporter would print them.
// The app stores them like scraped samples; http renders them for /metrics.

#include <string>
#include <string_view>
#include <vector>

#include "model/labels.h"

namespace trainwatch::collect {

enum class MetricType { kGauge, kCounter, kUntyped };

struct Metric {
  model::Labels labels;  // without __name__
  double value = 0;
};

struct Family {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<Metric> metrics;
};

using Families = std::vector<Family>;

// Appends a family with one metric; merges into the last family when it has
// the same name (collectors emit a family's series together).
void Add(Families* out, std::string_view name, std::string_view help, MetricType type, model::Labels labels,
         double value);

// Appends every family in the Prometheus text exposition format 0.0.4.
void RenderText(const Families& families, std::string* out);

// Prometheus's text format for a sample value (NaN, +Inf, -Inf, shortest round-trip).
std::string FormatValue(double v);

}  // namespace trainwatch::collect
