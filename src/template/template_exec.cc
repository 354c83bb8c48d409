// Executes a parsed Go text/template the way text/template/exec.go does:
// the same evaluation of pipelines, commands, fields, variables and calls,
// the same node tracking for error positions, with bounded output and work.
#include <algorithm>

#include "template/template.h"
#include "template/template_internal.h"

namespace trainwatch::tmpl {

namespace {

// Unwinds execution on an error (internal only); Execute turns it into a Status.
struct ExecError {
  std::string msg;
};
struct BreakSignal {};
struct ContinueSignal {};

class Exec {
 public:
  Exec(const DefMap& defs, FuncSet funcs, const TemplateOptions& opts) : defs_(defs), funcs_(funcs), opts_(opts) {}

  std::string Run(const std::string& name, const Def& main, const Value& data) {
    tmpl_name_ = name;
    if (main.root == nullptr) {
      throw ExecError{"template: " + GoQuote(name) + " is an incomplete or empty template"};
    }
    tree_ = main.tree.get();
    vars_.push_back({"$", data});
    Walk(data, *main.root);
    return std::move(out_);
  }

 private:
  struct Var {
    std::string name;
    Value value;
  };

  [[noreturn]] void Errorf(const std::string& msg) {
    if (node_ == nullptr) throw ExecError{"template: " + tmpl_name_ + ": " + msg};
    int pos = node_->pos;
    std::string_view before = std::string_view(tree_->text).substr(0, static_cast<size_t>(pos));
    size_t nl = before.rfind('\n');
    int line = 1 + static_cast<int>(std::count(before.begin(), before.end(), '\n'));
    int col = nl == std::string_view::npos ? pos : pos - static_cast<int>(nl + 1);
    std::string context = node_->String();
    throw ExecError{"template: " + tree_->name + ":" + std::to_string(line) + ":" + std::to_string(col) +
                    ": executing " + GoQuote(tmpl_name_) + " at <" + context + ">: " + msg};
  }

  void At(const Node& n) { node_ = &n; }

  void Step() {
    if (++steps_ > opts_.limits.max_steps) {
      Errorf("template evaluation exceeds " + std::to_string(opts_.limits.max_steps) + " steps");
    }
  }

  void Write(std::string_view s) {
    if (out_.size() + s.size() > opts_.limits.max_output_bytes) {
      Errorf("template output exceeds " + std::to_string(opts_.limits.max_output_bytes) + " bytes");
    }
    out_.append(s);
  }

  void Walk(const Value& dot, const Node& n) {
    Step();
    At(n);
    switch (n.type) {
      case NodeType::kAction: {
        Value v = EvalPipeline(dot, n.pipe.get());
        if (n.pipe->decl.empty()) {
          At(n);
          if (opts_.escape_html && v.kind() != Value::Kind::kHTML) {
            Write(HtmlTextEscape(FormatV(v)));
          } else {
            Write(FormatV(v));
          }
        }
        return;
      }
      case NodeType::kBreak: throw BreakSignal{};
      case NodeType::kContinue: throw ContinueSignal{};
      case NodeType::kComment: return;
      case NodeType::kIf:
      case NodeType::kWith: {
        size_t mark = vars_.size();
        Value v = EvalPipeline(dot, n.pipe.get());
        if (IsTrue(v)) {
          Walk(n.type == NodeType::kWith ? v : dot, *n.list);
        } else if (n.else_list) {
          Walk(dot, *n.else_list);
        }
        vars_.resize(mark);
        return;
      }
      case NodeType::kList:
        for (const auto& c : n.nodes) Walk(dot, *c);
        return;
      case NodeType::kRange: WalkRange(dot, n); return;
      case NodeType::kTemplate: WalkTemplate(dot, n); return;
      case NodeType::kText: Write(n.text); return;
      default: Errorf("unknown node: " + n.String());
    }
  }

