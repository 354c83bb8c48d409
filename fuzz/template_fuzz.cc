// The Go text/template engine (template/template.h) in its three uses.
// Input: a mode byte, then the template text.
//   mode % 4 == 0: an alert label/annotation template as Prometheus expands
//                  it (ExpandAlertTemplate, `query` answered by a stub);
//   mode % 4 == 1: a notification text as Alertmanager's ExecuteTextString
//                  runs it over template.Data (notify/templates.h);
//   mode % 4 == 2: the same with html/template escaping (email html);
//   mode % 4 == 3: a `templates:` file parsed beside the defaults, then the
//                  default subject and Slack title executed with it.
// Invariants: no crash, hang or sanitizer report (TemplateLimits bound
// every execution); an error says why; output stays within the limit.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "notify/templates.h"
#include "template/template.h"

namespace {
constexpr const char* kTarget = "template_fuzz";

constexpr std::string_view kData = R"({"receiver": "team-ml", "status": "firing", "externalURL": "http://am:9093",
  "groupLabels": {"alertname": "GpuDown"}, "commonLabels": {"alertname": "GpuDown", "severity": "critical"},
  "commonAnnotations": {"summary": "GPU 3 is down"},
  "alerts": [{"status": "firing", "labels": {"alertname": "GpuDown", "gpu": "3", "severity": "critical"},
              "annotations": {"summary": "GPU 3 is down", "description": "no samples for 5m"},
              "startsAt": "2024-05-01T10:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
              "generatorURL": "http://prom/graph?g0.expr=up", "fingerprint": "00000000000000ff"},
             {"status": "resolved", "labels": {"alertname": "GpuDown", "gpu": "1"}, "annotations": {},
              "startsAt": "2024-05-01T09:00:00Z", "endsAt": "2024-05-01T09:30:00.5Z", "generatorURL": "",
              "fingerprint": "0000000000000001"}]})";

void CheckResult(const trainwatch::Result<std::string>& r, size_t max_output) {
  if (!r.ok()) {
    FUZZ_CHECK_ERROR(r.error());
    return;
  }
  FUZZ_CHECK(r->size() <= max_output, "output beyond max_output_bytes: " + std::to_string(r->size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace tmpl = trainwatch::tmpl;
  namespace notify = trainwatch::notify;
  static const std::shared_ptr<const notify::Templates> defaults = *notify::Templates::Parse({});
  static const notify::NotificationData nd = *notify::ParseTemplateData(kData);
  if (size < 1) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      tmpl::AlertData alert;
      alert.labels = {{"alertname", "GpuDown"}, {"instance", "gpu-node-3:9400"}, {"gpu", "3"}};
      alert.external_labels = {{"cluster", "c1"}};
      alert.external_url = "http://prom:9090";
      alert.value = 0.25;
      tmpl::TemplateOptions opts;
      opts.external_url = alert.external_url;
      opts.limits.max_output_bytes = 64 << 10;
      opts.limits.max_steps = 100'000;
      opts.query = [](std::string_view expr) -> trainwatch::Result<std::vector<tmpl::Sample>> {
        if (expr.empty()) return trainwatch::Status::InvalidArgument("empty query");
        return std::vector<tmpl::Sample>{{{{"__name__", "up"}, {"job", "node"}}, 1},
                                                {{{"__name__", "up"}, {"job", "gpu"}}, 0.5}};
      };
      CheckResult(tmpl::ExpandAlertTemplate("fuzz", text, alert, opts), opts.limits.max_output_bytes);
      (void)tmpl::CheckAlertTemplate("fuzz", text);
      break;
    }
    case 1:
      CheckResult(defaults->ExecuteText(text, nd), tmpl::TemplateLimits().max_output_bytes);
      break;
    case 2:
      CheckResult(defaults->ExecuteHtml(text, nd), tmpl::TemplateLimits().max_output_bytes);
      break;
    default: {
      auto t = notify::Templates::Parse({notify::TemplateFile{"fuzz.tmpl", std::string(text)}});
      if (!t.ok()) {
        FUZZ_CHECK_ERROR(t.error());
        break;
      }
      for (std::string_view run : {R"({{ template "__subject" . }})", R"({{ template "slack.default.title" . }})"}) {
        CheckResult((*t)->ExecuteText(run, nd), tmpl::TemplateLimits().max_output_bytes);
      }
    }
  }
  return 0;
}
