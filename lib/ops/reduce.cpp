// Reductions (sum, mean, max, min, argmax) and the normalizations over one
// axis (softmax, log_softmax, layer_norm).
//
// Reference semantics (the arithmetic rules of reference_util.hpp apply):
//  - sum accumulates floating point in double (rounded once at the end) and
//    integers with wrapping; mean (floating only) is the double sum / count.
//  - Over an empty set of elements: sum is 0, mean is NaN (0/0), and max,
//    min and argmax raise Error(invalid_argument) naming x's shape and the axes.
//  - max, min: a NaN among the elements gives NaN (as PyTorch).
//  - argmax: the FIRST index of the maximum; NaN counts as maximal, so the
//    first NaN wins (as PyTorch). Result i64.
//  - softmax, log_softmax: stable, computed in double as exp(x - max) / Σ and
//    x - max - log Σ along the axis; a NaN in a row, or a row whose max is
//    ±inf, gives NaN for the whole row.
//  - layer_norm: over the `axis` attribute (the last axis by default) with the
//    biased variance: (x - mean) / sqrt(var + epsilon) · gamma + beta, in
//    double. gamma and beta must have x's extent along the axis at run time.
//
// Compute rules (pattern reduction). A reduce is the whole body of its stage,
// so a rule is a few stages: floating point accumulates in
// te::accumulator_dtype (f32 for f16/bf16) and a last elementwise stage
// rounds to x's dtype:
//  - sum: Σ (+ a cast stage for f16/bf16); mean: Σ, then / count.
//  - max, min: NaN-propagating folds; argmax: te's first-index argmax. They
//    check that the reduced extent is not empty.
//  - softmax: max, then Σ exp(x - max), then exp(x - max) / Σ (log_softmax:
//    x - max - log Σ); exp is recomputed rather than stored.
//  - layer_norm: Σ x, then Σ (x - mean)², then the normalization; it checks
//    that gamma and beta have x's extent along the axis.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/compute.hpp"
#include "ops/ops.hpp"
#include "ops/reference_util.hpp"
#include "ops/relation_util.hpp"
#include "support/check.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kX[] = {"x"};
constexpr std::string_view kLayerNormArgs[] = {"x", "gamma", "beta"};

// x's shape without the `reduced` axes, or with 1 in their place (keepdims).
Shape reduce_shape(const TensorTypeNode& x, std::span<const std::size_t> reduced, bool keepdims) {
  Shape shape;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    const bool is_reduced = std::find(reduced.begin(), reduced.end(), i) != reduced.end();
    if (!is_reduced)
      shape.push_back(x.shape[i]);
    else if (keepdims)
      shape.push_back(Dim(1));
  }
  return shape;
}

template <const OpDef& (*Op)(), bool kFloatingOnly>
Type reduction(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, Op());
  if (kFloatingOnly)
    expect_floating(x, "x");
  else
    expect_numeric(x, "x");
  std::vector<std::size_t> axes = normalize_axes(ints_attr(Op(), attrs, "axes"), x.rank());
  if (axes.empty())  // [] reduces every axis
    for (std::size_t i = 0; i < x.rank(); ++i) axes.push_back(i);
  return ir::tensor_type(reduce_shape(x, axes, bool_attr(Op(), attrs, "keepdims")), x.dtype);
}

Type argmax_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, argmax());
  expect_numeric(x, "x");
  const std::size_t axis[] = {normalize_axis(int_attr(argmax(), attrs, "axis"), x.rank())};
  return ir::tensor_type(reduce_shape(x, axis, bool_attr(argmax(), attrs, "keepdims")), DType::i64);
}

template <const OpDef& (*Op)()>
Type softmax_like(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, Op());
  expect_floating(x, "x");
  static_cast<void>(normalize_axis(int_attr(Op(), attrs, "axis"), x.rank()));
  return args[0];
}

