// Compute rules → kernel IR: decide which stages are inlined and which are
// materialized, inline the injective ones, and build one loop nest per
// materialized stage (see kernel_ir.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>

#include <unordered_set>

#include "codegen/expr_cost.hpp"
#include "codegen/kernel_ir.hpp"
#include "codegen/simplify_index.hpp"
#include "support/check.hpp"

namespace nimble::codegen {

namespace {

using te::Expr;
using te::ExprKind;

// Calls `fn` on every load in `e` (also inside reduce sources and indices).
template <class Fn>
void for_each_load(const Expr& e, Fn&& fn) {
  if (!e.defined()) return;
  if (const auto* l = e.as<te::LoadNode>()) fn(*l);
  te::for_each_child(e, [&](const Expr& child) { for_each_load(child, fn); });
}

class Lowering {
 public:
  Lowering(std::string name, std::span<const te::Tensor> inputs, std::span<const te::Tensor> outputs) {
    kernel_.name = std::move(name);
    for (const te::Tensor& in : inputs) {
      NIMBLE_ASSERT(in.is_placeholder(), "lower_to_kernel_ir: inputs are placeholders");
      add_buffer(in, Buffer::Role::input);
    }
    kernel_.num_inputs = static_cast<int>(inputs.size());
    // An output that is an input, or one listed twice, is a copy stage.
    std::vector<te::Tensor> outs;
    for (std::size_t k = 0; k < outputs.size(); ++k) {
      te::Tensor t = outputs[k];
      bool repeated = false;
      for (std::size_t j = 0; j < k; ++j) repeated = repeated || outputs[j].same_as(t);
      if (t.is_placeholder() || repeated)
        t = te::compute(t.shape(), fmt::format("{}_copy", t.name()),
                        [&](std::span<const te::Var> i) { return t(te::as_indices(i)); });
      outs.push_back(t);
    }
    outputs_ = outs;
    for (const te::Tensor& t : te::stages(outs))
      if (!t.is_placeholder()) stages_.push_back(t);
    for (const te::Tensor& t : outs) materialized_.insert(t.get());
    for (const te::Tensor& t : stages_) {
      if (t->body.kind() == ExprKind::reduce) materialized_.insert(t.get());
      for_each_load(t->body, [&](const te::LoadNode& l) {
        if (l.checked && !l.tensor.is_placeholder()) materialized_.insert(l.tensor.get());
      });
    }
    fold_reductions();
  }

  KernelIR run() {
    bind_inputs();
    // Output buffers first (they follow the inputs), then temporaries.
    for (const te::Tensor& t : outputs_) buffer_for_stage(t, Buffer::Role::output);
    kernel_.num_outputs = static_cast<int>(outputs_.size());
    for (const te::Tensor& t : stages_)
      if (materialized_.count(t.get()) != 0 && !is_output(t)) buffer_for_stage(t, Buffer::Role::temp);
    for (const te::Tensor& t : outputs_) {
      const int b = kernel_.buffer_of.at(t.get());
      for (std::size_t d = 0; d < t.ndim(); ++d)
        kernel_.output_dims.push_back({b, static_cast<int>(d), inline_expr(t.shape()[d])});
    }
    for (const te::Tensor& t : stages_) {
      for (const te::Check& c : t->checks) {
        Expr condition = inline_expr(c.condition);
        for_each_load(condition, [&](const te::LoadNode& l) {
          const int b = kernel_.buffer_of.at(l.tensor.get());
          if (kernel_.buffers[static_cast<std::size_t>(b)].role != Buffer::Role::input)
            throw_error(ErrorKind::not_supported,
                        "not supported: a check of {} reads {}, which the kernel computes", t.name(),
                        l.tensor.name());
        });
        kernel_.checks.push_back({std::move(condition), c.kind, fmt::format("{}: {}", t.name(), c.message)});
      }
    }
    for (const te::Tensor& t : stages_)
      if (materialized_.count(t.get()) != 0) lower_stage(t);
    return std::move(kernel_);
  }

