#include "scrape/config.h"

#include <gtest/gtest.h>

#include "scrape/target.h"

namespace trainwatch::scrape {
namespace {

Result<std::vector<ScrapeConfig>> Parse(const std::string& yaml, GlobalDefaults g = {15000, 10000}) {
  return ParseScrapeConfigs(YAML::Load(yaml), g);
}

TEST(ScrapeConfig, DefaultsFromGlobal) {
  auto r = Parse("scrape_configs: [{job_name: a, static_configs: [{targets: ['h:1']}]},"
                 " {job_name: b, scrape_interval: 5s},"
                 " {job_name: c, scrape_interval: 1m30s, scrape_timeout: 20s, metrics_path: /m, scheme: https,"
                 "  params: {module: [x, y]}, honor_labels: true, honor_timestamps: false, sample_limit: 10,"
                 "  body_size_limit: 1KiB, basic_auth: {username: u, password: p}}]");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 3u);
  const ScrapeConfig& a = (*r)[0];
  EXPECT_EQ(a.scrape_interval_ms, 15000);
  EXPECT_EQ(a.scrape_timeout_ms, 10000);
  EXPECT_EQ(a.metrics_path, "/metrics");
  EXPECT_EQ(a.scheme, "http");
  EXPECT_TRUE(a.honor_timestamps);
  EXPECT_FALSE(a.honor_labels);
  ASSERT_EQ(a.static_configs.size(), 1u);
  EXPECT_EQ(a.static_configs[0].targets[0], "h:1");
  // Global timeout longer than the job's interval: capped to the interval.
  EXPECT_EQ((*r)[1].scrape_timeout_ms, 5000);
  const ScrapeConfig& c = (*r)[2];
  EXPECT_EQ(c.scrape_interval_ms, 90000);
  EXPECT_EQ(FormatDuration(c.scrape_interval_ms), "1m30s");
  EXPECT_EQ(c.params.at("module").size(), 2u);
  EXPECT_TRUE(c.honor_labels);
  EXPECT_FALSE(c.honor_timestamps);
  EXPECT_EQ(c.sample_limit, 10u);
  EXPECT_EQ(c.body_size_limit, 1024u);
  EXPECT_TRUE(c.http.has_basic_auth);
}

TEST(ScrapeConfig, ErrorsNameJobAndField) {
  const std::pair<std::string, std::string> kCases[] = {
      {"scrape_configs: [{job_name: n, colour: red}]", "scrape_configs[0] (job \"n\"): unknown field \"colour\""},
      {"scrape_configs: [{job_name: n, scrape_interval: 5x}]", "(job \"n\").scrape_interval: invalid duration \"5x\""},
      {"scrape_configs: [{job_name: n, scrape_interval: 5s, scrape_timeout: 10s}]",
       "scrape timeout greater than scrape interval for scrape config with job name \"n\""},
      {"scrape_configs: [{job_name: n}, {job_name: n}]", "found multiple scrape configs with job name \"n\""},
      {"scrape_configs: [{scrape_interval: 5s}]", "scrape_configs[0].job_name: job_name is empty"},
      {"scrape_configs: [{job_name: n, scheme: ftp}]", "(job \"n\").scheme: invalid scheme \"ftp\""},
      {"scrape_configs: [{job_name: n, sample_limit: -1}]", "(job \"n\").sample_limit: invalid integer \"-1\""},
      {"scrape_configs: [{job_name: n, honor_labels: maybe}]", "(job \"n\").honor_labels: invalid boolean \"maybe\""},
      {"scrape_configs: [{job_name: n, static_configs: [{targets: [a], lables: {}}]}]",
       "(job \"n\").static_configs[0]: unknown field \"lables\""},
      {"scrape_configs: [{job_name: n, static_configs: [{targets: ['http://a:1']}]}]", "is not a valid hostname"},
      {"scrape_configs: [{job_name: n, tls_config: {ca: x}}]", "(job \"n\").tls_config: unknown field \"ca\""},
      {"scrape_configs: [{job_name: n, bearer_token: a, bearer_token_file: b}]",
       "at most one of bearer_token & bearer_token_file"},
      {"scrape_configs: [{job_name: n, basic_auth: {username: u}, bearer_token: a}]", "at most one of basic_auth"},
      {"scrape_configs: [{job_name: n, file_sd_configs: [{files: [targets.txt]}]}]", "is not valid for file discovery"},
      {"scrape_configs: [{job_name: n, relabel_configs: [{action: hashmod, target_label: x}]}]",
       "(job \"n\").relabel_configs[0]: modulus"},
      {"scrape_configs: [{job_name: n, metric_relabel_configs: [{action: nope}]}]",
       "(job \"n\").metric_relabel_configs[0].action: unknown relabel action \"nope\""},
      {"scrape_configs: [{job_name: n, body_size_limit: lots}]", "(job \"n\").body_size_limit: invalid size"},
  };
  for (const auto& [yaml, want] : kCases) {
    auto r = Parse(yaml);
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_NE(r.error().message().find(want), std::string::npos) << yaml << "\n -> " << r.error().message();
  }
}

TEST(ScrapeConfig, KnownButUnsupportedKeysAreIgnored) {
  auto r = Parse("scrape_configs: [{job_name: k, kubernetes_sd_configs: [{role: pod}], follow_redirects: true}]");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
}

TEST(Targets, LabelsAsPrometheusComputesThem) {
  auto r = Parse(
      "scrape_configs: [{job_name: node, scrape_interval: 5s, params: {module: [m1]},"
      " static_configs: [{targets: ['h1:9100', 'h2', 'drop-me:1'], labels: {env: prod, __meta_x: y}}],"
      " relabel_configs: [{source_labels: [__address__], regex: 'drop-me:.*', action: drop},"
      "                   {source_labels: [__meta_x], target_label: from_meta}]}]");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  const ScrapeConfig& c = (*r)[0];
  auto ts = TargetsFromGroup(c, c.static_configs[0]);
  ASSERT_EQ(ts.size(), 3u);
  const TargetSpec& t = ts[0];
  ASSERT_FALSE(t.dropped);
  EXPECT_EQ(t.discovered.Get("__address__"), "h1:9100");
  EXPECT_EQ(t.discovered.Get("__scrape_interval__"), "5s");
  EXPECT_EQ(t.discovered.Get("__scrape_timeout__"), "5s");
  EXPECT_EQ(t.discovered.Get("__metrics_path__"), "/metrics");
  EXPECT_EQ(t.discovered.Get("__scheme__"), "http");
  EXPECT_EQ(t.discovered.Get("__param_module"), "m1");
  EXPECT_EQ(t.discovered.Get("job"), "node");
  EXPECT_EQ(t.discovered.Get("__meta_x"), "y");
  EXPECT_EQ(t.PublicLabels(), (model::Labels{{"env", "prod"}, {"from_meta", "y"}, {"instance", "h1:9100"}, {"job", "node"}}));
  EXPECT_EQ(t.Url(c), "http://h1:9100/metrics?module=m1");
  // No port: the scheme's default is added, as Prometheus 2.42 does.
  EXPECT_EQ(ts[1].labels.Get("__address__"), "h2:80");
  EXPECT_EQ(ts[1].PublicLabels().Get("instance"), "h2:80");
  EXPECT_TRUE(ts[2].dropped);
  EXPECT_TRUE(ts[2].error.empty());
  // An empty __address__ after relabeling drops the target with an error.
  auto r2 = Parse("scrape_configs: [{job_name: j, static_configs: [{targets: ['a:1']}],"
                  " relabel_configs: [{target_label: __address__, replacement: ''}]}]");
  ASSERT_TRUE(r2.ok());
  auto t2 = TargetsFromGroup((*r2)[0], (*r2)[0].static_configs[0]);
  EXPECT_TRUE(t2[0].dropped);
  EXPECT_EQ(t2[0].error, "no address");
  // __param_* from relabeling override the config's params in the URL.
  auto r3 = Parse("scrape_configs: [{job_name: j, params: {a: ['1 2']}, static_configs: [{targets: ['x:1']}],"
                  " relabel_configs: [{target_label: __param_b, replacement: 'q&r'}]}]");
  ASSERT_TRUE(r3.ok());
  auto t3 = TargetsFromGroup((*r3)[0], (*r3)[0].static_configs[0]);
  EXPECT_EQ(t3[0].Url((*r3)[0]), "http://x:1/metrics?a=1+2&b=q%26r");
  // Relabeling may set __metrics_path__ without its leading '/', or empty:
  // the URL still separates host and path, as Prometheus's (url.URL) does.
  for (auto [path, want] : {std::pair{"metrics", "http://x:1/metrics"}, std::pair{"", "http://x:1/"}}) {
    auto r4 = Parse(std::string("scrape_configs: [{job_name: j, static_configs: [{targets: ['x:1']}],"
                                " relabel_configs: [{target_label: __metrics_path__, replacement: '") +
                    path + "'}]}]");
    ASSERT_TRUE(r4.ok());
    auto t4 = TargetsFromGroup((*r4)[0], (*r4)[0].static_configs[0]);
    ASSERT_FALSE(t4[0].dropped) << t4[0].error;
    EXPECT_EQ(t4[0].Url((*r4)[0]), want);
  }
}

TEST(Targets, FormatDuration) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(15000), "15s");
  EXPECT_EQ(FormatDuration(60000), "1m");
  EXPECT_EQ(FormatDuration(3600000 + 1500), "1h1s500ms");
  EXPECT_EQ(FormatDuration(86400000LL * 8), "1w1d");
}