Type layer_norm_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, layer_norm());
  expect_floating(x, "x");
  const std::int64_t axis_attr = int_attr(layer_norm(), attrs, "axis");
  const std::size_t axis = normalize_axis(axis_attr, x.rank());
  const double epsilon = real_attr(layer_norm(), attrs, "epsilon");
  if (!(epsilon > 0)) throw_error(ErrorKind::type_error, "epsilon must be > 0, got {}", epsilon);
  Shape shape = x.shape;
  for (std::size_t i = 1; i <= 2; ++i) {  // gamma, beta
    const std::string_view name = kLayerNormArgs[i];
    const TensorTypeNode& param = expect_tensor(args, i, layer_norm());
    expect_same_dtype(x, "x", param, name);
    expect_rank(param, name, 1);
    std::optional<Dim> dim = merge_equal_dim(shape[axis], param.shape[0]);
    if (!dim)
      throw_error(ErrorKind::type_error, "{} has {} elements but x's axis {} has {}", name,
                  ir::to_string(param.shape[0]), axis_attr, ir::to_string(shape[axis]));
    shape[axis] = *dim;
  }
  return ir::tensor_type(std::move(shape), x.dtype);
}

std::span<const ir::AttrSpec> reduce_attrs() {
  static const ir::AttrSpec attrs[] = {
      {"axes", ir::AttrKind::integers, std::vector<std::int64_t>{}},
      {"keepdims", ir::AttrKind::boolean, false}};
  return attrs;
}

std::span<const ir::AttrSpec> softmax_attrs() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::int64_t{-1}}};
  return attrs;
}

// --- reference kernels ------------------------------------------------------------------

// Where the elements of x go in a reduction over `axes`.
struct Reduction {
  std::vector<std::size_t> axes;  // normalized, every axis for []
  nimble::Shape kept;             // x's shape with 1 along each reduced axis
  nimble::Shape result;           // kept, or without the reduced axes
  std::int64_t count = 1;         // elements folded into each result element
};

Reduction plan_reduction(const nimble::Shape& x, std::vector<std::size_t> axes, bool keepdims) {
  Reduction r;
  r.axes = std::move(axes);
  std::vector<std::int64_t> kept;
  std::vector<std::int64_t> result;
  for (std::size_t d = 0; d < x.rank(); ++d) {
    const bool reduced = std::find(r.axes.begin(), r.axes.end(), d) != r.axes.end();
    kept.push_back(reduced ? 1 : x[d]);
    if (reduced) r.count *= x[d];
    if (!reduced || keepdims) result.push_back(reduced ? 1 : x[d]);
  }
  r.kept = ref::make_shape(kept);
  r.result = ref::make_shape(result);
  return r;
}

template <const OpDef& (*Op)()>
Reduction plan_reduction(const Tensor& x, const ir::Attrs& attrs) {
  std::vector<std::size_t> axes = normalize_axes(ints_attr(Op(), attrs, "axes"), x.rank());
  if (axes.empty())
    for (std::size_t d = 0; d < x.rank(); ++d) axes.push_back(d);
  return plan_reduction(x.shape(), std::move(axes), bool_attr(Op(), attrs, "keepdims"));
}

void expect_not_empty(const Tensor& x, const Reduction& r) {
  if (r.count == 0)
    throw_error(ErrorKind::invalid_argument, "x {} has no elements along axes [{}]",
                to_string(x.shape()), fmt::join(r.axes, ", "));
}

// Folds each element of x into acc[the result element it reduces to].
template <class T, class Acc, class Fold>
void fold_into(const Tensor& x, const Reduction& r, std::vector<Acc>& acc, Fold fold) {
  const T* in = x.data<T>();
  ref::for_each_broadcast<1>(x.shape(), {&r.kept},
                             [&](std::int64_t flat, const std::array<std::int64_t, 1>& off) {
                               fold(acc[off[0]], in[flat]);
                             });
}

template <const OpDef& (*Op)(), ref::Accepts kAccepts>
Value sum_like_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const Reduction r = plan_reduction<Op>(x, attrs);
  Tensor out = ref::fresh(r.result, x.dtype());
  ref::dispatch<kAccepts>(x.dtype(), "x", [&](auto tag) {
    using T = decltype(tag);
    T* po = out.data<T>();
    if constexpr (ref::is_float_v<T>) {
      std::vector<double> acc(static_cast<std::size_t>(out.numel()), 0.0);
      fold_into<T>(x, r, acc, [](double& a, T v) { a += to_double(v); });
      const bool is_mean = &Op() == &mean();
      const auto count = static_cast<double>(r.count);
      for (std::size_t i = 0; i < acc.size(); ++i)
        po[i] = ref::from_double<T>(is_mean ? acc[i] / count : acc[i]);
    } else {
      std::vector<std::uint64_t> acc(static_cast<std::size_t>(out.numel()), 0);
      fold_into<T>(x, r, acc, [](std::uint64_t& a, T v) { a += static_cast<std::uint64_t>(v); });
      for (std::size_t i = 0; i < acc.size(); ++i) po[i] = ref::wrap<T>(acc[i]);
    }
  });
  return out;
}

