#pragma once
// Go text/template, as Prometheus expands alert labels and annotations and
// Alertmanager expands notification templates: actions with trim markers and
// comments, variables, pipelines, if / range / with / define / template /
// block, Go's builtins (and, or, not, eq, lt, len, index, print, printf,
// html, js, urlquery, ...) plus one function set: Prometheus's (humanize*,
// query, first, label, value, reReplaceAll, ...) or Alertmanager's (toUpper,
// toLower, title, join, match, safeHtml, reReplaceAll, stringSlice). Output
// and error texts follow Go's, byte for byte where tests pin them.
//
// The engine needs no PromQL: `query` runs TemplateOptions::query, which
// the embedder supplies (rules/ answers it with the PromQL engine).
//
// Templates are data, never code: no function reads files, the network or
// the environment; output size, evaluation steps and nesting are bounded
// (TemplateLimits), so no template can hang or exhaust memory.
//
// Thread safety: a parsed Template is immutable; Execute may run concurrently.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "template/template_value.h"

namespace trainwatch::tmpl {

// Runs a PromQL instant query for the template function `query` and returns
// the resulting vector (labels incl. __name__, value). Errors are shown as
// "error calling query: <message>".
using TemplateQueryFunc = std::function<Result<std::vector<Sample>>(std::string_view expr)>;

// Which functions templates may call besides Go's builtins.
enum class FuncSet : uint8_t {
  kPrometheus,    // prometheus/template (alert labels and annotations)
  kAlertmanager,  // alertmanager/template DefaultFuncs (0.25)
};

struct TemplateLimits {
  size_t max_output_bytes = 1 << 20;    // output beyond this is an execution error
  int64_t max_steps = 1'000'000;        // nodes evaluated + range iterations
  int max_template_depth = 100;         // nested {{template}} calls
};

struct TemplateOptions {
  TemplateQueryFunc query;       // empty: `query` fails with "query function not available"
  std::string external_url;      // for externalURL / pathPrefix
  TemplateLimits limits;
  // html/template as Alertmanager runs email `html`: each action's output
  // is escaped for HTML text (Go's htmlEscaper), except template.HTML values
  // (safeHtml). Attribute, URL and script contexts are escaped as text.
  bool escape_html = false;
};

struct Tree;
struct Node;
struct Def;
using DefMap = std::map<std::string, Def, std::less<>>;

// A template and the templates associated with it (its {{define}}s and
// those of the texts it was extended with), as Go's *template.Template.
class Template {
 public:
  // Parses `text` as template `name`. Errors read like Go's
  // "template: NAME:LINE: unexpected EOF".
  static Result<Template> Parse(std::string_view name, std::string_view text,
                                FuncSet funcs = FuncSet::kPrometheus);

  // Go's t.Clone().New(name).Parse(text): a new set with this set's
  // templates and text's; a non-empty definition replaces an earlier one of
  // the same name. The result executes `text` (even when it is empty).
  Result<Template> Extend(std::string_view name, std::string_view text) const;

  // Executes with `data` as dot. Errors read like Go's
  // "template: NAME:LINE:COL: executing \"NAME\" at <NODE>: MESSAGE".
  Result<std::string> Execute(const Value& data, const TemplateOptions& opts) const;

  // Whether the set has a template `name` ({{ template "name" }} works).
  bool Defines(std::string_view name) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  FuncSet funcs_ = FuncSet::kPrometheus;
  std::shared_ptr<const Tree> main_tree_;  // holds the body that Execute runs
  const Node* main_ = nullptr;
  std::shared_ptr<const DefMap> defs_;
};

// The variables Prometheus defines before every alert template.
inline constexpr std::string_view kAlertTemplateDefs =
    "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}"
    "{{$value := .Value}}";

// Parse-only check of one alert label/annotation template, as promtool's
// `check rules` does (Go's ParseTest). The error is Go's parse error text.
Status CheckAlertTemplate(std::string_view alert_name, std::string_view text);

// Expands like Prometheus's alerting rule (template name "__alert_<name>",
// defs prepended). Errors: "error parsing template __alert_X: ..." or
// "error executing template __alert_X: ...".
Result<std::string> ExpandAlertTemplate(std::string_view alert_name, std::string_view text,
                                        const AlertData& data, const TemplateOptions& opts);

// What an alert's label or annotation shows: the expansion, or
// "<error expanding template: ERROR>" as Prometheus shows a failed one.
std::string ExpandAlertField(std::string_view alert_name, std::string_view text, const AlertData& data,
                             const TemplateOptions& opts);

// Go's strconv.Quote (%q of a string), as Go templates and promtool print
// names in errors.
std::string GoQuote(std::string_view s);

}  // namespace trainwatch::tmpl