  void WalkRange(const Value& dot, const Node& r) {
    At(r);
    size_t outer = vars_.size();
    Value val = EvalPipeline(dot, r.pipe.get());
    size_t mark = vars_.size();
    const Node& pipe = *r.pipe;
    auto one = [&](const Value& index, const Value& elem) {
      Step();
      if (!pipe.decl.empty()) {
        if (pipe.is_assign) {
          SetVar(pipe.decl[0]->idents[0], pipe.decl.size() > 1 ? index : elem);
        } else {
          vars_[vars_.size() - 1].value = elem;
        }
      }
      if (pipe.decl.size() > 1) {
        if (pipe.is_assign) {
          SetVar(pipe.decl[1]->idents[0], elem);
        } else {
          vars_[vars_.size() - 2].value = index;
        }
      }
      try {
        Walk(elem, *r.list);
      } catch (const ContinueSignal&) {
      }
      vars_.resize(mark);
    };
    bool empty = true;
    try {
      using K = Value::Kind;
      switch (val.kind()) {
        case K::kList:
          empty = val.list().empty();
          for (size_t i = 0; i < val.list().size(); ++i) one(Value::Int(static_cast<int64_t>(i)), val.list()[i]);
          break;
        case K::kQueryResult:
          empty = val.query().empty();
          for (size_t i = 0; i < val.query().size(); ++i) {
            one(Value::Int(static_cast<int64_t>(i)), Value::SamplePtr(val.query()[i]));
          }
          break;
        case K::kStrMap:
          empty = val.strmap().empty();
          for (const auto& [k, v] : val.strmap()) one(Value::String(k), Value::String(v));
          break;
        case K::kMap:
          empty = val.map().empty();
          for (const auto& [k, v] : val.map()) one(Value::String(k), v);
          break;
        case K::kInvalid: break;
        default: Errorf("range can't iterate over " + FormatV(val));
      }
    } catch (const BreakSignal&) {
      vars_.resize(mark);
    }
    if (empty && r.else_list) Walk(dot, *r.else_list);
    vars_.resize(outer);
  }

  void WalkTemplate(const Value& dot, const Node& t) {
    At(t);
    auto it = defs_.find(t.str);
    if (it == defs_.end()) Errorf("template " + GoQuote(t.str) + " not defined");
    if (depth_ >= opts_.limits.max_template_depth) {
      Errorf("exceeded maximum template depth (" + std::to_string(opts_.limits.max_template_depth) + ")");
    }
    Value new_dot = t.pipe ? EvalPipeline(dot, t.pipe.get()) : Value();
    std::vector<Var> saved = std::move(vars_);
    std::string saved_name = tmpl_name_;
    const Tree* saved_tree = tree_;
    vars_ = {{"$", new_dot}};
    tmpl_name_ = t.str;
    tree_ = it->second.tree.get();
    ++depth_;
    Walk(new_dot, *it->second.root);
    --depth_;
    tree_ = saved_tree;
    tmpl_name_ = saved_name;
    vars_ = std::move(saved);
  }

  void SetVar(const std::string& name, const Value& v) {
    for (size_t i = vars_.size(); i-- > 0;) {
      if (vars_[i].name == name) {
        vars_[i].value = v;
        return;
      }
    }
    Errorf("undefined variable: " + name);
  }

  Value VarValue(const std::string& name) {
    for (size_t i = vars_.size(); i-- > 0;) {
      if (vars_[i].name == name) return vars_[i].value;
    }
    Errorf("undefined variable: " + name);
  }

  Value EvalPipeline(const Value& dot, const Node* pipe) {
    if (pipe == nullptr) return Value();
    At(*pipe);
    Value value;
    bool have_final = false;
    for (const auto& cmd : pipe->cmds) {
      value = EvalCommand(dot, *cmd, have_final ? &value : nullptr);
      have_final = true;
    }
    for (const auto& v : pipe->decl) {
      if (pipe->is_assign) {
        SetVar(v->idents[0], value);
      } else {
        vars_.push_back({v->idents[0], value});
      }
    }
    return value;
  }

  void NotAFunction(const Node& cmd, const Value* final) {
    if (cmd.args.size() > 1 || final != nullptr) {
      Errorf("can't give argument to non-function " + cmd.args[0]->String());
    }
  }