template <const OpDef& (*Op)(), bool kMax>
Value extremum_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const Reduction r = plan_reduction<Op>(x, attrs);
  expect_not_empty(x, r);
  Tensor out = ref::fresh(r.result, x.dtype());
  ref::dispatch<ref::Accepts::numeric>(x.dtype(), "x", [&](auto tag) {
    using T = decltype(tag);
    using W = decltype(ref::widen(T{}));
    using Limits = std::numeric_limits<W>;
    constexpr W lowest = ref::is_float_v<T> ? -Limits::infinity() : Limits::lowest();
    constexpr W highest = ref::is_float_v<T> ? Limits::infinity() : Limits::max();
    constexpr W init = kMax ? lowest : highest;
    std::vector<W> acc(static_cast<std::size_t>(out.numel()), init);
    fold_into<T>(x, r, acc, [](W& a, T v) {
      const W w = ref::widen(v);
      if constexpr (ref::is_float_v<T>) {
        if (std::isnan(a)) return;  // NaN sticks
        if (std::isnan(w)) {
          a = w;
          return;
        }
      }
      if (kMax ? a < w : w < a) a = w;
    });
    T* po = out.data<T>();
    for (std::size_t i = 0; i < acc.size(); ++i) po[i] = static_cast<T>(acc[i]);
  });
  return out;
}

Value argmax_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::size_t axis = normalize_axis(int_attr(argmax(), attrs, "axis"), x.rank());
  const Reduction r = plan_reduction(x.shape(), {axis}, bool_attr(argmax(), attrs, "keepdims"));
  expect_not_empty(x, r);
  Tensor out = ref::fresh(r.result, DType::i64);
  std::int64_t* po = out.data<std::int64_t>();
  const ref::AxisSplit s = ref::split_at(x.shape(), axis);
  ref::dispatch<ref::Accepts::numeric>(x.dtype(), "x", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    for (std::int64_t o = 0; o < s.outer; ++o) {
      for (std::int64_t n = 0; n < s.inner; ++n) {
        const T* row = in + o * s.extent * s.inner + n;
        std::int64_t best = 0;
        for (std::int64_t i = 0; i < s.extent; ++i) {
          const auto v = ref::widen(row[i * s.inner]);
          if constexpr (ref::is_float_v<T>) {
            if (std::isnan(v)) {  // the first NaN is the maximum
              best = i;
              break;
            }
          }
          if (ref::widen(row[best * s.inner]) < v) best = i;
        }
        po[o * s.inner + n] = best;
      }
    }
  });
  return out;
}

template <bool kLog>
Value softmax_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const OpDef& op = kLog ? log_softmax() : softmax();
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::size_t axis = normalize_axis(int_attr(op, attrs, "axis"), x.rank());
  const ref::AxisSplit s = ref::split_at(x.shape(), axis);
  Tensor out = ref::fresh(x.shape(), x.dtype());
  ref::dispatch<ref::Accepts::floating>(x.dtype(), "x", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* po = out.data<T>();
    std::vector<double> row(static_cast<std::size_t>(s.extent));
    for (std::int64_t o = 0; o < s.outer; ++o) {
      for (std::int64_t n = 0; n < s.inner; ++n) {
        const std::int64_t base = o * s.extent * s.inner + n;
        double max = -std::numeric_limits<double>::infinity();
        for (std::int64_t i = 0; i < s.extent; ++i) {
          row[static_cast<std::size_t>(i)] = to_double(in[base + i * s.inner]);
          max = std::max(max, row[static_cast<std::size_t>(i)]);
        }
        double sum = 0;
        for (double v : row) sum += std::exp(v - max);
        for (std::int64_t i = 0; i < s.extent; ++i) {
          const double shifted = row[static_cast<std::size_t>(i)] - max;
          const double y = kLog ? shifted - std::log(sum) : std::exp(shifted) / sum;
          po[base + i * s.inner] = ref::from_double<T>(y);
        }
      }
    }
  });
  return out;
}