 private:
  // A reduction read once, at the reader's own indices, by an element-wise
  // stage (through element-wise stages inlined into it) is computed in that
  // stage's store instead of into a temporary: dense's sum and then its bias
  // and whatever epilogue fusion joined, one stage and one buffer less, and
  // a product tile applies the epilogue to its sums before storing them
  // (dot_product.hpp). Not when the reduction is an output, read through a
  // checked load, read anywhere else or at other indices (it would be summed
  // again per read), or summed with k outside the columns
  // (lower_reduction_outside: its init and update stages need the buffer).
  void fold_reductions() {
    std::unordered_map<const te::TensorNode*, int> reads;
    for (const te::Tensor& t : stages_) {
      for_each_load(t->body, [&](const te::LoadNode& l) { ++reads[l.tensor.get()]; });
      for (const te::Check& c : t->checks)
        for_each_load(c.condition, [&](const te::LoadNode& l) { ++reads[l.tensor.get()]; });
    }
    // The stage that reads `t` (its one read) as `t(axes)` at its own axes,
    // outside any reduction, with t's shape; null if none does.
    const auto reader_at_own_axes = [&](const te::Tensor& t) -> const te::Tensor* {
      if (reads[t.get()] != 1) return nullptr;
      for (const te::Tensor& c : stages_) {
        if (contains_reduce(c->body)) continue;
        bool found = false;
        for_each_load(c->body, [&](const te::LoadNode& l) {
          if (l.tensor.get() != t.get() || l.checked || l.indices.size() != c->axes.size() ||
              c.ndim() != t.ndim())
            return;
          bool same = true;
          for (std::size_t d = 0; d < l.indices.size(); ++d)
            same = same && l.indices[d].same_as(c->axes[d]) && te::provably_equal(c.shape()[d], t.shape()[d]);
          found = found || same;
        });
        if (found) return &c;
      }
      return nullptr;
    };
    for (const te::Tensor& r : stages_) {
      // Its source reads inputs only: as lowered (inlined) it is what it is here.
      if (r->body.kind() != ExprKind::reduce || is_output(r) || sums_across_columns(r, r->body)) continue;
      bool reads_inputs = true;
      for_each_load(r->body,
                    [&](const te::LoadNode& l) { reads_inputs = reads_inputs && l.tensor.is_placeholder(); });
      if (!reads_inputs) continue;
      const te::Tensor* c = reader_at_own_axes(r);
      int epilogue = c != nullptr ? operations(c->get()->body) : 0;
      while (c != nullptr && materialized_.count(c->get()) == 0) {
        c = reader_at_own_axes(*c);
        if (c != nullptr) epilogue += operations(c->get()->body);
      }
      if (c != nullptr && c->get() != r.get() && epilogue <= kMaxFoldedEpilogue) materialized_.erase(r.get());
    }
  }

  // A folded epilogue is computed per element where the sums are complete
  // (a product tile's are scalars, one per output element): a bias, a
  // residual add or a scale cost nothing there, while a GELU or a tanh is
  // dozens of instructions per element, better left to the stage after,
  // which vectorizes.
  static constexpr int kMaxFoldedEpilogue = 12;

  // About how many operations `e` is (a transcendental counts as 30:
  // expr_cost.hpp), loads and reductions one each.
  static int operations(const Expr& e) {
    int n = op_cost(e, OpCostOf::epilogue);
    if (e.kind() == ExprKind::load || e.kind() == ExprKind::reduce) return n;
    te::for_each_child(e, [&](const Expr& child) { n += operations(child); });
    return n;
  }

  static bool contains_reduce(const Expr& e) {
    if (e.kind() == ExprKind::reduce) return true;
    bool found = false;
    te::for_each_child(e, [&](const Expr& child) { found = found || contains_reduce(child); });
    return found;
  }

