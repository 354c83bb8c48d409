#include "notify/templates.h"

#include <gtest/gtest.h>

#include "notify/integrations.h"

namespace trainwatch::notify {
namespace {

StoredAlert MakeAlert(model::Labels labels, model::Labels annotations, int64_t starts, int64_t ends) {
  StoredAlert a;
  a.alert.labels = std::move(labels);
  a.alert.annotations = std::move(annotations);
  a.alert.starts_at_ms = starts;
  a.alert.ends_at_ms = ends;
  a.alert.generator_url = "http://tw:9800/graph?g0.expr=x";
  a.fingerprint = 0xabcdef0123456789ULL;
  return a;
}

class NotifyTemplatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two firing GPUs and one resolved, grouped by alertname.
    now_ = 1714557600000;
    data_ = MakeNotificationData(
        "ops", "{}:{alertname=\"GpuHot\"}", model::Labels{{"alertname", "GpuHot"}},
        {MakeAlert({{"alertname", "GpuHot"}, {"gpu", "1"}, {"severity", "page"}}, {{"summary", "GPU 1 > 90C"}},
                   now_ - 60000, now_ + 300000),
         MakeAlert({{"alertname", "GpuHot"}, {"gpu", "0"}, {"severity", "page"}}, {{"summary", "GPU 0 > 90C"}},
                   now_ - 120000, now_ + 300000),
         MakeAlert({{"alertname", "GpuHot"}, {"gpu", "2"}, {"severity", "page"}}, {{"summary", "GPU 2 cooled"}},
                   now_ - 600000, now_ - 1000)},
        "http://tw:9800", now_);
    auto t = Templates::Parse({});
    ASSERT_TRUE(t.ok()) << t.error().ToString();
    templates_ = *t;
  }

  std::string Text(const std::string& text) {
    auto r = templates_->ExecuteText(text, data_);
    return r.ok() ? *r : "error: " + r.error().message();
  }

  int64_t now_ = 0;
  NotificationData data_;
  std::shared_ptr<const Templates> templates_;
};

TEST_F(NotifyTemplatesTest, AlertsAndKVMethodsAsAlertmanager) {
  EXPECT_EQ(Text("{{ len .Alerts }} {{ len .Alerts.Firing }} {{ len .Alerts.Resolved }}"), "3 2 1");
  EXPECT_EQ(Text("{{ range .Alerts.Firing }}{{ .Labels.gpu }}{{ end }}|{{ range .Alerts.Resolved }}{{ .Labels.gpu }}{{ end }}"),
            "01|2");
  EXPECT_EQ(Text("{{ range (index .Alerts 0).Labels.SortedPairs }}{{ .Name }}={{ .Value }};{{ end }}"),
            "alertname=GpuHot;gpu=0;severity=page;");
  EXPECT_EQ(Text("{{ .CommonLabels.Names }} {{ .CommonLabels.Values }} {{ .CommonLabels.SortedPairs.Values }}"),
            "[alertname severity] [GpuHot page] [GpuHot page]");
  EXPECT_EQ(Text("{{ .CommonLabels.Remove .GroupLabels.Names }} {{ (.CommonLabels.Remove (stringSlice \"severity\")).alertname }}"),
            "map[severity:page] GpuHot");
  EXPECT_EQ(Text("{{ .CommonLabels.severity }}|{{ .CommonLabels.nope }}|{{ .CommonAnnotations }}"), "page||map[]");
  EXPECT_EQ(Text("{{ with index .Alerts 0 }}{{ .Status }} {{ .StartsAt }} {{ .EndsAt }} {{ .Fingerprint }}{{ end }}"),
            "firing 2024-05-01 09:58:00 +0000 UTC 0001-01-01 00:00:00 +0000 UTC abcdef0123456789");
  EXPECT_EQ(Text("{{ (index .Alerts 2).EndsAt.Format \"15:04:05\" }}"), "09:59:59");
  EXPECT_EQ(Text("{{ .Alerts.Firing.Firing }}"),
            "error: template: :1:10: executing \"\" at <.Alerts.Firing.Firing>: can't evaluate field Firing in type "
            "[]template.Alert");
  EXPECT_EQ(Text("{{ .Receiver }} {{ .Status }} {{ .ExternalURL }}"), "ops firing http://tw:9800");
}

TEST_F(NotifyTemplatesTest, DefaultTemplatesRenderAlertmanagersText) {
  EXPECT_EQ(Text("{{ template \"__subject\" . }}"), "[FIRING:2] GpuHot (page)");
  EXPECT_EQ(Text("{{ template \"slack.default.fallback\" . }}"),
            "[FIRING:2] GpuHot (page) | http://tw:9800/#/alerts?receiver=ops");
  EXPECT_EQ(Text("{{ template \"__text_alert_list\" .Alerts.Resolved }}"),
            "Labels:\n - alertname = GpuHot\n - gpu = 2\n - severity = page\nAnnotations:\n - summary = GPU 2 cooled\n"
            "Source: http://tw:9800/graph?g0.expr=x\n");
  EXPECT_EQ(Text("{{ template \"slack.default.text\" . }}{{ template \"__description\" . }}"), "");
  EXPECT_EQ(Text(""), "");
}