Value layer_norm_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::int64_t axis_attr = int_attr(layer_norm(), attrs, "axis");
  const std::size_t axis = normalize_axis(axis_attr, x.rank());
  const double epsilon = real_attr(layer_norm(), attrs, "epsilon");
  const ref::AxisSplit s = ref::split_at(x.shape(), axis);
  for (std::size_t i = 1; i <= 2; ++i) {
    const Tensor& param = ref::tensor_arg(args, i);
    const std::string_view name = kLayerNormArgs[i];
    if (param.dtype() != x.dtype())
      throw_error(ErrorKind::type_error, "x is {} but {} is {}", to_string(x.dtype()), name,
                  to_string(param.dtype()));
    if (param.rank() != 1 || param.dim(0) != s.extent)
      throw_error(ErrorKind::invalid_argument, "{} {} does not match x {} along axis {}", name,
                  to_string(param.shape()), to_string(x.shape()), axis_attr);
  }
  const Tensor& gamma = ref::tensor_arg(args, 1);
  const Tensor& beta = ref::tensor_arg(args, 2);
  Tensor out = ref::fresh(x.shape(), x.dtype());
  ref::dispatch<ref::Accepts::floating>(x.dtype(), "x", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    const T* pg = gamma.data<T>();
    const T* pb = beta.data<T>();
    T* po = out.data<T>();
    const auto count = static_cast<double>(s.extent);
    for (std::int64_t o = 0; o < s.outer; ++o) {
      for (std::int64_t n = 0; n < s.inner; ++n) {
        const std::int64_t base = o * s.extent * s.inner + n;
        double mean = 0;
        for (std::int64_t i = 0; i < s.extent; ++i) mean += to_double(in[base + i * s.inner]);
        mean /= count;
        double var = 0;
        for (std::int64_t i = 0; i < s.extent; ++i) {
          const double d = to_double(in[base + i * s.inner]) - mean;
          var += d * d;
        }
        var /= count;
        const double scale = 1.0 / std::sqrt(var + epsilon);
        for (std::int64_t i = 0; i < s.extent; ++i) {
          const double v = (to_double(in[base + i * s.inner]) - mean) * scale;
          po[base + i * s.inner] = ref::from_double<T>(v * to_double(pg[i]) + to_double(pb[i]));
        }
      }
    }
  });
  return out;
}

// --- compute rules ------------------------------------------------------------------------

// A reduction of te tensor x over some of its axes: the result shape, one
// reduction IterVar per reduced axis, and x's index for a result index.
struct TeReduction {
  std::vector<te::Expr> shape;
  std::vector<te::IterVar> axes;
  std::vector<int> source;  // per dim of x: the IterVar it reads (>= 0) or -1
  bool keepdims = false;

  TeReduction(const te::Tensor& x, std::span<const std::size_t> reduced, bool keep)
      : source(x.ndim(), -1), keepdims(keep) {
    for (std::size_t d = 0; d < x.ndim(); ++d) {
      const bool is_reduced = std::find(reduced.begin(), reduced.end(), d) != reduced.end();
      if (is_reduced) {
        source[d] = static_cast<int>(axes.size());
        axes.push_back(te::reduce_axis(x.shape()[d], fmt::format("k{}", axes.size())));
      }
      if (!is_reduced || keepdims) shape.push_back(is_reduced ? te::Expr(1) : x.shape()[d]);
    }
  }

  // x's index for result index `out`, reading the reduction axes.
  [[nodiscard]] std::vector<te::Expr> x_index(std::span<const te::Var> out) const {
    std::vector<te::Expr> index;
    std::size_t o = 0;
    for (const int s : source) {
      if (s >= 0) {
        index.push_back(axes[static_cast<std::size_t>(s)].var);
        if (keepdims) ++o;
      } else {
        index.push_back(out[o++]);
      }
    }
    return index;
  }