  // The first reduction in `e` (a stage's value: the reduction itself, or an
  // epilogue of a folded one), or null.
  static const te::ReduceNode* find_reduce(const Expr& e) {
    if (const auto* r = e.as<te::ReduceNode>()) return r;
    const te::ReduceNode* found = nullptr;
    te::for_each_child(e, [&](const Expr& child) {
      if (found == nullptr) found = find_reduce(child);
    });
    return found;
  }

  int add_buffer(const te::Tensor& placeholder, Buffer::Role role) {
    const int index = static_cast<int>(kernel_.buffers.size());
    kernel_.buffers.push_back({placeholder, role});
    kernel_.buffer_of.emplace(placeholder.get(), index);
    return index;
  }

  bool is_output(const te::Tensor& t) const {
    for (const te::Tensor& o : outputs_)
      if (o.same_as(t)) return true;
    return false;
  }

  // A buffer for a materialized stage: a placeholder of its (inlined) shape,
  // which the stage itself also maps to (loads of the stage read it).
  void buffer_for_stage(const te::Tensor& t, Buffer::Role role) {
    std::vector<Expr> shape;
    for (const Expr& d : t.shape()) shape.push_back(inline_expr(d));
    const int b = add_buffer(te::placeholder(t.name(), t.dtype(), std::move(shape)), role);
    kernel_.buffer_of.emplace(t.get(), b);
  }

  void bind_inputs() {
    std::unordered_set<const te::VarNode*> bound;
    for (int b = 0; b < kernel_.num_inputs; ++b) {
      const te::Tensor& p = kernel_.buffers[static_cast<std::size_t>(b)].tensor;
      for (std::size_t d = 0; d < p.ndim(); ++d) {
        const Expr& dim = p.shape()[d];
        if (const auto* var = dim.as<te::VarNode>(); var && bound.insert(var).second) {
          kernel_.bindings.push_back({dim, b, static_cast<int>(d)});
          continue;
        }
        kernel_.input_dims.push_back({b, static_cast<int>(d), dim});
      }
    }
  }

  // `e` with every load of an inlined stage replaced by the stage's body at
  // the load's indices; loads of materialized stages read their buffers.
  Expr inline_expr(const Expr& e) {
    const auto* l = e.as<te::LoadNode>();
    if (l == nullptr) return te::map_children(e, [&](const Expr& child) { return inline_expr(child); });
    std::vector<Expr> indices;
    for (const Expr& i : l->indices) indices.push_back(inline_expr(i));
    const te::Tensor& t = l->tensor;
    if (const auto it = kernel_.buffer_of.find(t.get()); it != kernel_.buffer_of.end()) {
      const te::Tensor& buffer = kernel_.buffers[static_cast<std::size_t>(it->second)].tensor;
      return l->checked ? te::checked_load(buffer, std::move(indices)) : te::load(buffer, std::move(indices));
    }
    NIMBLE_ASSERT(!t.is_placeholder(), "a load of a placeholder that is no input");
    NIMBLE_ASSERT(!l->checked, "a checked load of an inlined stage");
    std::unordered_map<const te::VarNode*, Expr> at;
    for (std::size_t d = 0; d < t->axes.size(); ++d) at.emplace(t->axes[d].node(), indices[d]);
    return substitute(inlined_body(t), at);
  }

  const Expr& inlined_body(const te::Tensor& t) {
    auto it = inlined_.find(t.get());
    if (it == inlined_.end()) it = inlined_.emplace(t.get(), inline_expr(t->body)).first;
    return it->second;
  }

  // A 1-d view of buffer `b`, for flattened stages.
  const te::Tensor& flat_view(int b) {
    auto it = flat_views_.find(b);
    if (it == flat_views_.end()) {
      const te::Tensor& t = kernel_.buffers[static_cast<std::size_t>(b)].tensor;
      te::Tensor view = te::placeholder(fmt::format("{}_flat", t.name()), t.dtype(), {te::product(t.shape())});
      kernel_.buffer_of.emplace(view.get(), b);
      it = flat_views_.emplace(b, std::move(view)).first;
    }
    return it->second;
  }

