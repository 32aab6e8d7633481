#include "codegen/dot_product.hpp"

#include <algorithm>
#include <functional>

namespace nimble::codegen {

namespace {

using te::Expr;
using te::ExprKind;

bool is_unit(const Stmt& loop) { return te::as_int(loop.extent) == 1; }

bool is_f32_buffer_load(const KernelIR& kernel, const Expr& e) {
  const auto* load = e.as<te::LoadNode>();
  if (load == nullptr || load->checked || load->dtype != DType::f32 || load->indices.empty()) return false;
  const auto it = kernel.buffer_of.find(load->tensor.get());
  return it != kernel.buffer_of.end() &&
         kernel.buffers[static_cast<std::size_t>(it->second)].tensor.dtype() == DType::f32;
}

// `load` reads along `k` contiguously: its last index is k, no other is.
bool contiguous_in(const te::LoadNode& load, const te::VarNode* k) {
  if (load.indices.back().get() != k) return false;
  return std::none_of(load.indices.begin(), load.indices.end() - 1,
                      [&](const Expr& i) { return depends_on(i, k); });
}

bool load_depends_on(const te::LoadNode& load, const te::VarNode* var) {
  return std::any_of(load.indices.begin(), load.indices.end(), [&](const Expr& i) { return depends_on(i, var); });
}


// The one reduction in `value`: the value itself, or inside an epilogue of
// it (lower_compute folds dense's bias add and fused epilogues into the
// sum's stage); null if none or several.
const te::ReduceNode* epilogue_sum(const Expr& value) {
  const te::ReduceNode* found = nullptr;
  int count = 0;
  const std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (const auto* r = e.as<te::ReduceNode>()) {
      found = r;
      ++count;
      return;
    }
    te::for_each_child(e, walk);
  };
  walk(value);
  return count == 1 ? found : nullptr;
}

std::vector<const Stmt*> loop_nest(const Stage& stage, const Stmt*& innermost) {
  std::vector<const Stmt*> loops;
  const Stmt* s = stage.body.get();
  while (s != nullptr && s->kind == Stmt::Kind::loop) {
    loops.push_back(s);
    s = s->body.get();
  }
  innermost = s;
  return loops;
}

}  // namespace

bool contiguous_index(const Expr& index, const te::VarNode* j) {
  const auto* add = index.as<te::BinaryNode>();
  return index.get() == j || (add != nullptr && add->op == te::BinaryOp::add && add->b.get() == j && !depends_on(add->a, j));
}

bool depends_on(const Expr& e, const te::VarNode* var) {
  if (e.get() == var) return true;
  bool found = false;
  te::for_each_child(e, [&](const Expr& child) { found = found || depends_on(child, var); });
  return found;
}

bool has_vector_instructions(const te::BinaryNode& b) {
  if (b.checked) return false;
  return is_floating(b.a.dtype()) ||
         !(b.op == te::BinaryOp::div || b.op == te::BinaryOp::floordiv || b.op == te::BinaryOp::rem ||
           b.op == te::BinaryOp::floormod || b.op == te::BinaryOp::pow);
}

namespace {

// Whether `load` reads consecutive elements as j steps: its last index is j
// or j plus a term without j (a slice's offset: a cell's gates[i, j + 300]),
// its others free of j. A vector loop's load reads at the index's value at
// j = 0 plus its iv (FunctionEmitter::load).
bool steps_along(const te::LoadNode& load, const te::VarNode* j) {
  const Expr& last = load.indices.back();
  const auto* add = last.as<te::BinaryNode>();
  const bool unit = last.get() == j ||
                    (add != nullptr && add->op == te::BinaryOp::add && !add->checked &&
                     ((add->a.get() == j && !depends_on(add->b, j)) || (add->b.get() == j && !depends_on(add->a, j))));
  return unit && std::none_of(load.indices.begin(), load.indices.end() - 1,
                              [&](const Expr& i) { return depends_on(i, j); });
}

}  // namespace

