#pragma once
// Internals of the Go text/template engine: the parse tree (Go's
// text/template/parse node kinds), Go fmt formatting, and the function table.

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "template/template.h"
#include "template/template_value.h"

namespace trainwatch::tmpl {

enum class NodeType {
  kList, kText, kAction, kIf, kRange, kWith, kTemplate, kBreak, kContinue, kComment,
  kPipe, kCommand, kIdentifier, kField, kVariable, kChain, kDot, kNil, kBool, kNumber, kString,
  kEnd, kElse,  // parser-internal markers for {{end}} and {{else}}
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeType type;
  int pos = 0;   // byte offset in the template text
  int line = 1;

  std::string text;                 // kText: the text; kString: quoted source; kNumber: source; kIdentifier
  std::string str;                  // kString: unquoted value; kTemplate: template name
  std::vector<std::string> idents;  // kField (without dots), kVariable ($x, fields...), kChain: fields
  bool boolean = false;             // kBool
  // kNumber (Go's parse.NumberNode).
  bool is_int = false, is_uint = false, is_float = false;
  int64_t int64 = 0;
  uint64_t uint64 = 0;
  double float64 = 0;
  // kPipe
  bool is_assign = false;
  std::vector<NodePtr> decl;  // kVariable nodes
  std::vector<NodePtr> cmds;  // kCommand nodes
  // kCommand
  std::vector<NodePtr> args;
  // kAction / kIf / kRange / kWith / kTemplate: pipe; kChain: node
  NodePtr pipe;
  NodePtr list, else_list;      // kIf / kRange / kWith
  std::vector<NodePtr> nodes;   // kList

  explicit Node(NodeType t, int p, int l) : type(t), pos(p), line(l) {}
  // Go's Node.String(): the source form used in error contexts.
  std::string String() const;
};

// All templates of one parse: the main one under `name` plus {{define}}s.
// `name` is Go's ParseName, shown in error locations ("template: NAME:3:5").
struct Tree {
  std::string name;
  std::string text;
  std::map<std::string, NodePtr, std::less<>> templates;  // name -> kList
};

// One template of a set: its body and the parse that holds it.
struct Def {
  std::shared_ptr<const Tree> tree;
  const Node* root = nullptr;  // a kList inside tree->templates
};
using DefMap = std::map<std::string, Def, std::less<>>;

// Go's parse.IsEmptyTree: only whitespace text (and comments) in `list`.
bool IsEmptyTree(const Node& list);

// Whether `name` is a function templates of `funcs` may call (parse-time check).
bool HasFunction(std::string_view name, FuncSet funcs);

// Parses `text` into `tree` (template_parse.cc).
Status ParseTree(std::string_view name, std::string_view text, FuncSet funcs, Tree* tree);

const char* ParamTypeName(Param p);

struct FuncDef {
  std::vector<Param> params;  // fixed parameters
  bool variadic = false;      // then a trailing ...variadic_param
  Param variadic_param = Param::kAny;
  // and / or: arguments are evaluated lazily by the executor.
  bool short_circuit = false;
  Value (*fn)(const TemplateOptions& opts, std::vector<Value>& args) = nullptr;
};
const FuncDef* FindFunction(std::string_view name, FuncSet funcs);
// Go's truth of a value (if / with / and / or / not).
bool IsTrue(const Value& v);

// ---- Go fmt ----
// fmt.Sprint of one value as text/template prints it (%v).
std::string FormatV(const Value& v);
std::string Sprint(const std::vector<Value>& args);
std::string Sprintln(const std::vector<Value>& args);
std::string Sprintf(std::string_view format, const std::vector<Value>& args);
// strconv.FormatFloat(v, fmt, prec, 64); prec -1 is the shortest exact form.
std::string FormatFloat(double v, char fmt, int prec);
// time.Time.String() and Format(layout) for a UTC time at unix seconds + nanoseconds.
std::string TimeString(int64_t secs, int64_t nanos);
std::string TimeFormat(int64_t secs, int64_t nanos, std::string_view layout);
// html/template's escaper for text context (Go's htmlEscaper): NUL, ", &, ', +, <, >.
std::string HtmlTextEscape(std::string_view s);

}  // namespace trainwatch::tmpl