  // Whether `e` reads one of `axes` other than as a load's index (an iota,
  // a select on the position): then its stage keeps its loop nest.
  static bool uses_axis(const Expr& e, std::span<const te::Var> axes) {
    if (e.kind() == ExprKind::load) return false;
    if (e.kind() == ExprKind::var)
      return std::any_of(axes.begin(), axes.end(), [&](const te::Var& a) { return e.same_as(a); });
    bool used = false;
    te::for_each_child(e, [&](const Expr& child) { used = used || uses_axis(child, axes); });
    return used;
  }

  // Whether every load of `body` reads a whole buffer of `shape` at `axes`,
  // and nothing else reads the axes.
  bool flattenable(const Expr& body, std::span<const te::Var> axes, std::span<const Expr> shape) {
    if (axes.empty() || contains_reduce(body) || uses_axis(body, axes)) return false;
    bool ok = true;
    for_each_load(body, [&](const te::LoadNode& l) {
      if (!ok) return;
      const te::Tensor& t = l.tensor;
      if (l.checked || t.ndim() != axes.size()) {
        ok = false;
        return;
      }
      for (std::size_t d = 0; d < axes.size(); ++d)
        ok = ok && l.indices[d].same_as(axes[d]) && te::provably_equal(t.shape()[d], shape[d]);
    });
    return ok;
  }

  // `e` with every load (all of a flattenable body's) reading the flat view at `flat`.
  Expr flatten_loads(const Expr& e, const Expr& flat) {
    NIMBLE_ASSERT(e.kind() != ExprKind::reduce, "flatten_loads: a reduce in a flattened stage");
    if (const auto* l = e.as<te::LoadNode>())
      return te::load(flat_view(kernel_.buffer_of.at(l->tensor.get())), {flat});
    return te::map_children(e, [&](const Expr& child) { return flatten_loads(child, flat); });
  }

  // A sum over one axis k whose source reads along the stage's innermost
  // axis j and across k (matmul's b[k, j]) is computed with k outside j:
  //   out[..., j] = init;  for ...: for k: for j: out[..., j] += src(..., j, k)
  // With k innermost that load would stride by a row per step and the loop
  // could not vectorize; with j innermost every load is contiguous along j or
  // invariant, and it does. Each element still sums over k in order. Two
  // stages: the init, then the updates. False when the stage is not of that
  // form (then it is lowered as usual).
  // Whether reduction `body` (of stage `t`) is a sum over one axis k of a
  // source that reads along t's innermost axis j and across k (matmul's
  // b[k, j]), in f32 or f64.
  static bool sums_across_columns(const te::Tensor& t, const Expr& body) {
    const auto* r = body.as<te::ReduceNode>();
    if (r == nullptr || r->reduce_kind != te::ReduceKind::sum || r->axes.size() != 1 || t->axes.empty() ||
        (body.dtype() != DType::f32 && body.dtype() != DType::f64))
      return false;
    const te::VarNode* j = t->axes.back().node();
    const te::VarNode* k = r->axes[0].var.node();
    bool strided = false;
    for_each_load(r->source, [&](const te::LoadNode& l) {
      if (l.indices.empty() || l.indices.back().as<te::VarNode>() != j) return;
      for (std::size_t d = 0; d + 1 < l.indices.size(); ++d)
        strided = strided || l.indices[d].as<te::VarNode>() == k;
    });
    return strided;
  }