TEST(ScrapeConfig, ProtocolSettingsFromGlobal) {
  auto r = Parse("global: {scrape_native_histograms: true, scrape_protocols: [PrometheusProto, PrometheusText0.0.4],"
                 " always_scrape_classic_histograms: true}\n"
                 "scrape_configs: [{job_name: a}, {job_name: b, scrape_native_histograms: false,"
                 " scrape_protocols: [OpenMetricsText1.0.0], always_scrape_classic_histograms: false}]");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  // Job a takes global's settings; job b's own replace them.
  EXPECT_TRUE((*r)[0].scrape_native_histograms);
  EXPECT_TRUE((*r)[0].always_scrape_classic_histograms);
  EXPECT_EQ((*r)[0].scrape_protocols, (std::vector<std::string>{"PrometheusProto", "PrometheusText0.0.4"}));
  EXPECT_FALSE((*r)[1].scrape_native_histograms);
  EXPECT_FALSE((*r)[1].always_scrape_classic_histograms);
  EXPECT_EQ((*r)[1].scrape_protocols, (std::vector<std::string>{"OpenMetricsText1.0.0"}));
  // A bad global value is named.
  auto bad = Parse("global: {scrape_protocols: [Nope]}\nscrape_configs: [{job_name: a}]");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("global.scrape_protocols: unknown scrape protocol \"Nope\""), std::string::npos)
      << bad.error().message();
}