  // The number of elements folded into each result element.
  [[nodiscard]] te::Expr count() const {
    std::vector<te::Expr> extents;
    for (const te::IterVar& axis : axes) extents.push_back(axis.extent);
    return te::product(extents);
  }

  // A check that no reduced extent is 0 (max, min and argmax have no init).
  [[nodiscard]] std::vector<te::Check> not_empty(std::span<const std::size_t> reduced) const {
    te::Expr ok = te::int_imm(1, DType::boolean);
    for (const te::IterVar& axis : axes) ok = ok && axis.extent > 0;
    std::vector<te::Check> checks;
    te::add_check(checks, ok, ErrorKind::invalid_argument,
                  fmt::format("x has no elements along axes [{}]", fmt::join(reduced, ", ")));
    return checks;
  }
};

template <const OpDef& (*Op)()>
std::vector<std::size_t> reduced_axes(const te::Tensor& x, const ir::Attrs& attrs) {
  std::vector<std::size_t> axes = normalize_axes(ints_attr(Op(), attrs, "axes"), x.ndim());
  if (axes.empty())
    for (std::size_t d = 0; d < x.ndim(); ++d) axes.push_back(d);
  return axes;
}

// `t` rounded to `dtype` in an elementwise stage named `name` (none when it has it).
te::Tensor cast_stage(const te::Tensor& t, DType dtype, std::string name) {
  if (t.dtype() == dtype) return t;
  return te::compute(t.shape(), std::move(name), [&](std::span<const te::Var> i) {
    return te::cast(dtype, t(te::as_indices(i)));
  });
}

template <const OpDef& (*Op)()>
std::vector<te::Tensor> sum_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const std::vector<std::size_t> reduced = reduced_axes<Op>(x, attrs);
  const TeReduction r(x, reduced, bool_attr(Op(), attrs, "keepdims"));
  const DType acc = te::accumulator_dtype(x.dtype());
  const std::string name(Op().name);
  // sum in x's dtype is one stage; otherwise an epilogue rounds (and divides).
  const bool one_stage = &Op() == &sum() && acc == x.dtype();
  const te::Tensor total =
      te::compute(r.shape, one_stage ? name : name + ".sum", [&](std::span<const te::Var> i) {
        return te::reduce_sum(te::cast(acc, x(r.x_index(i))), r.axes);
      });
  if (&Op() == &sum()) return {cast_stage(total, x.dtype(), name)};
  return {te::compute(r.shape, name, [&](std::span<const te::Var> i) {
    return te::cast(x.dtype(), total(te::as_indices(i)) / te::cast(acc, r.count()));
  })};
}

template <const OpDef& (*Op)(), bool kMax>
std::vector<te::Tensor> extremum_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const std::vector<std::size_t> reduced = reduced_axes<Op>(x, attrs);
  const TeReduction r(x, reduced, bool_attr(Op(), attrs, "keepdims"));
  return {te::compute(
      r.shape, std::string(Op().name),
      [&](std::span<const te::Var> i) {
        return kMax ? te::reduce_max(x(r.x_index(i)), r.axes)
                    : te::reduce_min(x(r.x_index(i)), r.axes);
      },
      r.not_empty(reduced))};
}

std::vector<te::Tensor> argmax_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const std::size_t reduced[] = {normalize_axis(int_attr(argmax(), attrs, "axis"), x.ndim())};
  const TeReduction r(x, reduced, bool_attr(argmax(), attrs, "keepdims"));
  return {te::compute(
      r.shape, "argmax",
      [&](std::span<const te::Var> i) { return te::reduce_argmax(x(r.x_index(i)), r.axes[0]); },
      r.not_empty(reduced))};
}

// x's index with `i` (an index of x's shape without `axis`) and `k` at `axis`.
std::vector<te::Expr> with_axis(std::span<const te::Var> i, std::size_t axis, te::Expr k) {
  std::vector<te::Expr> index(i.begin(), i.end());
  index.insert(index.begin() + static_cast<std::ptrdiff_t>(axis), std::move(k));
  return index;
}

// `i` (an index of x) without its `axis` entry.
std::vector<te::Expr> without_axis(std::span<const te::Var> i, std::size_t axis) {
  std::vector<te::Expr> index(i.begin(), i.end());
  index.erase(index.begin() + static_cast<std::ptrdiff_t>(axis));
  return index;
}