  Value EvalCommand(const Value& dot, const Node& cmd, const Value* final) {
    Step();
    const Node& first = *cmd.args[0];
    switch (first.type) {
      case NodeType::kField: At(first); return EvalFieldChain(dot, dot, first, first.idents, &cmd, final);
      case NodeType::kChain: return EvalChain(dot, first, &cmd, final);
      case NodeType::kIdentifier: return EvalFunction(dot, first, &cmd, final);
      case NodeType::kPipe: NotAFunction(cmd, final); return EvalPipeline(dot, &first);
      case NodeType::kVariable: return EvalVariable(dot, first, &cmd, final);
      default: break;
    }
    At(first);
    NotAFunction(cmd, final);
    switch (first.type) {
      case NodeType::kBool: return Value::Bool(first.boolean);
      case NodeType::kDot: return dot;
      case NodeType::kNil: Errorf("nil is not a command");
      case NodeType::kNumber: return IdealConstant(first);
      case NodeType::kString: return Value::String(first.str);
      default: Errorf("can't evaluate command " + GoQuote(first.String()));
    }
  }

  Value IdealConstant(const Node& n) {
    At(n);
    if (n.is_float && n.text.find_first_of("xX") == std::string::npos && n.text[0] != '\'' &&
        n.text.find_first_of(".eEpP") != std::string::npos) {
      return Value::Float(n.float64);
    }
    if (n.is_int) return Value::Int(n.int64);
    if (n.is_uint) Errorf(n.text + " overflows int");
    return Value();
  }

  Value EvalVariable(const Value& dot, const Node& v, const Node* cmd, const Value* final) {
    At(v);
    Value value = VarValue(v.idents[0]);
    if (v.idents.size() == 1) {
      if (cmd) NotAFunction(*cmd, final);
      return value;
    }
    std::vector<std::string> fields(v.idents.begin() + 1, v.idents.end());
    return EvalFieldChain(dot, value, v, fields, cmd, final);
  }

  Value EvalChain(const Value& dot, const Node& chain, const Node* cmd, const Value* final) {
    At(chain);
    if (chain.pipe->type == NodeType::kNil) Errorf("indirection through explicit nil in " + chain.String());
    Value pipe = EvalArg(dot, nullptr, *chain.pipe);
    return EvalFieldChain(dot, pipe, chain, chain.idents, cmd, final);
  }

  Value EvalFieldChain(const Value& dot, Value receiver, const Node& node, const std::vector<std::string>& ident,
                       const Node* cmd, const Value* final) {
    for (size_t i = 0; i + 1 < ident.size(); ++i) receiver = EvalField(dot, ident[i], node, nullptr, nullptr, receiver);
    return EvalField(dot, ident.back(), node, cmd, final, receiver);
  }

  // `cmd` holds the arguments (cmd->args[0] is the field itself); null: none.
  Value EvalField(const Value& dot, const std::string& field, const Node& node, const Node* cmd,
                  const Value* final, const Value& receiver) {
    using K = Value::Kind;
    if (!receiver.valid()) return Value();
    bool has_args = (cmd && cmd->args.size() > 1) || final != nullptr;
    if (receiver.kind() == K::kTime) return EvalTimeMethod(dot, field, node, cmd, final, receiver);
    auto no_args = [&] {
      if (has_args) Errorf(field + " has arguments but cannot be invoked as function");
    };
    if (receiver.type()) {
      auto m = receiver.type()->methods.find(field);
      if (m != receiver.type()->methods.end()) return EvalMethod(dot, receiver, field, m->second, node, cmd, final);
    }
    switch (receiver.kind()) {
      case K::kStruct: {
        const Value* f = receiver.Field(field);
        if (f == nullptr) break;
        no_args();
        return *f;
      }
      case K::kAlertData: {
        const AlertData& d = receiver.alert();
        if (field == "Labels") return no_args(), Value::Map(d.labels);
        if (field == "ExternalLabels") return no_args(), Value::Map(d.external_labels);
        if (field == "ExternalURL") return no_args(), Value::String(d.external_url);
        if (field == "Value") return no_args(), Value::Float(d.value);
        break;
      }
      case K::kSample: {
        if (field != "Labels" && field != "Value") break;
        if (!receiver.sample()) Errorf("nil pointer evaluating *template.sample." + field);
        no_args();
        if (field == "Labels") return Value::Map(receiver.sample()->labels);
        return Value::Float(receiver.sample()->value);
      }
      case K::kStrMap: {
        if (has_args) Errorf(field + " is not a method but has arguments");
        auto it = receiver.strmap().find(field);
        return Value::String(it == receiver.strmap().end() ? "" : it->second);
      }
      case K::kMap: {
        if (has_args) Errorf(field + " is not a method but has arguments");
        auto it = receiver.map().find(field);
        return it == receiver.map().end() ? Value() : it->second;
      }
      default: break;
    }
    Errorf("can't evaluate field " + field + " in type " + receiver.TypeName());
  }