TEST(ScrapeConfig, ScrapeProtocolsAndNativeHistograms) {
  auto r = Parse("scrape_configs: [{job_name: a},"
                 " {job_name: b, scrape_native_histograms: true, always_scrape_classic_histograms: true},"
                 " {job_name: c, scrape_protocols: [PrometheusText0.0.4, PrometheusProto], scrape_classic_histograms: true}]");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(AcceptHeaderFor((*r)[0]),
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
            "text/plain;version=0.0.4;q=0.5,*/*;q=0.1");
  EXPECT_TRUE((*r)[1].scrape_native_histograms);
  EXPECT_TRUE((*r)[1].always_scrape_classic_histograms);
  EXPECT_EQ(AcceptHeaderFor((*r)[1]),
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,"
            "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
            "text/plain;version=1.0.0;escaping=underscores;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1");
  EXPECT_TRUE((*r)[2].always_scrape_classic_histograms);
  EXPECT_EQ(AcceptHeaderFor((*r)[2]),
            "text/plain;version=0.0.4;q=0.6,application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited;q=0.5,*/*;q=0.4");
  auto bad = [](const std::string& job, std::string_view want) {
    auto e = Parse("scrape_configs: [{job_name: j, " + job + "}]");
    ASSERT_FALSE(e.ok()) << job;
    EXPECT_NE(e.error().message().find(want), std::string::npos) << e.error().message();
  };
  bad("scrape_protocols: [PrometheusProto, Proto3]", "scrape_protocols: unknown scrape protocol \"Proto3\", supported: [PrometheusProto");
  bad("scrape_protocols: [PrometheusProto, PrometheusProto]", "scrape_protocols: duplicated protocol \"PrometheusProto\"");
  bad("scrape_protocols: PrometheusProto", "scrape_protocols: expected a list");
  bad("scrape_native_histograms: maybe", "scrape_native_histograms");
  bad("always_scrape_classic_histograms: 3", "always_scrape_classic_histograms");
}

