#pragma once
// `trainwatch template render`: renders a notification template against
// template data, as `amtool template render` does (same flags), with the
// default templates and the files the globs match.

#include <string>
#include <vector>

namespace trainwatch::app {

struct TemplateRenderOptions {
  std::vector<std::string> globs;  // --template.glob (repeatable)
  std::string text;                // --template.text
  std::string type = "text";       // --template.type: text or html
  std::string data_file;           // --template.data: template.Data as JSON
};

// Prints the rendered text to stdout; errors go to stderr with exit code 1.
int RunTemplateRender(const TemplateRenderOptions& o);

}  // namespace trainwatch::app
