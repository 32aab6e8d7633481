#include "codegen/kernel_ir.hpp"

#include <fmt/format.h>

#include "support/check.hpp"

namespace nimble::codegen {

StmtRef make_loop(te::Var var, te::Expr extent, ForKind kind, StmtRef body) {
  NIMBLE_ASSERT(extent.defined() && extent.dtype() == DType::i64, "loop: an i64 extent");
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::loop;
  s->var = std::move(var);
  s->extent = std::move(extent);
  s->for_kind = kind;
  s->body = std::move(body);
  return s;
}

StmtRef make_store(int buffer, te::Expr index, te::Expr value) {
  NIMBLE_ASSERT(index.defined() && index.dtype() == DType::i64, "store: an i64 index");
  auto s = std::make_shared<Stmt>();
  s->kind = Stmt::Kind::store;
  s->buffer = buffer;
  s->index = std::move(index);
  s->value = std::move(value);
  return s;
}

te::Expr substitute(const te::Expr& expr,
                    const std::unordered_map<const te::VarNode*, te::Expr>& map) {
  if (const auto* v = expr.as<te::VarNode>()) {
    const auto it = map.find(v);
    return it == map.end() ? expr : it->second;
  }
  return te::map_children(expr, [&](const te::Expr& child) { return substitute(child, map); });
}

namespace {

std::string_view role_name(Buffer::Role role) {
  switch (role) {
    case Buffer::Role::input: return "in";
    case Buffer::Role::output: return "out";
    case Buffer::Role::temp: return "temp";
  }
  return "?";
}

std::string shape_string(const te::Tensor& t) {
  std::string s = "[";
  for (std::size_t d = 0; d < t.ndim(); ++d)
    s += fmt::format("{}{}", d ? ", " : "", te::to_string(t.shape()[d]));
  return s + "]";
}

std::string_view for_name(ForKind kind) {
  switch (kind) {
    case ForKind::serial: return "for";
    case ForKind::parallel: return "parallel for";
    case ForKind::vectorized: return "vectorized for";
  }
  return "for";
}

void print_stmt(const KernelIR& k, const Stmt& s, int depth, std::string& out) {
  const std::string indent(static_cast<std::size_t>(2 * depth), ' ');
  if (s.kind == Stmt::Kind::loop) {
    out += fmt::format("{}{} {} in [0, {}):\n", indent, for_name(s.for_kind), s.var.name(),
                       te::to_string(s.extent));
    print_stmt(k, *s.body, depth + 1, out);
    return;
  }
  out += fmt::format("{}{}[{}] = {}\n", indent, k.buffers[static_cast<std::size_t>(s.buffer)].tensor.name(),
                     te::to_string(s.index), te::to_string(s.value));
}

}  // namespace

void specialize(KernelIR& kernel, const Bucket& bucket) {
  if (bucket.dims.size() != kernel.bindings.size())
    throw_error(ErrorKind::invalid_argument, "{}: a bucket of {} dims for a kernel of {} dynamic dims",
                kernel.name, bucket.dims.size(), kernel.bindings.size());
  for (std::size_t i = 0; i < bucket.dims.size(); ++i) kernel.bindings[i].bucket = bucket.dims[i];
}

std::string to_string(const KernelIR& kernel) {
  std::string out = fmt::format("kernel {}(", kernel.name);
  for (std::size_t b = 0; b < kernel.buffers.size(); ++b) {
    const Buffer& buf = kernel.buffers[b];
    out += fmt::format("{}{} {}: {}{}", b ? ", " : "", role_name(buf.role), buf.tensor.name(),
                       to_string(buf.tensor.dtype()), shape_string(buf.tensor));
  }
  out += ")\n";
  const auto name_of = [&](int b) -> const std::string& {
    return kernel.buffers[static_cast<std::size_t>(b)].tensor.name();
  };
  for (const auto& b : kernel.bindings) {
    out += fmt::format("  bind {} = {}.dim{}", te::to_string(b.var), name_of(b.buffer), b.dim);
    if (b.bucket != DimBucket{}) out += " in bucket " + Bucket{{b.bucket}}.to_string();
    out += "\n";
  }
  for (const auto& c : kernel.input_dims)
    out += fmt::format("  check {}.dim{} == {}\n", name_of(c.buffer), c.dim, te::to_string(c.expected));
  for (const auto& c : kernel.output_dims)
    out += fmt::format("  check {}.dim{} == {}\n", name_of(c.buffer), c.dim, te::to_string(c.expected));
  for (const KernelCheck& c : kernel.checks)
    out += fmt::format("  check {} else {} \"{}\"\n", te::to_string(c.condition), to_string(c.kind),
                       c.message);
  for (const Stage& s : kernel.stages) {
    out += fmt::format("  stage {} (work {}{}):\n", s.name, te::to_string(s.work),
                       s.product_tiles          ? fmt::format(", {} tiles of {} threads", te::to_string(s.tiles), s.lanes)
                       : s.lanes > 1            ? fmt::format(", {} lanes an iteration", s.lanes)
                       : s.vector_elements > 1 ? fmt::format(", {} elements an iteration", s.vector_elements)
                                                : std::string());
    print_stmt(kernel, *s.body, 2, out);
  }
  return out;
}

namespace {

bool has_reduction(const te::Expr& e) {
  bool found = e.kind() == te::ExprKind::reduce;
  te::for_each_child(e, [&](const te::Expr& child) { found = found || has_reduction(child); });
  return found;
}

}  // namespace

bool splits_across_lanes(const te::ReduceNode& r) {
  return !r.axes.empty() && r.reduce_kind != te::ReduceKind::argmax && !has_reduction(r.source);
}

}  // namespace nimble::codegen