  bool lower_reduction_outside(const te::Tensor& t, const Expr& body, int b) {
    const auto* r = body.as<te::ReduceNode>();
    const te::Tensor& buffer = kernel_.buffers[static_cast<std::size_t>(b)].tensor;
    const std::vector<Expr>& shape = buffer.shape();
    if (r == nullptr || shape.empty() || t->axes.size() != shape.size() || !sums_across_columns(t, body))
      return false;

    const std::vector<Expr> index = te::as_indices(t->axes);
    const Expr flat = te::ravel(index, shape);
    // Loops over the axes before j, outermost parallel, around `inner`; a
    // rank-1 output gets a one-iteration outer loop (the stage's split point
    // must not be k).
    const auto outer_loops = [&](StmtRef inner) {
      for (std::size_t d = shape.size() - 1; d-- > 0;)
        inner = make_loop(t->axes[d], shape[d], d == 0 ? ForKind::parallel : ForKind::serial, std::move(inner));
      if (shape.size() == 1) inner = make_loop(te::Var("_once"), 1, ForKind::parallel, std::move(inner));
      return inner;
    };
    const Expr extent_j = shape.back();
    StmtRef init = make_loop(t->axes.back(), extent_j, ForKind::vectorized, make_store(b, flat, r->init));
    kernel_.stages.push_back({.name = t.name() + "_init", .output = b, .body = outer_loops(std::move(init)),
                              .work = te::product(shape)});
    StmtRef update = make_store(b, flat, te::binary(te::BinaryOp::add, te::load(buffer, index), r->source));
    update = make_loop(t->axes.back(), extent_j, ForKind::vectorized, std::move(update));
    update = make_loop(r->axes[0].var, r->axes[0].extent, ForKind::serial, std::move(update));
    kernel_.stages.push_back({.name = t.name(), .output = b, .body = outer_loops(std::move(update)),
                              .work = te::product(shape) * r->axes[0].extent});
    return true;
  }

  // The constant d by which `body` divides axis `j` (of constant extent,
  // a multiple of d): every floordiv(j, d) and floormod(j, d) in it has
  // the same d, from a vector's floats (kSplitMinDivisor) up, and there is
  // one; else nullopt.
  static constexpr std::int64_t kSplitMinDivisor = 16;
  static std::optional<std::int64_t> split_divisor(const Expr& body, const te::Var& j, const Expr& extent) {
    const std::optional<std::int64_t> n = te::as_int(extent);
    std::optional<std::int64_t> divisor;
    bool one = true;
    const std::function<void(const Expr&)> walk = [&](const Expr& e) {
      if (const auto* b = e.as<te::BinaryNode>();
          b && (b->op == te::BinaryOp::floordiv || b->op == te::BinaryOp::floormod) && b->a.get() == j.get()) {
        const std::optional<std::int64_t> d = te::as_int(b->b);
        one = one && d && (!divisor || *divisor == *d);
        if (d) divisor = *d;
      }
      te::for_each_child(e, walk);
    };
    walk(body);
    if (!n || !divisor || !one || *divisor < kSplitMinDivisor || *divisor >= *n || *n % *divisor != 0)
      return std::nullopt;
    return divisor;
  }