  Value EvalMethod(const Value& dot, const Value& recv, const std::string& name, const Method& m, const Node& node,
                   const Node* cmd, const Value* final) {
    std::vector<Value> argv = EvalCallArgs(dot, m.params, m.variadic, m.variadic_param, name, cmd, final);
    try {
      return m.fn(recv, argv);
    } catch (const FuncError& e) {
      At(node);
      Errorf("error calling " + name + ": " + e.msg);
    }
  }

  Value EvalTimeMethod(const Value& dot, const std::string& name, const Node& node, const Node* cmd,
                       const Value* final, const Value& t) {
    size_t nargs = (cmd ? cmd->args.size() - 1 : 0) + (final ? 1 : 0);
    int64_t secs = t.time_secs(), nanos = t.time_nanos();
    auto want = [&](size_t n) {
      if (nargs != n) {
        Errorf("wrong number of args for " + name + ": want " + std::to_string(n) + " got " + std::to_string(nargs));
      }
    };
    if (name == "Format") {
      want(1);
      Value layout = cmd && cmd->args.size() > 1 ? EvalArg(dot, Param::kString, *cmd->args[1])
                                                   : ValidateType(*final, Param::kString);
      return Value::String(TimeFormat(secs, nanos, layout.str()));
    }
    if (name == "Unix") return want(0), Value::Int(secs);
    // Go's UnixMilli / UnixNano wrap outside int64 (e.g. for the zero time) as their int64 arithmetic does.
    auto wrap = [](int64_t s, int64_t mul, int64_t add) {
      return static_cast<int64_t>(static_cast<uint64_t>(s) * static_cast<uint64_t>(mul) + static_cast<uint64_t>(add));
    };
    if (name == "UnixMilli") return want(0), Value::Int(wrap(secs, 1000, nanos / 1'000'000));
    if (name == "UnixNano") return want(0), Value::Int(wrap(secs, 1'000'000'000, nanos));
    if (name == "UTC" || name == "Local") return want(0), t;
    if (name == "IsZero") return want(0), Value::Bool(secs == Value::kGoZeroTimeSecs && nanos == 0);
    if (name == "String") return want(0), Value::String(TimeString(secs, nanos));
    if (name == "Year") return want(0), Value::Int(std::stoll(TimeFormat(secs, nanos, "2006")));
    if (name == "Day") return want(0), Value::Int(std::stoll(TimeFormat(secs, nanos, "2")));
    if (name == "Hour") return want(0), Value::Int(std::stoll(TimeFormat(secs, nanos, "15")));
    if (name == "Minute") return want(0), Value::Int(std::stoll(TimeFormat(secs, nanos, "4")));
    if (name == "Second") return want(0), Value::Int(std::stoll(TimeFormat(secs, nanos, "5")));
    (void)node;
    Errorf("can't evaluate field " + name + " in type " + t.TypeName());
  }

  Value EvalFunction(const Value& dot, const Node& ident, const Node* cmd, const Value* final) {
    At(ident);
    const FuncDef* fn = FindFunction(ident.text, funcs_);
    if (fn == nullptr) Errorf(GoQuote(ident.text) + " is not a defined function");
    return EvalCall(dot, *fn, cmd ? *cmd : ident, ident.text, cmd, final);
  }

  // The argument nodes of a call (cmd->args[0] is the function or method itself).
  static std::vector<const Node*> CallArgs(const Node* cmd) {
    std::vector<const Node*> args;
    if (cmd) {
      for (size_t i = 1; i < cmd->args.size(); ++i) args.push_back(cmd->args[i].get());
    }
    return args;
  }

  void CheckArgCount(size_t nargs, size_t num_fixed, bool variadic, const std::string& name, const Value* final) {
    size_t num_in = nargs + (final ? 1 : 0);
    if (variadic) {
      if (num_in < num_fixed) {
        Errorf("wrong number of args for " + name + ": want at least " + std::to_string(num_fixed) + " got " +
               std::to_string(nargs));
      }
    } else if (num_in != num_fixed) {
      Errorf("wrong number of args for " + name + ": want " + std::to_string(num_fixed) + " got " +
             std::to_string(num_in));
    }
  }

  // Checks the count and evaluates each argument against its parameter type, as Go's evalCall.
  std::vector<Value> EvalCallArgs(const Value& dot, const std::vector<Param>& params, bool variadic, Param vparam,
                                  const std::string& name, const Node* cmd, const Value* final) {
    std::vector<const Node*> args = CallArgs(cmd);
    size_t num_fixed = params.size();
    CheckArgCount(args.size(), num_fixed, variadic, name, final);
    std::vector<Value> argv;
    argv.reserve(args.size() + 1);
    size_t i = 0;
    for (; i < num_fixed && i < args.size(); ++i) argv.push_back(EvalArg(dot, params[i], *args[i]));
    for (; i < args.size(); ++i) argv.push_back(EvalArg(dot, vparam, *args[i]));
    if (final) {
      Param p = argv.size() < num_fixed ? params[argv.size()] : vparam;
      argv.push_back(ValidateType(*final, p));
    }
    return argv;
  }

  Value EvalCall(const Value& dot, const FuncDef& fn, const Node& node, const std::string& name, const Node* cmd,
                 const Value* final) {
    if (fn.short_circuit) {
      std::vector<const Node*> args = CallArgs(cmd);
      CheckArgCount(args.size(), fn.params.size(), fn.variadic, name, final);
      bool is_or = name == "or";
      Value v;
      for (const Node* a : args) {
        v = EvalArg(dot, Param::kReflect, *a);
        if (IsTrue(v) == is_or) return v;
      }
      if (final) v = *final;
      return v;
    }
    std::vector<Value> argv = EvalCallArgs(dot, fn.params, fn.variadic, fn.variadic_param, name, cmd, final);
    try {
      return fn.fn(opts_, argv);
    } catch (const FuncError& e) {
      At(node);
      Errorf("error calling " + name + ": " + e.msg);
    }
  }

  // `p` null: no type check (Go's nil reflect.Type).
  Value EvalArg(const Value& dot, const Param* p, const Node& n) {
    At(n);
    switch (n.type) {
      case NodeType::kDot: return Check(dot, p);
      case NodeType::kNil:
        if (p == nullptr || *p == Param::kAny || *p == Param::kQuery || *p == Param::kSample) return Value();
        Errorf(std::string("cannot assign nil to ") + ParamTypeName(*p));
      case NodeType::kField: return Check(EvalFieldChain(dot, dot, n, n.idents, nullptr, nullptr), p);
      case NodeType::kVariable: return Check(EvalVariable(dot, n, nullptr, nullptr), p);
      case NodeType::kPipe: return Check(EvalPipeline(dot, &n), p);
      case NodeType::kIdentifier: return Check(EvalFunction(dot, n, nullptr, nullptr), p);
      case NodeType::kChain: return Check(EvalChain(dot, n, nullptr, nullptr), p);
      default: break;
    }
    if (p == nullptr || *p == Param::kAny || *p == Param::kReflect) {
      switch (n.type) {
        case NodeType::kBool: return Value::Bool(n.boolean);
        case NodeType::kNumber: return IdealConstant(n);
        case NodeType::kString: return Value::String(n.str);
        default: break;
      }
    }
    if (*p == Param::kString) {
      if (n.type == NodeType::kString) return Value::String(n.str);
      Errorf("expected string; found " + n.String());
    }
    Errorf("can't handle " + n.String() + " for arg of type " + ParamTypeName(*p));
  }
  Value EvalArg(const Value& dot, Param p, const Node& n) { return EvalArg(dot, &p, n); }

  Value Check(const Value& v, const Param* p) { return p ? ValidateType(v, *p) : v; }

  Value ValidateType(const Value& v, Param p) {
    using K = Value::Kind;
    if (!v.valid()) {
      if (p == Param::kString) Errorf("invalid value; expected string");
      return v;
    }
    bool ok = true;
    switch (p) {
      case Param::kAny: case Param::kReflect: break;
      case Param::kString: ok = v.kind() == K::kString; break;
      case Param::kQuery: ok = v.kind() == K::kQueryResult; break;
      case Param::kSample: ok = v.kind() == K::kSample; break;
      case Param::kStringSlice: ok = v.kind() == K::kList && v.str() == "string"; break;
    }
    if (!ok) Errorf(std::string("wrong type for value; expected ") + ParamTypeName(p) + "; got " + v.TypeName());
    return v;
  }

  const DefMap& defs_;
  const FuncSet funcs_;
  const TemplateOptions& opts_;
  const Tree* tree_ = nullptr;  // the parse of the template being executed (error locations)
  std::string out_;
  std::vector<Var> vars_;
  const Node* node_ = nullptr;
  std::string tmpl_name_;
  int depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

Result<Template> Template::Parse(std::string_view name, std::string_view text, FuncSet funcs) {
  Template t;
  t.name_ = std::string(name);
  t.funcs_ = funcs;
  t.defs_ = std::make_shared<const DefMap>();
  return t.Extend(name, text);
}

Result<Template> Template::Extend(std::string_view name, std::string_view text) const {
  auto tree = std::make_shared<Tree>();
  RETURN_IF_ERROR(ParseTree(name, text, funcs_, tree.get()));
  auto defs = std::make_shared<DefMap>(*defs_);
  for (const auto& [n, root] : tree->templates) {
    auto it = defs->find(n);
    // Go's associate: an empty body does not replace an existing template.
    if (it != defs->end() && IsEmptyTree(*root)) continue;
    (*defs)[n] = Def{tree, root.get()};
  }
  Template t;
  t.name_ = std::string(name);
  t.funcs_ = funcs_;
  auto main = tree->templates.find(name);
  t.main_ = main == tree->templates.end() ? nullptr : main->second.get();
  t.main_tree_ = std::move(tree);
  t.defs_ = std::move(defs);
  return t;
}

bool Template::Defines(std::string_view name) const { return defs_->contains(name); }

Result<std::string> Template::Execute(const Value& data, const TemplateOptions& opts) const {
  try {
    Exec ex(*defs_, funcs_, opts);
    return ex.Run(name_, Def{main_tree_, main_}, data);
  } catch (const ExecError& e) {
    return Status::InvalidArgument(e.msg);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("template: " + name_ + ": out of memory");
  }
}

Status CheckAlertTemplate(std::string_view alert_name, std::string_view text) {
  std::string full = std::string(kAlertTemplateDefs) + std::string(text);
  auto t = Template::Parse("__alert_" + std::string(alert_name), full);
  return t.status();
}

Result<std::string> ExpandAlertTemplate(std::string_view alert_name, std::string_view text,
                                        const AlertData& data, const TemplateOptions& opts) {
  std::string name = "__alert_" + std::string(alert_name);
  std::string full = std::string(kAlertTemplateDefs) + std::string(text);
  auto t = Template::Parse(name, full);
  if (!t.ok()) return Status::InvalidArgument("error parsing template " + name + ": " + t.error().message());
  auto out = t->Execute(Value::Alert(std::make_shared<const AlertData>(data)), opts);
  if (!out.ok()) return Status(out.error().code(), "error executing template " + name + ": " + out.error().message());
  return out;
}

std::string ExpandAlertField(std::string_view alert_name, std::string_view text, const AlertData& data,
                             const TemplateOptions& opts) {
  auto r = ExpandAlertTemplate(alert_name, text, data, opts);
  if (!r.ok()) return "<error expanding template: " + r.error().message() + ">";
  return std::move(r).value();
}

}  // namespace trainwatch::tmpl