template <bool kLog>
std::vector<te::Tensor> softmax_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const OpDef& op = kLog ? log_softmax() : softmax();
  const std::string name(op.name);
  const te::Tensor& x = inputs[0];
  const std::size_t axis = normalize_axis(int_attr(op, attrs, "axis"), x.ndim());
  const DType acc = te::accumulator_dtype(x.dtype());
  std::vector<te::Expr> rows = x.shape();  // x's shape without the axis
  rows.erase(rows.begin() + static_cast<std::ptrdiff_t>(axis));
  const te::Tensor max = te::compute(rows, name + ".max", [&](std::span<const te::Var> i) {
    const te::IterVar k = te::reduce_axis(x.shape()[axis], "k");
    return te::reduce_max(te::cast(acc, x(with_axis(i, axis, k.var))), {k});
  });
  const te::Tensor sum = te::compute(rows, name + ".sum", [&](std::span<const te::Var> i) {
    const te::IterVar k = te::reduce_axis(x.shape()[axis], "k");
    const te::Expr shifted = te::cast(acc, x(with_axis(i, axis, k.var))) - max(te::as_indices(i));
    return te::reduce_sum(te::exp(shifted), {k});
  });
  return {te::compute(x.shape(), name, [&](std::span<const te::Var> i) {
    const std::vector<te::Expr> row = without_axis(i, axis);
    const te::Expr shifted = te::cast(acc, x(te::as_indices(i))) - max(row);
    return te::cast(x.dtype(), kLog ? shifted - te::log(sum(row)) : te::exp(shifted) / sum(row));
  })};
}

std::vector<te::Tensor> layer_norm_rule(std::span<const te::Tensor> inputs,
                                        const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const te::Tensor& gamma = inputs[1];
  const te::Tensor& beta = inputs[2];
  const std::int64_t axis_attr = int_attr(layer_norm(), attrs, "axis");
  const std::size_t axis = normalize_axis(axis_attr, x.ndim());
  const double epsilon = real_attr(layer_norm(), attrs, "epsilon");
  const DType acc = te::accumulator_dtype(x.dtype());
  const te::Expr& extent = x.shape()[axis];
  std::vector<te::Check> checks;
  for (const te::Tensor* param : {&gamma, &beta}) {
    const te::Expr& n = param->shape()[0];
    if (!te::provably_equal(n, extent))
      checks.push_back(
          {te::eq(n, extent), ErrorKind::invalid_argument,
           fmt::format("{} does not match x along axis {}", param->name(), axis_attr)});
  }
  std::vector<te::Expr> rows = x.shape();
  rows.erase(rows.begin() + static_cast<std::ptrdiff_t>(axis));
  const te::Expr count = te::cast(acc, extent);
  const te::Tensor sum = te::compute(rows, "layer_norm.sum", [&](std::span<const te::Var> i) {
    const te::IterVar k = te::reduce_axis(extent, "k");
    return te::reduce_sum(te::cast(acc, x(with_axis(i, axis, k.var))), {k});
  });
  const te::Tensor var = te::compute(rows, "layer_norm.var", [&](std::span<const te::Var> i) {
    const te::IterVar k = te::reduce_axis(extent, "k");
    const te::Expr centered =
        te::cast(acc, x(with_axis(i, axis, k.var))) - sum(te::as_indices(i)) / count;
    return te::reduce_sum(centered * centered, {k});
  });
  return {te::compute(
      x.shape(), "layer_norm",
      [&](std::span<const te::Var> i) {
        const std::vector<te::Expr> row = without_axis(i, axis);
        const te::Expr mean = sum(row) / count;
        const te::Expr scale = te::rsqrt(var(row) / count + epsilon);
        const te::Expr normalized = (te::cast(acc, x(te::as_indices(i))) - mean) * scale;
        return te::cast(x.dtype(), normalized * te::cast(acc, gamma({i[axis]})) +
                                       te::cast(acc, beta({i[axis]})));
      },
      std::move(checks))};
}

}  // namespace