TEST_F(NotifyTemplatesTest, TemplateFilesDefineAndOverride) {
  auto t = Templates::Parse(
      {{"/etc/am/slack.tmpl",
        "{{ define \"slack.ml.text\" }}{{ range .Alerts.Firing }}* {{ .Annotations.summary }}\n{{ end }}{{ end }}\n"},
       {"/etc/am/override.tmpl", "{{ define \"__subject\" }}{{ .Status | toUpper }}: {{ .CommonLabels.alertname }}{{ end }}"}});
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_EQ(*(*t)->ExecuteText("{{ template \"slack.ml.text\" . }}", data_), "* GPU 0 > 90C\n* GPU 1 > 90C\n");
  // Defaults that call __subject see the override, as in Alertmanager.
  EXPECT_EQ(*(*t)->ExecuteText("{{ template \"slack.default.title\" . }}", data_), "FIRING: GpuHot");
  auto bad = Templates::Parse({{"/etc/am/bad.tmpl", "{{ define \"x\" }}{{ .Foo }\n"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "template: bad.tmpl:1: unexpected \"}\" in operand");
}

TEST_F(NotifyTemplatesTest, HtmlEscapesValues) {
  data_.common_annotations = model::Labels{{"summary", "<b>hot</b> & rising"}};
  auto r = templates_->ExecuteHtml("<p>{{ .CommonAnnotations.summary }}</p>{{ safeHtml \"<br/>\" }}", data_);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(*r, "<p>&lt;b&gt;hot&lt;/b&gt; &amp; rising</p><br/>");
  auto page = templates_->ExecuteHtml("{{ template \"email.default.html\" . }}", data_);
  ASSERT_TRUE(page.ok()) << page.error().ToString();
  EXPECT_NE(page->find("<title>[FIRING:2] GpuHot (page)</title>"), std::string::npos) << *page;
  EXPECT_NE(page->find("<h3>[RESOLVED] 1</h3>"), std::string::npos) << *page;
  EXPECT_NE(page->find("summary = GPU 2 cooled<br />"), std::string::npos) << *page;
}

TEST(ParseTemplateDataTest, ReadsAmtoolDataAndNamesBadFields) {
  auto d = ParseTemplateData(R"({"receiver": "r", "status": "resolved", "externalURL": "http://am",
      "groupLabels": {"alertname": "A"}, "commonLabels": {"alertname": "A"}, "commonAnnotations": {},
      "alerts": [{"status": "resolved", "labels": {"alertname": "A"}, "annotations": {},
                  "startsAt": "2024-05-01T10:00:00Z", "endsAt": "2024-05-01T11:00:00.5Z", "generatorURL": "",
                  "fingerprint": "00000000000000ff"},
                 {"status": "firing", "labels": {"alertname": "A", "x": "1"}, "startsAt": "2024-05-01T10:30:00Z",
                  "endsAt": "0001-01-01T00:00:00Z"}]})");
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  ASSERT_EQ(d->alerts.size(), 2u);
  EXPECT_TRUE(d->alerts[0].Resolved(d->now_ms));
  EXPECT_FALSE(d->alerts[1].Resolved(d->now_ms));
  EXPECT_EQ(d->alerts[0].fingerprint, 255u);
  EXPECT_EQ(d->alerts[0].alert.ends_at_ms, 1714561200500);
  auto err = [](const char* json) {
    auto r = ParseTemplateData(json);
    return r.ok() ? std::string("ok") : r.error().message();
  };
  EXPECT_EQ(err(R"({"alerts": [{"status": "pending"}]})"),
            "template data: alerts[0].status: want \"firing\" or \"resolved\", got \"pending\"");
  EXPECT_EQ(err(R"({"alerts": [{"status": "firing", "labels": {"a": 1}}]})"),
            "template data: alerts[0].labels.a: expected a string");
  EXPECT_EQ(err(R"({"alerts": [{"status": "resolved"}]})"),
            "template data: alerts[0].endsAt: a resolved alert needs an end time");
  EXPECT_EQ(err(R"({"alerts": [{"status": "firing", "fingerprint": "xyz"}]})"),
            "template data: alerts[0].fingerprint: want hex digits, got \"xyz\"");
  EXPECT_EQ(err(R"([1])"), "template data: expected a JSON object");
}

}  // namespace
}  // namespace trainwatch::notify
