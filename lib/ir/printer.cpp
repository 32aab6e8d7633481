// The IR printer: Module / Expr -> the text form that parser.cpp reads back.
//
// The output is canonical: print(parse(print(m))) == print(m). Two choices
// make that hold:
//  - every distinct Var of a function gets a distinct name (the first keeps
//    its own, later ones get `_1`, `_2`, ...), so the parser's lexical
//    scoping finds exactly the variable that was printed;
//  - a `let` outside a body position (a call argument, a let's value) is
//    wrapped in parentheses, and any non-postfix expression used as a callee
//    or projected from is parenthesized, so the text reads back as the tree.
#include "nimble/ir/module.hpp"

#include <fmt/format.h>

#include <cstring>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "ir/op.hpp"
#include "support/stack_guard.hpp"

namespace nimble::ir {
namespace {

/// A string attribute as a quoted literal. Plain strings print exactly as
/// to_string(AttrValue); quotes, backslashes and control characters are
/// escaped so that any string reads back unchanged.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        else
          out += c;
    }
  }
  return out + '"';
}

std::string attr_text(const AttrValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return quote(*s);
  return to_string(value);
}

/// One element of a host tensor, without a dtype suffix. Floats print as the
/// shortest text that reads back as the same value in their own precision
/// (fmt prints inf, -inf, nan and -nan for the special values).
std::string element_text(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::f32:
      return fmt::format("{}", t.data<float>()[i]);
    case DType::f64:
      return fmt::format("{}", t.data<double>()[i]);
    case DType::f16:
      return fmt::format("{}", static_cast<float>(t.data<Half>()[i]));
    case DType::bf16:
      return fmt::format("{}", static_cast<float>(t.data<BFloat16>()[i]));
    case DType::i8:
      return std::to_string(t.data<std::int8_t>()[i]);
    case DType::i32:
      return std::to_string(t.data<std::int32_t>()[i]);
    case DType::i64:
      return std::to_string(t.data<std::int64_t>()[i]);
    case DType::boolean:
      return t.data<bool>()[i] ? "true" : "false";
  }
  return "";
}

/// `1i64`, `0.5f32`, `true` for a scalar; `const f32[2] [1, 2]` otherwise.
// Whether every element has the bytes of the first (printed as `[v; n]`).
bool is_splat(const Tensor& t) {
  if (t.numel() < 2) return false;
  const auto* bytes = static_cast<const std::byte*>(t.raw_data());
  const std::size_t size = dtype_size(t.dtype());
  for (std::int64_t i = 1; i < t.numel(); ++i)
    if (std::memcmp(bytes, bytes + static_cast<std::size_t>(i) * size, size) != 0) return false;
  return true;
}

std::string constant_text(const Tensor& t) {
  if (t.rank() == 0) {
    std::string text = element_text(t, 0);
    if (t.dtype() != DType::boolean) text += nimble::to_string(t.dtype());
    return text;
  }
  std::vector<Dim> dims(t.shape().begin(), t.shape().end());
  std::string text = fmt::format("const {} [", to_string(tensor_type(std::move(dims), t.dtype())));
  if (is_splat(t)) return fmt::format("{}{}; {}]", text, element_text(t, 0), t.numel());
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (i) text += ", ";
    text += element_text(t, i);
  }
  return text + ']';
}

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/// Expressions that may be called or projected from without parentheses.
/// (A let prints its own parentheses when it is not in a body position.)
bool is_postfix_operand(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::var:
    case ExprKind::global_var:
    case ExprKind::op:
    case ExprKind::constructor:
    case ExprKind::call:
    case ExprKind::tuple:
    case ExprKind::tuple_get:
    case ExprKind::let:
      return true;
    default:
      return false;
  }
}

class Printer {
 public:
  explicit Printer(const PrintOptions& options) : options_(options) {}

  void print_module(const Module& module);
  /// `expr` as it would appear as a body at the outermost level.
  void print_top_expr(const Expr& expr);
  [[nodiscard]] std::string take() { return std::move(out_); }

 private:
  void print_adt(const AdtDefNode& adt);
  void print_def(const std::string& name, const FunctionNode& fn, bool entry);
  void print_params(const std::vector<Expr>& params);
  void print_block(const Expr& body);
  void print_body(const Expr& body);
  void print_expr(const Expr& e);
  void print_operand(const Expr& e);
  void print_call(const CallNode& call);
  void print_if(const IfNode& node);
  void print_match(const MatchNode& node);
  void print_closure(const FunctionNode& fn);
  void print_pattern(const Pattern& p);
  void print_binding(const Expr& var);
  void print_type_comment(const Type& type);
  void start_line() { out_.append(2 * static_cast<std::size_t>(indent_), ' '); }