bool lane_wise_along(const Expr& e, const te::VarNode* j, const te::ReduceNode* sum) {
  switch (e.kind()) {
    case ExprKind::load: {
      const auto* l = e.as<te::LoadNode>();
      return !l->checked && (!load_depends_on(*l, j) || steps_along(*l, j));
    }
    case ExprKind::reduce: return e.get() == sum;
    case ExprKind::var: return e.get() != j;
    case ExprKind::binary: {
      if (!has_vector_instructions(*e.as<te::BinaryNode>())) return false;
      break;
    }
    default: break;
  }
  bool ok = true;
  te::for_each_child(e, [&](const Expr& child) { ok = ok && lane_wise_along(child, j, sum); });
  return ok;
}

std::optional<OuterProductStage> match_outer_product(const KernelIR& kernel, const Stage& stage) {
  const Stmt* s = nullptr;
  const std::vector<const Stmt*> loops = loop_nest(stage, s);
  // At least one loop outside k (lowering makes one for a rank-1 output).
  if (s == nullptr || loops.size() < 3 || kernel.buffers[static_cast<std::size_t>(s->buffer)].tensor.dtype() != DType::f32)
    return std::nullopt;
  const auto* update = s->value.as<te::BinaryNode>();
  if (update == nullptr || update->op != te::BinaryOp::add) return std::nullopt;
  const auto* before = update->a.as<te::LoadNode>();
  const auto* product = update->b.as<te::BinaryNode>();
  if (before == nullptr || before->checked || kernel.buffer_of.at(before->tensor.get()) != s->buffer ||
      product == nullptr || product->op != te::BinaryOp::mul || !is_f32_buffer_load(kernel, product->a) ||
      !is_f32_buffer_load(kernel, product->b))
    return std::nullopt;
  OuterProductStage op;
  op.store = s;
  op.cols = loops.back();
  op.k = loops[loops.size() - 2];
  const te::VarNode* j = op.cols->var.node();
  const te::VarNode* k = op.k->var.node();
  if (!contiguous_index(s->index, j) || depends_on(s->index, k) || depends_on(op.cols->extent, k)) return std::nullopt;
  const auto* x = product->a.as<te::LoadNode>();
  const auto* y = product->b.as<te::LoadNode>();
  if (load_depends_on(*x, j) == load_depends_on(*y, j)) return std::nullopt;
  op.a = load_depends_on(*x, j) ? y : x;
  op.b = load_depends_on(*x, j) ? x : y;
  if (op.b->indices.back().get() != j ||
      std::any_of(op.b->indices.begin(), op.b->indices.end() - 1, [&](const Expr& i) { return depends_on(i, j); }))
    return std::nullopt;
  // rows: the loop outside k (past unit loops, but not the outermost) that a reads along.
  std::size_t r = loops.size() - 2;
  while (r > 1 && is_unit(*loops[r - 1])) --r;
  if (load_depends_on(*op.a, loops[r - 1]->var.node()) && !load_depends_on(*op.b, loops[r - 1]->var.node())) {
    op.rows = loops[r - 1];
    op.outer.assign(loops.begin(), loops.begin() + static_cast<std::ptrdiff_t>(r - 1));
  } else {
    op.outer.assign(loops.begin(), loops.begin() + static_cast<std::ptrdiff_t>(r));
  }
  op.unit.assign(loops.begin() + static_cast<std::ptrdiff_t>(r), loops.end() - 2);
  // The extents of k and the columns are evaluated once per tile.
  for (const Stmt* inner : {op.rows, op.k, op.cols}) {
    if (inner == nullptr) continue;
    if (depends_on(op.k->extent, inner->var.node()) || depends_on(op.cols->extent, inner->var.node()))
      return std::nullopt;
  }
  return op;
}

