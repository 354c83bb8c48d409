#include "app/check_config_cmd.h"

#include <iostream>

#include <yaml-cpp/yaml.h>

#include "app/config.h"
#include "base/file.h"
#include "notify/config.h"
#include "notify/templates.h"

namespace trainwatch::app {
namespace {

bool LooksLikeAlertmanager(const std::string& text) {
  try {
    YAML::Node n = YAML::Load(text);
    return n.IsMap() && (n["route"] || n["receivers"] || n["inhibit_rules"]);
  } catch (const YAML::Exception&) {
    return true;  // the alertmanager parser reports the syntax error with its line
  }
}

}  // namespace

int RunCheckConfig(const std::vector<std::string>& files) {
  int failed = 0;
  for (const std::string& f : files) {
    std::string text;
    Status rs = file::ReadFile(f, &text);
    if (!rs.ok()) {
      std::cout << "Checking '" << f << "'  FAILED: " << rs.message() << "\n\n";
      failed++;
      continue;
    }
    if (!LooksLikeAlertmanager(text)) {
      auto c = ParseConfig(text);
      if (!c.ok()) {
        std::cout << "Checking '" << f << "'  FAILED: " << c.error().message() << "\n\n";
        failed++;
      } else {
        std::cout << "Checking '" << f << "'  SUCCESS: valid trainwatch/prometheus config file syntax\n\n";
      }
      continue;
    }
    auto c = notify::ParseConfig(text);
    if (!c.ok()) {
      std::cout << "Checking '" << f << "'  FAILED: " << c.error().message() << "\n\n";
      failed++;
      continue;
    }
    const notify::Config& cfg = **c;
    std::cout << "Checking '" << f << "'  SUCCESS\nFound:\n - global config\n - route\n - "
              << cfg.inhibit_rules.size() << " inhibit rules\n - " << cfg.receivers.size() << " receivers\n - "
              << cfg.templates.size() << " templates\n";
    if (!cfg.templates.empty()) {
      // As amtool: the default templates and every file the globs match, parsed together.
      auto files = notify::ReadTemplateFiles(cfg, f);
      Status ts = files.ok() ? notify::Templates::Parse(*files).status() : files.error();
      if (ts.ok()) {
        std::cout << "  SUCCESS\n";
      } else {
        std::cout << "  FAILED: " << ts.message() << "\n";
        failed++;
      }
    }
    std::cout << "\n";
  }
  if (failed > 0) {
    std::cerr << "trainwatch: error: failed to validate " << failed << " file(s)\n";
    return 1;
  }
  return 0;
}

}  // namespace trainwatch::app
