#include "codegen/cuda/gpu_schedule.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "codegen/llvm/kernel_emitter.hpp"
#include "codegen/dot_product.hpp"

namespace nimble::codegen {

namespace {

// A stage's loops, outermost first, and the store inside them (kernel IR
// nests are perfect: a loop's body is one statement).
struct Nest {
  std::vector<const Stmt*> loops;
  const Stmt* store = nullptr;
};

Nest nest_of(const Stmt& body) {
  Nest nest;
  const Stmt* s = &body;
  for (; s->kind == Stmt::Kind::loop; s = s->body.get()) nest.loops.push_back(s);
  nest.store = s;
  return nest;
}

template <class Fn>
void for_each_node(const te::Expr& e, Fn&& fn) {
  if (!e.defined()) return;
  fn(e);
  te::for_each_child(e, [&](const te::Expr& child) { for_each_node(child, fn); });
}

// Whether evaluating `e` may fail (a checked op or load): a failing lane
// would leave its warp before the others reach their shuffles.
bool can_fail(const te::Expr& e) {
  bool found = false;
  for_each_node(e, [&](const te::Expr& n) {
    if (const auto* b = n.as<te::BinaryNode>(); b && b->checked) found = true;
    if (const auto* l = n.as<te::LoadNode>(); l && l->checked) found = true;
  });
  return found;
}

// Fewer rows than this make a dot product a warp an element, not tiles.
constexpr std::int64_t kMinTileRows = 16;

// A reduction of this many elements or more (known when compiling) is a
// block's, not a warp's: 16 or more elements a thread.
constexpr std::int64_t kBlockReduction = 4096;

// A flat element-wise stage's elements a thread: one 128-bit vector of 32-bit ones.
constexpr unsigned kVectorElements = 4;

bool is_var(const te::Expr& e, const te::VarNode* var) { return e.as<te::VarNode>() == var; }

// Whether `index` is the row-major flat index of `loops`' variables over
// their extents, as lowering writes a store's: ((v0 * e1 + v1) * e2 + v2) ….
bool is_row_major(const te::Expr& index, std::span<const Stmt* const> loops) {
  if (loops.size() == 1) return is_var(index, loops[0]->var.node());
  const auto* add = index.as<te::BinaryNode>();
  if (add == nullptr || add->op != te::BinaryOp::add || !is_var(add->b, loops.back()->var.node())) return false;
  const auto* mul = add->a.as<te::BinaryNode>();
  return mul != nullptr && mul->op == te::BinaryOp::mul && te::provably_equal(mul->b, loops.back()->extent) &&
         is_row_major(mul->a, loops.first(loops.size() - 1));
}

// Whether every load of the stage's own buffer in `value` reads the element
// being stored: at the element's coordinates, `spatial`'s variables in order
// (an accumulation, as batch_matmul's). Another element, which another
// thread may be writing, would make collapsing the loops change the result.
bool reads_only_own_element(const KernelIR& kernel, const Stage& stage, const te::Expr& value,
                            std::span<const Stmt* const> spatial) {
  bool own = true;
  for_each_node(value, [&](const te::Expr& n) {
    const auto* l = n.as<te::LoadNode>();
    if (l == nullptr) return;
    const auto it = kernel.buffer_of.find(l->tensor.get());
    if (it == kernel.buffer_of.end() || it->second != stage.output) return;
    own = own && l->indices.size() == spatial.size();
    for (std::size_t d = 0; own && d < spatial.size(); ++d) own = is_var(l->indices[d], spatial[d]->var.node());
  });
  return own;
}

// The stage with the loops that index its store collapsed into one parallel
// loop over its elements and the others inside it (the header's Elements),
// or nothing where there is nothing to collapse or it would not be exact.
std::optional<StmtRef> collapsed(const KernelIR& kernel, const Stage& stage) {
  const Nest nest = nest_of(*stage.body);
  if (nest.loops.size() < 2) return std::nullopt;
  std::vector<const Stmt*> spatial;
  std::vector<const Stmt*> carried;
  for (const Stmt* loop : nest.loops) {
    // Extents fixed by the shape alone: the iteration space is a box.
    for (const Stmt* other : nest.loops)
      if (depends_on(loop->extent, other->var.node())) return std::nullopt;
    (depends_on(nest.store->index, loop->var.node()) ? spatial : carried).push_back(loop);
  }
  if (spatial.size() < 2 || !is_row_major(nest.store->index, spatial) ||
      !reads_only_own_element(kernel, stage, nest.store->value, spatial))
    return std::nullopt;
  // Element e of the stage's buffer: its coordinate along spatial loop d is
  // (e / stride_d) % extent_d, stride_d the product of the extents after d.
  const te::Var element("e");
  std::unordered_map<const te::VarNode*, te::Expr> coordinate;
  te::Expr stride = te::int_imm(1);
  for (std::size_t d = spatial.size(); d-- > 0;) {
    te::Expr quotient = d + 1 == spatial.size() ? te::Expr(element) : te::Expr(element) / stride;
    coordinate[spatial[d]->var.node()] = d == 0 ? quotient : quotient % spatial[d]->extent;
    stride = d + 1 == spatial.size() ? spatial[d]->extent : stride * spatial[d]->extent;
  }
  StmtRef body = make_store(nest.store->buffer, element, substitute(nest.store->value, coordinate));
  for (std::size_t k = carried.size(); k-- > 0;)
    body = make_loop(carried[k]->var, carried[k]->extent, ForKind::serial, std::move(body));
  return make_loop(element, stride, ForKind::parallel, std::move(body));
}

// The lanes that compute the stage's element where it is a reduction along
// a row (the header's Warps and Blocks), or 1: one parallel loop around the
// store, an element that cannot fail, and reductions only of the kinds the
// emitter splits (splits_across_lanes), at least one of them of 32 elements
// or more (or of a number known only at run time). A block's threads where a
// reduction has kBlockReduction elements or more, or the stage has a single
// element (a whole tensor's sum): a warp's lanes otherwise.
unsigned reduction_lanes(const Stage& stage) {
  const Nest nest = nest_of(*stage.body);
  if (nest.loops.size() != 1 || can_fail(nest.store->value)) return 1;
  bool splits = true;
  bool long_row = false;
  bool long_reduction = false;
  // The reductions outermost in the value (a reduction's source is checked
  // by splits_across_lanes).
  const std::function<void(const te::Expr&)> visit = [&](const te::Expr& e) {
    if (const auto* r = e.as<te::ReduceNode>()) {
      splits = splits && splits_across_lanes(*r);
      // Its elements (saturating at kBlockReduction) where every axis is known.
      bool known = true;
      std::int64_t elements = 1;
      for (const te::IterVar& axis : r->axes) {
        const std::optional<std::int64_t> n = te::as_int(axis.extent);
        known = known && n.has_value();
        if (known) elements = std::min(elements * std::max<std::int64_t>(n.value_or(0), 0), kBlockReduction);
      }
      long_row = long_row || !known || elements >= static_cast<std::int64_t>(kWarpLanes);
      long_reduction = long_reduction || (known && elements >= kBlockReduction);
      return;
    }
    te::for_each_child(e, visit);
  };
  visit(nest.store->value);
  if (!splits || !long_row) return 1;
  const std::optional<std::int64_t> elements = te::as_int(nest.loops[0]->extent);
  return long_reduction || (elements && *elements == 1) ? kBlockLanes : kWarpLanes;
}

// The tiles of `stage` as a product in shared-memory tiles (the header's
// Tiles), or nothing where it is no product, has no rows or fewer than
// kMinTileRows of them (a row of products is a warp an element: each reads
// a row of b once, coalesced), or an element that can fail (a failing
// thread would leave its block's barriers).
std::optional<te::Expr> product_tiles(const KernelIR& kernel, const Stage& stage) {
  const std::optional<TiledProduct> dot = match_tiled_product(kernel, stage);
  if (!dot || dot->rows == nullptr || can_fail(dot->store->value)) return std::nullopt;
  if (const std::optional<std::int64_t> rows = te::as_int(dot->rows->extent); rows && *rows < kMinTileRows)
    return std::nullopt;
  const auto tiles_along = [](const te::Expr& extent, int tile) {
    return te::floordiv(extent + te::int_imm(tile - 1), te::int_imm(tile));
  };
  std::vector<te::Expr> tiles;
  for (const Stmt* loop : dot->outer) tiles.push_back(loop->extent);
  tiles.push_back(tiles_along(dot->rows->extent, GpuProductTile::kRows));
  tiles.push_back(tiles_along(dot->cols->extent, GpuProductTile::kCols));
  return te::product(tiles);
}

// Elements an iteration of `stage` (the header's Vectors): kVectorElements
// for a flat element-wise stage of 32-bit elements — one loop whose
// variable is its store's index, every load along it a 32-bit element at
// it (a 1-d view) and every other load independent of it, nothing that can
// fail, no reduction, no op without vector instructions — else 1.
unsigned vector_elements(const KernelIR& kernel, const Stage& stage) {
  const Nest nest = nest_of(*stage.body);
  if (nest.loops.size() != 1) return 1;
  const te::VarNode* var = nest.loops[0]->var.node();
  const auto is_32_bits = [&](int buffer) {
    return dtype_size(kernel.buffers[static_cast<std::size_t>(buffer)].tensor.dtype()) == 4;
  };
  if (!is_var(nest.store->index, var) || !is_32_bits(nest.store->buffer) || can_fail(nest.store->value)) return 1;
  bool lane_by_lane = true;
  for_each_node(nest.store->value, [&](const te::Expr& e) {
    if (e.kind() == te::ExprKind::reduce) lane_by_lane = false;
    if (const auto* b = e.as<te::BinaryNode>(); b && !has_vector_instructions(*b)) lane_by_lane = false;
    if (const auto* l = e.as<te::LoadNode>(); l && depends_on(e, var)) {
      const auto it = kernel.buffer_of.find(l->tensor.get());
      lane_by_lane = lane_by_lane && l->indices.size() == 1 && is_var(l->indices[0], var) &&
                     it != kernel.buffer_of.end() && is_32_bits(it->second);
    }
  });
  return lane_by_lane ? kVectorElements : 1;
}

}  // namespace

KernelIR schedule_for_gpu(KernelIR kernel) {
  for (Stage& stage : kernel.stages) {
    if (std::optional<te::Expr> tiles = product_tiles(kernel, stage)) {
      stage.product_tiles = true;
      stage.tiles = std::move(*tiles);
      stage.lanes = GpuProductTile::kThreads;
      continue;
    }
    if (std::optional<StmtRef> body = collapsed(kernel, stage)) stage.body = std::move(*body);
    stage.lanes = reduction_lanes(stage);
    if (stage.lanes == 1) stage.vector_elements = vector_elements(kernel, stage);
  }
  return kernel;
}

}  // namespace nimble::codegen