  void lower_stage(const te::Tensor& t) {
    const int b = kernel_.buffer_of.at(t.get());
    const te::Tensor& buffer = kernel_.buffers[static_cast<std::size_t>(b)].tensor;
    const std::vector<Expr>& shape = buffer.shape();
    // Indices through reshapes (floordiv, floormod by the dims) simplified
    // with the axes' extents: a transposed copy reads contiguously.
    VarBounds bounds;
    for (std::size_t d = 0; d < t->axes.size(); ++d)
      if (const std::optional<std::int64_t> n = te::as_int(shape[d]); n && *n >= 1) bounds[t->axes[d].node()] = *n - 1;
    Expr body = simplify_load_indices(inline_expr(t->body), bounds);
    if (lower_reduction_outside(t, body, b)) return;
    Stage stage{.name = t.name(), .output = b, .body = nullptr, .work = te::product(shape)};
    // The reduction (or a folded one, fold_reductions) sums over its axes per element.
    if (const te::ReduceNode* r = find_reduce(body)) {
      std::vector<Expr> extents;
      for (const te::IterVar& a : r->axes) extents.push_back(a.extent);
      stage.work = stage.work * te::product(extents);
    }
    if (flattenable(body, t->axes, shape)) {
      te::Var flat(fmt::format("{}_i", t.name()));
      body = flatten_loads(body, flat);
      stage.body = make_loop(flat, te::product(shape), ForKind::parallel, make_store(b, flat, body));
    } else if (shape.empty()) {
      // A scalar: one iteration of a loop, so every stage has an outer loop.
      stage.body = make_loop(te::Var("_scalar"), 1, ForKind::parallel, make_store(b, 0, body));
    } else {
      // Leading dims of extent 1 (a batch of one: [1, n]) get no loop, so
      // that the loop split across threads is one with more than one
      // iteration (a matrix-vector product splits by columns).
      std::size_t first = 0;
      std::unordered_map<const te::VarNode*, Expr> unit;
      while (first + 1 < shape.size() && te::as_int(shape[first]) == 1) unit[t->axes[first++].node()] = Expr(std::int64_t{0});
      const std::vector<Expr> index = te::as_indices(t->axes);
      const std::size_t last = shape.size() - 1;
      const std::optional<std::int64_t> divisor = last > first ? split_divisor(body, t->axes[last], shape[last]) : std::nullopt;
      StmtRef nest;
      if (divisor) {
        // The innermost axis j as j_outer · divisor + j_inner: what read
        // floordiv(j, divisor) and floormod(j, divisor) (a reshape's
        // unravelling: attention's heads put back in rows, [12, n, 64] ->
        // [n, 768]) reads j_outer and j_inner, its rows contiguous along
        // j_inner.
        const te::Var outer(t->axes[last].name() + "_outer");
        const te::Var inner(t->axes[last].name() + "_inner");
        const Expr k(*divisor);
        std::unordered_map<const te::VarNode*, Expr> split = unit;
        split[t->axes[last].node()] = outer * k + inner;
        VarBounds inside = bounds;
        const std::int64_t parts = *te::as_int(shape[last]) / *divisor;
        inside[outer.node()] = parts - 1;
        inside[inner.node()] = *divisor - 1;
        std::vector<Expr> rows(index.begin(), index.end() - 1);
        const std::vector<Expr> row_shape(shape.begin(), shape.end() - 1);
        const Expr row = substitute(te::ravel(rows, row_shape), unit) * shape[last];
        nest = make_store(b, row + outer * k + inner, simplify_load_indices(substitute(body, split), inside));
        nest = make_loop(inner, k, ForKind::vectorized, std::move(nest));
        nest = make_loop(outer, Expr(parts), ForKind::serial, std::move(nest));
      } else {
        nest = make_store(b, substitute(te::ravel(index, shape), unit), substitute(body, unit));
      }
      for (std::size_t d = shape.size(); d-- > first;) {
        if (divisor && d == last) continue;
        const ForKind kind = d == first ? ForKind::parallel
                             : d == last ? ForKind::vectorized
                                         : ForKind::serial;
        nest = make_loop(t->axes[d], shape[d], kind, std::move(nest));
      }
      stage.body = std::move(nest);
    }
    kernel_.stages.push_back(std::move(stage));
  }

  KernelIR kernel_;
  std::vector<te::Tensor> outputs_;
  std::vector<te::Tensor> stages_;  // compute stages, producers first
  std::unordered_set<const te::TensorNode*> materialized_;
  std::unordered_map<const te::TensorNode*, Expr> inlined_;
  std::unordered_map<int, te::Tensor> flat_views_;
};

}  // namespace

KernelIR lower_to_kernel_ir(std::string name, std::span<const te::Tensor> inputs,
                            std::span<const te::Tensor> outputs) {
  return Lowering(std::move(name), inputs, outputs).run();
}

}  // namespace nimble::codegen
