// The table of primitive functions. A primitive is written down as IR text —
// one function whose parameters have the call's argument types — so that it
// is self-contained (a kernel provider rebuilds it with ir::parse) and its
// content hash identifies it across modules and processes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "compiler/bytecode/compiler.hpp"

namespace nimble::vm {

namespace {

bool mentions_adt(const ir::Type& t) {
  if (!t.defined()) return false;
  switch (t.kind()) {
    case ir::TypeKind::adt: return true;
    case ir::TypeKind::tuple:
      for (const ir::Type& f : t.as<ir::TupleTypeNode>()->fields)
        if (mentions_adt(f)) return true;
      return false;
    default: return false;
  }
}

std::uint32_t num_results(const ir::Type& t) {
  if (const auto* tuple = t.as<ir::TupleTypeNode>()) return static_cast<std::uint32_t>(tuple->fields.size());
  return 1;
}

// "fused_dense_reshape_transpose": the distinct ops of a fused group, in
// order (the first four).
std::string fused_name(const std::vector<std::string>& ops) {
  std::vector<std::string_view> names;
  for (const std::string& op : ops)
    if (std::find(names.begin(), names.end(), op) == names.end()) names.push_back(op);
  if (names.size() > 4) names.resize(4);
  return fmt::format("fused_{}", fmt::join(names, "_"));
}

}  // namespace

std::vector<std::string> fused_ops(const ir::FunctionNode& fn) {
  std::vector<std::string> ops;
  for (ir::Expr cur = fn.body; const auto* let = cur.as<ir::LetNode>(); cur = let->body)
    ops.emplace_back(let->value.as<ir::CallNode>()->callee.as<ir::OpNode>()->def->name);
  return ops;
}

std::uint32_t ModuleCompiler::primitive(const ir::CallNode& call, PrimitiveKind kind, Device device) {
  ir::Module m;
  std::string base;
  std::vector<std::string> ops;
  if (const auto* fused = call.callee.as<ir::FunctionNode>()) {
    // A fused group is already a closed function of its parameters.
    m.add_function("prim", call.callee);
    ops = fused_ops(*fused);
    base = fused_name(ops);
  } else {
    const ir::OpDef& op = *call.callee.as<ir::OpNode>()->def;
    bool uses_adt = false;
    std::vector<ir::Expr> params;
    for (std::size_t i = 0; i < call.args.size(); ++i) {
      const ir::Type& t = call.args[i].type();
      uses_adt = uses_adt || mentions_adt(t);
      params.push_back(ir::var(fmt::format("p{}", i), t));
    }
    if (uses_adt)
      for (const ir::AdtDef& adt : module_.adts()) m.add_adt(adt);
    ir::Expr body = ir::call(ir::op_ref(op), params, call.attrs);
    m.add_function("prim", ir::function(params, call.checked_type, body));
    base = op.name;
  }
  std::string source = ir::print(m);
  if (kind == PrimitiveKind::shape_function) base += "_shape";

  auto key = std::make_tuple(kind, source, device.kind, device.index);
  if (auto it = primitives_.find(key); it != primitives_.end()) return it->second;
  const std::uint32_t count = op_counts_[base]++;
  PrimitiveInfo info{
      .name = fmt::format("{}_{}", base, count),
      .kind = kind,
      .num_inputs = static_cast<std::uint32_t>(call.args.size()),
      .num_outputs = num_results(call.checked_type),
      .source = std::move(source),
      .hash = 0,
      .device = device};
  info.hash = content_hash(kind, info.source, device);
  const auto index = static_cast<std::uint32_t>(data_.primitives.size());
  data_.primitives.push_back(std::move(info));
  primitive_ops_.push_back(std::move(ops));
  primitives_.emplace(std::move(key), index);
  return index;
}

}  // namespace nimble::vm
