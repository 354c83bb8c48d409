#include "app/template_cmd.h"

#include <iostream>

#include "base/file.h"
#include "notify/templates.h"

namespace trainwatch::app {
namespace {

Result<std::string> Render(const TemplateRenderOptions& o) {
  if (o.type != "text" && o.type != "html") {
    return Status::InvalidArgument("--template.type: want text or html, got \"" + o.type + "\"");
  }
  auto files = notify::ReadTemplateGlobs(o.globs, "");
  if (!files.ok()) return files.error().Annotate("--template.glob");
  ASSIGN_OR_RETURN(auto templates, notify::Templates::Parse(*files));
  std::string json;
  RETURN_IF_ERROR(file::ReadFile(o.data_file, &json).Annotate("--template.data"));
  ASSIGN_OR_RETURN(notify::NotificationData d, notify::ParseTemplateData(json));
  return o.type == "html" ? templates->ExecuteHtml(o.text, d) : templates->ExecuteText(o.text, d);
}

}  // namespace

int RunTemplateRender(const TemplateRenderOptions& o) {
  auto out = Render(o);
  if (!out.ok()) {
    std::cerr << "trainwatch: error: " << out.error().message() << "\n";
    return 1;
  }
  std::cout << *out;
  return 0;
}

}  // namespace trainwatch::app