  const std::string& name_of(const VarNode* var);
  void reset_names() {
    names_.clear();
    used_.clear();
    next_suffix_.clear();
  }

  PrintOptions options_;
  std::string out_;
  int indent_ = 0;
  // Printed names of the current function's variables, by identity.
  std::unordered_map<const VarNode*, std::string> names_;
  std::unordered_set<std::string> used_;
  // Per base name, the next suffix to try (keeps many same-named vars linear).
  std::unordered_map<std::string, int> next_suffix_;
};

const std::string& Printer::name_of(const VarNode* var) {
  if (auto it = names_.find(var); it != names_.end()) return it->second;
  // Only identifier characters read back after '%'.
  std::string base = var->name.empty() ? "v" : var->name;
  for (char& c : base)
    if (!is_identifier_char(c)) c = '_';
  std::string name = base;
  if (used_.count(name)) {
    int& suffix = next_suffix_[base];
    do {
      name = fmt::format("{}_{}", base, ++suffix);
    } while (used_.count(name));
  }
  used_.insert(name);
  return names_.emplace(var, std::move(name)).first->second;
}

void Printer::print_module(const Module& module) {
  bool first = true;
  auto separate = [&] {
    if (!first) out_ += '\n';
    first = false;
  };
  for (const AdtDef& adt : module.adts()) {
    separate();
    print_adt(*adt);
  }
  for (const auto& [name, fn] : module.functions()) {
    separate();
    print_def(name, *fn.as<FunctionNode>(), module.is_entry(name));
  }
}

void Printer::print_adt(const AdtDefNode& adt) {
  out_ += "type " + adt.name;
  if (!adt.type_params.empty()) out_ += fmt::format("<{}>", fmt::join(adt.type_params, ", "));
  out_ += " {";
  for (std::size_t i = 0; i < adt.constructors.size(); ++i) {
    const ConstructorDef& ctor = adt.constructors[i];
    out_ += i ? ", " : " ";
    out_ += ctor.name;
    if (ctor.fields.empty()) continue;
    out_ += '(';
    for (std::size_t f = 0; f < ctor.fields.size(); ++f) {
      if (f) out_ += ", ";
      out_ += to_string(ctor.fields[f]);
    }
    out_ += ')';
  }
  out_ += adt.constructors.empty() ? "}\n" : " }\n";
}

void Printer::print_def(const std::string& name, const FunctionNode& fn, bool entry) {
  reset_names();
  if (entry) out_ += "entry ";
  out_ += "def @" + name;
  print_params(fn.params);
  if (fn.ret_type.defined()) out_ += " -> " + to_string(fn.ret_type);
  out_ += " {";
  print_type_comment(fn.checked_type);
  out_ += '\n';
  ++indent_;
  print_body(fn.body);
  --indent_;
  out_ += "}\n";
}

void Printer::print_params(const std::vector<Expr>& params) {
  out_ += '(';
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (i) out_ += ", ";
    print_binding(params[i]);
  }
  out_ += ')';
}

void Printer::print_binding(const Expr& var) {
  const auto* v = var.as<VarNode>();
  out_ += '%' + name_of(v);
  if (v->type_annotation.defined()) out_ += ": " + to_string(v->type_annotation);
}

void Printer::print_type_comment(const Type& type) {
  if (options_.show_types && type.defined()) out_ += "  // " + to_string(type);
}

void Printer::print_top_expr(const Expr& expr) {
  print_body(expr);
  out_.pop_back();  // the body's final newline
}

/// `{`, the body one level deeper, `}` at the current level.
void Printer::print_block(const Expr& body) {
  out_ += "{\n";
  ++indent_;
  print_body(body);
  --indent_;
  start_line();
  out_ += '}';
}

/// A chain of lets, one per line, then the final expression; each line at
/// the current indentation and ending in a newline. Iterative, so that long
/// let chains (whole models) do not deepen the stack.
void Printer::print_body(const Expr& body) {
  Expr e = body;
  while (const auto* let = e.as<LetNode>()) {
    start_line();
    out_ += "let ";
    print_binding(let->var);
    out_ += " = ";
    print_expr(let->value);
    out_ += ';';
    print_type_comment(let->value.type());
    out_ += '\n';
    e = let->body;
  }
  start_line();
  print_expr(e);
  out_ += '\n';
}