const OpDef& sum() {
  static const OpDef def{.name = "sum",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&sum, false>,
                         .pattern = ir::OpPattern::reduction,
                         .compute = &sum_rule<&sum>,
                         .reference = &sum_like_kernel<&sum, ref::Accepts::numeric>,
                         .summary = "The sum over `axes` (all if empty).",
                         .example = {"%x: f32[n, 4]", "sum(%x, axes=[1], keepdims=false)"}};
  return def;
}

const OpDef& mean() {
  static const OpDef def{.name = "mean",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&mean, true>,
                         .pattern = ir::OpPattern::reduction,
                         .compute = &sum_rule<&mean>,
                         .reference = &sum_like_kernel<&mean, ref::Accepts::floating>,
                         .summary = "The mean over `axes` (all if empty).",
                         .example = {"%x: f32[n, 4]", "mean(%x, axes=[1], keepdims=true)"}};
  return def;
}

const OpDef& max() {
  static const OpDef def{.name = "max",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&max, false>,
                         .pattern = ir::OpPattern::reduction,
                         .compute = &extremum_rule<&max, true>,
                         .reference = &extremum_kernel<&max, true>,
                         .summary = "The maximum over `axes` (all if empty); an empty extent is "
                                    "an Error.",
                         .example = {"%x: f32[n, 4]", "max(%x, axes=[0], keepdims=false)"}};
  return def;
}

const OpDef& min() {
  static const OpDef def{.name = "min",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&min, false>,
                         .pattern = ir::OpPattern::reduction,
                         .compute = &extremum_rule<&min, false>,
                         .reference = &extremum_kernel<&min, false>,
                         .summary = "The minimum over `axes` (all if empty); an empty extent is "
                                    "an Error.",
                         .example = {"%x: f32[n, 4]", "min(%x, axes=[0], keepdims=false)"}};
  return def;
}

const OpDef& argmax() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::nullopt},
                                       {"keepdims", ir::AttrKind::boolean, false}};
  static const OpDef def{.name = "argmax",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &argmax_relation,
                         .pattern = ir::OpPattern::reduction,
                         .compute = &argmax_rule,
                         .reference = &argmax_kernel,
                         .summary = "The first index of the maximum along `axis` (NaN counts as "
                                    "maximal), as i64.",
                         .example = {"%x: f32[n, 4]", "argmax(%x, axis=1, keepdims=false)"}};
  return def;
}

const OpDef& softmax() {
  static const OpDef def{.name = "softmax",
                         .arg_names = kX,
                         .attrs = softmax_attrs(),
                         .type_relation = &softmax_like<&softmax>,
                         .pattern = ir::OpPattern::reduction,
                         .compute = &softmax_rule<false>,
                         .reference = &softmax_kernel<false>,
                         .summary = "e^x / sum(e^x) along `axis`, stable for large x.",
                         .example = {"%x: f32[n, 4]", "softmax(%x, axis=-1)"}};
  return def;
}

const OpDef& log_softmax() {
  static const OpDef def{.name = "log_softmax",
                         .arg_names = kX,
                         .attrs = softmax_attrs(),
                         .type_relation = &softmax_like<&log_softmax>,
                         .pattern = ir::OpPattern::reduction,
                         .compute = &softmax_rule<true>,
                         .reference = &softmax_kernel<true>,
                         .summary = "x - log(sum(e^x)) along `axis`, stable for large x.",
                         .example = {"%x: f32[n, 4]", "log_softmax(%x, axis=-1)"}};
  return def;
}

const OpDef& layer_norm() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::int64_t{-1}},
                                       {"epsilon", ir::AttrKind::real, 1e-5}};
  static const OpDef def{.name = "layer_norm",
                         .arg_names = kLayerNormArgs,
                         .attrs = attrs,
                         .type_relation = &layer_norm_relation,
                         .pattern = ir::OpPattern::reduction,
                         .compute = &layer_norm_rule,
                         .reference = &layer_norm_kernel,
                         .summary = "(x - mean) / sqrt(var + epsilon) * gamma + beta over the "
                                    "last axis.",
                         .example = {"%x: f32[n, 768], %gamma: f32[768], %beta: f32[768]",
                                     "layer_norm(%x, %gamma, %beta, epsilon=1e-12)"}};
  return def;
}

}  // namespace nimble::ops
