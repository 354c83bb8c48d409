#include "template/template.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>

#include "promql/engine.h"
#include "promql/promqltest/test_storage.h"

// Alert templates with `query` answered by the PromQL engine, as rules/
// expands them (the engine itself is template/'s, tested in template_test.cc).
namespace trainwatch::rules {
namespace {

std::string SourceDir() {
  const char* d = std::getenv("TW_SOURCE_DIR");
  return d ? d : ".";
}

// Every case in testdata/template_parity.yml, with `query` answered by the real
// PromQL engine; the e2e test checks the same file against promtool.
TEST(TemplateTest, ParityWithPrometheus) {
  YAML::Node doc = YAML::LoadFile(SourceDir() + "/src/rules/testdata/template_parity.yml");
  promql::promqltest::TestStorage storage;
  for (const auto& q : doc["query_series"]) {
    std::vector<model::Label> ls;
    for (auto it = q["labels"].begin(); it != q["labels"].end(); ++it) {
      ls.push_back({it->first.as<std::string>(), it->second.as<std::string>()});
    }
    storage.Add(model::Labels(ls), 0, q["value"].as<double>());
  }
  promql::Engine engine(promql::EngineOptions{});
  tmpl::TemplateOptions opts;
  opts.query = [&](std::string_view expr) -> Result<std::vector<tmpl::Sample>> {
    auto r = engine.Instant(storage, expr, 0);
    if (!r.ok()) return r.error();
    std::vector<tmpl::Sample> out;
    for (const auto& s : r->vector) {
      tmpl::Sample smp;
      for (const auto& l : s.labels) smp.labels[l.name] = l.value;
      smp.value = s.v;
      out.push_back(std::move(smp));
    }
    if (r->type == promql::ValueType::kScalar) out.push_back({{}, r->scalar.v});
    return out;
  };
  int n = 0;
  for (const auto& c : doc["cases"]) {
    tmpl::AlertData data;
    for (auto it = c["labels"].begin(); it != c["labels"].end(); ++it) {
      data.labels[it->first.as<std::string>()] = it->second.as<std::string>();
    }
    data.value = std::strtod(c["value"].as<std::string>().c_str(), nullptr);
    std::string name = c["name"].as<std::string>();
    EXPECT_EQ(tmpl::ExpandAlertField(name, c["template"].as<std::string>(), data, opts), c["output"].as<std::string>())
        << name;
    ++n;
  }
  EXPECT_GT(n, 30);
  for (const auto& c : doc["parse_errors"]) {
    Status st = tmpl::CheckAlertTemplate(c["name"].as<std::string>(), c["template"].as<std::string>());
    EXPECT_EQ(st.message(), c["error"].as<std::string>()) << c["name"].as<std::string>();
  }
}

}  // namespace
}  // namespace trainwatch::rules