std::optional<DotProductStage> match_dot_product(const KernelIR& kernel, const Stage& stage) {
  const Stmt* s = nullptr;
  const std::vector<const Stmt*> loops = loop_nest(stage, s);
  // A leading loop of extent 1 (lowering gives none: see lower_stage)
  // would be the range split across threads: not a tile's row or column.
  if (s == nullptr || loops.empty() || (loops.size() > 1 && is_unit(*loops.front()))) return std::nullopt;
  const te::ReduceNode* sum = epilogue_sum(s->value);
  if (sum == nullptr || sum->reduce_kind != te::ReduceKind::sum || sum->dtype != DType::f32 ||
      sum->axes.size() != 1 || kernel.buffers[static_cast<std::size_t>(s->buffer)].tensor.dtype() != DType::f32)
    return std::nullopt;
  const auto* product = sum->source.as<te::BinaryNode>();
  if (product == nullptr || product->op != te::BinaryOp::mul || !is_f32_buffer_load(kernel, product->a) ||
      !is_f32_buffer_load(kernel, product->b))
    return std::nullopt;
  const te::VarNode* k = sum->axes[0].var.node();
  if (depends_on(sum->axes[0].extent, k) || depends_on(sum->init, k)) return std::nullopt;

  DotProductStage dot;
  dot.store = s;
  dot.sum = sum;
  dot.cols = loops.back();
  const te::VarNode* j = dot.cols->var.node();
  const auto* x = product->a.as<te::LoadNode>();
  const auto* y = product->b.as<te::LoadNode>();
  if (!contiguous_in(*x, k) || !contiguous_in(*y, k)) return std::nullopt;
  // a: the operand that does not move with j; b: the one that does.
  if (load_depends_on(*x, j) == load_depends_on(*y, j)) return std::nullopt;
  dot.a = load_depends_on(*x, j) ? y : x;
  dot.b = load_depends_on(*x, j) ? x : y;

  // rows: the innermost loop (but cols) of extent other than 1 that a reads along.
  std::size_t r = loops.size() - 1;
  while (r > 0 && is_unit(*loops[r - 1])) --r;
  if (r > 0 && load_depends_on(*dot.a, loops[r - 1]->var.node())) {
    dot.rows = loops[r - 1];
    if (load_depends_on(*dot.b, dot.rows->var.node())) return std::nullopt;
    dot.outer.assign(loops.begin(), loops.begin() + static_cast<std::ptrdiff_t>(r - 1));
  } else {
    dot.outer.assign(loops.begin(), loops.begin() + static_cast<std::ptrdiff_t>(r));
  }
  dot.unit.assign(loops.begin() + static_cast<std::ptrdiff_t>(r), loops.end() - 1);
  dot.row_vectors = contiguous_index(s->index, j) && lane_wise_along(s->value, j, sum);
  // The k extent and init are evaluated once per tile: only outer vars may appear.
  for (const Stmt* inner : {dot.rows, dot.cols}) {
    if (inner == nullptr) continue;
    if (depends_on(sum->axes[0].extent, inner->var.node()) || depends_on(sum->init, inner->var.node()))
      return std::nullopt;
  }
  return dot;
}

std::optional<TiledProduct> match_tiled_product(const KernelIR& kernel, const Stage& stage) {
  if (const std::optional<DotProductStage> d = match_dot_product(kernel, stage))
    return TiledProduct{.outer = d->outer, .rows = d->rows, .unit = d->unit, .cols = d->cols,
                        .k_var = d->sum->axes[0].var.node(), .k_extent = &d->sum->axes[0].extent, .a = d->a,
                        .b = d->b, .b_along_cols = false, .store = d->store, .sum = d->sum};
  if (const std::optional<OuterProductStage> o = match_outer_product(kernel, stage))
    return TiledProduct{.outer = o->outer, .rows = o->rows, .unit = o->unit, .cols = o->cols,
                        .k_var = o->k->var.node(), .k_extent = &o->k->extent, .a = o->a, .b = o->b,
                        .b_along_cols = true, .store = o->store, .sum = nullptr};
  return std::nullopt;
}

}  // namespace nimble::codegen