TEST(ScrapeConfig, FallbackScrapeProtocol) {
  auto r = Parse("global: {fallback_scrape_protocol: PrometheusText0.0.4}\n"
                 "scrape_configs: [{job_name: a}, {job_name: b, fallback_scrape_protocol: OpenMetricsText1.0.0},"
                 " {job_name: c, fallback_scrape_protocol: PrometheusProto}]");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)[0].fallback_scrape_protocol, "PrometheusText0.0.4");  // global's default
  EXPECT_EQ((*r)[1].fallback_scrape_protocol, "OpenMetricsText1.0.0");  // the job's replaces it
  EXPECT_EQ((*r)[2].fallback_scrape_protocol, "PrometheusProto");
  auto none = Parse("scrape_configs: [{job_name: a}]");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)[0].fallback_scrape_protocol, "");

  // A recognised media type is kept whatever the fallback; anything else takes it.
  EXPECT_EQ(EffectiveContentType((*r)[1], "text/plain; version=0.0.4"), "text/plain; version=0.0.4");
  EXPECT_EQ(EffectiveContentType((*r)[1], " Application/OpenMetrics-Text "), " Application/OpenMetrics-Text ");
  EXPECT_EQ(EffectiveContentType((*r)[1], ""), "application/openmetrics-text;version=1.0.0");
  EXPECT_EQ(EffectiveContentType((*r)[1], "application/json"), "application/openmetrics-text;version=1.0.0");
  EXPECT_EQ(EffectiveContentType((*r)[2], "text/html; charset=utf-8"),
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited");
  EXPECT_EQ(EffectiveContentType((*r)[2], "application/vnd.google.protobuf"), "application/vnd.google.protobuf");
  // Without a fallback the received type goes through unchanged (read as the text format).
  EXPECT_EQ(EffectiveContentType((*none)[0], ""), "");
  EXPECT_EQ(EffectiveContentType((*none)[0], "application/json"), "application/json");

  auto bad = Parse("scrape_configs: [{job_name: j, fallback_scrape_protocol: Text}]");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("(job \"j\").fallback_scrape_protocol: invalid fallback_scrape_protocol: unknown scrape "
                                       "protocol \"Text\", supported: [PrometheusProto"),
            std::string::npos)
      << bad.error().message();
  auto bad_global = Parse("global: {fallback_scrape_protocol: [PrometheusProto]}\nscrape_configs: [{job_name: a}]");
  ASSERT_FALSE(bad_global.ok());
  EXPECT_NE(bad_global.error().message().find("global.fallback_scrape_protocol"), std::string::npos)
      << bad_global.error().message();
}

TEST(ScrapeConfig, ConvertClassicHistogramsToNhcb) {
  // Off by default; global's is every job's default, a job's replaces it.
  auto off = Parse("scrape_configs: [{job_name: a}]");
  ASSERT_TRUE(off.ok()) << off.error().ToString();
  EXPECT_FALSE((*off)[0].convert_classic_histograms_to_nhcb);
  auto r = Parse("global: {convert_classic_histograms_to_nhcb: true}\n"
                 "scrape_configs: [{job_name: a}, {job_name: b, convert_classic_histograms_to_nhcb: false},"
                 " {job_name: c, always_scrape_classic_histograms: true}]");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_TRUE((*r)[0].convert_classic_histograms_to_nhcb);
  EXPECT_FALSE((*r)[1].convert_classic_histograms_to_nhcb);
  EXPECT_TRUE((*r)[2].convert_classic_histograms_to_nhcb);
  EXPECT_TRUE((*r)[2].always_scrape_classic_histograms);
  // Toggling it in global alone changes the job's fingerprint, so a reload
  // restarts the job's loops with the new setting.
  auto g_off = Parse("global: {convert_classic_histograms_to_nhcb: false}\nscrape_configs: [{job_name: a}]");
  ASSERT_TRUE(g_off.ok());
  EXPECT_NE((*r)[0].fingerprint, (*g_off)[0].fingerprint);
  EXPECT_EQ((*off)[0].fingerprint, (*g_off)[0].fingerprint);

  auto bad = Parse("scrape_configs: [{job_name: j, convert_classic_histograms_to_nhcb: yes please}]");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("(job \"j\").convert_classic_histograms_to_nhcb"), std::string::npos)
      << bad.error().message();
  auto bad_global = Parse("global: {convert_classic_histograms_to_nhcb: [true]}\nscrape_configs: [{job_name: a}]");
  ASSERT_FALSE(bad_global.ok());
  EXPECT_NE(bad_global.error().message().find("global.convert_classic_histograms_to_nhcb"), std::string::npos)
      << bad_global.error().message();
}

}  // namespace
}  // namespace trainwatch::scrape