void Printer::print_expr(const Expr& e) {
  check_stack("the printer");
  switch (e.kind()) {
    case ExprKind::var:
      out_ += '%' + name_of(e.as<VarNode>());
      return;
    case ExprKind::constant:
      out_ += constant_text(e.as<ConstantNode>()->value);
      return;
    case ExprKind::global_var:
      out_ += '@' + e.as<GlobalVarNode>()->name;
      return;
    case ExprKind::op:
      out_ += e.as<OpNode>()->def->name;
      return;
    case ExprKind::constructor:
      out_ += e.as<ConstructorNode>()->def().name;
      return;
    case ExprKind::call:
      print_call(*e.as<CallNode>());
      return;
    case ExprKind::let:
      // Not in a body position: parenthesized, so that what follows the
      // body (`,`, `;`, `)`) cannot be read as part of it.
      out_ += "(\n";
      ++indent_;
      print_body(e);
      --indent_;
      start_line();
      out_ += ')';
      return;
    case ExprKind::if_:
      print_if(*e.as<IfNode>());
      return;
    case ExprKind::tuple: {
      const auto& fields = e.as<TupleNode>()->fields;
      out_ += '(';
      for (std::size_t i = 0; i < fields.size(); ++i) {
        if (i) out_ += ", ";
        print_expr(fields[i]);
      }
      out_ += fields.size() == 1 ? ",)" : ")";
      return;
    }
    case ExprKind::tuple_get: {
      const auto* get = e.as<TupleGetNode>();
      print_operand(get->tuple);
      out_ += fmt::format(".{}", get->index);
      return;
    }
    case ExprKind::function:
      print_closure(*e.as<FunctionNode>());
      return;
    case ExprKind::match:
      print_match(*e.as<MatchNode>());
      return;
  }
}

void Printer::print_operand(const Expr& e) {
  if (is_postfix_operand(e)) return print_expr(e);
  out_ += '(';
  print_expr(e);
  out_ += ')';
}

void Printer::print_call(const CallNode& call) {
  print_operand(call.callee);
  out_ += '(';
  bool first = true;
  for (const Expr& arg : call.args) {
    if (!first) out_ += ", ";
    first = false;
    print_expr(arg);
  }
  for (const auto& [name, value] : call.attrs.items()) {
    if (!first) out_ += ", ";
    first = false;
    out_ += name + '=' + attr_text(value);
  }
  out_ += ')';
}

void Printer::print_if(const IfNode& node) {
  out_ += "if (";
  print_expr(node.cond);
  out_ += ") ";
  print_block(node.then_branch);
  out_ += " else ";
  print_block(node.else_branch);
}

void Printer::print_match(const MatchNode& node) {
  out_ += "match (";
  print_expr(node.value);
  out_ += ") {\n";
  ++indent_;
  for (std::size_t i = 0; i < node.clauses.size(); ++i) {
    start_line();
    print_pattern(node.clauses[i].pattern);
    out_ += " => ";
    print_block(node.clauses[i].body);
    out_ += i + 1 < node.clauses.size() ? ",\n" : "\n";
  }
  --indent_;
  start_line();
  out_ += '}';
}

void Printer::print_closure(const FunctionNode& fn) {
  out_ += fn.primitive ? "primitive fn " : "fn ";
  print_params(fn.params);
  if (fn.ret_type.defined()) out_ += " -> " + to_string(fn.ret_type);
  out_ += ' ';
  print_block(fn.body);
}

void Printer::print_pattern(const Pattern& p) {
  check_stack("the printer (patterns)");
  switch (p.kind()) {
    case PatternKind::wildcard:
      out_ += '_';
      return;
    case PatternKind::var:
      print_binding(p.as<PatternVarNode>()->var);
      return;
    case PatternKind::constructor: {
      const auto* c = p.as<PatternConstructorNode>();
      out_ += c->ctor.as<ConstructorNode>()->def().name;
      if (c->fields.empty()) return;
      out_ += '(';
      for (std::size_t i = 0; i < c->fields.size(); ++i) {
        if (i) out_ += ", ";
        print_pattern(c->fields[i]);
      }
      out_ += ')';
      return;
    }
    case PatternKind::tuple: {
      const auto& fields = p.as<PatternTupleNode>()->fields;
      out_ += '(';
      for (std::size_t i = 0; i < fields.size(); ++i) {
        if (i) out_ += ", ";
        print_pattern(fields[i]);
      }
      out_ += fields.size() == 1 ? ",)" : ")";
      return;
    }
  }
}

}  // namespace

std::string print(const Module& module, const PrintOptions& options) {
  Printer printer(options);
  printer.print_module(module);
  return printer.take();
}

std::string print(const Expr& expr, const PrintOptions& options) {
  if (!expr.defined()) return "<undefined>";
  Printer printer(options);
  printer.print_top_expr(expr);
  return printer.take();
}

}  // namespace nimble::ir
