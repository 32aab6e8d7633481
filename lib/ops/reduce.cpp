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
#include <algorithm>
#include <cmath>
#include <limits>

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

}  // namespace

const OpDef& sum() {
  static const OpDef def{.name = "sum",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&sum, false>,
                         .reference = &sum_like_kernel<&sum, ref::Accepts::numeric>};
  return def;
}

const OpDef& mean() {
  static const OpDef def{.name = "mean",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&mean, true>,
                         .reference = &sum_like_kernel<&mean, ref::Accepts::floating>};
  return def;
}

const OpDef& max() {
  static const OpDef def{.name = "max",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&max, false>,
                         .reference = &extremum_kernel<&max, true>};
  return def;
}

const OpDef& min() {
  static const OpDef def{.name = "min",
                         .arg_names = kX,
                         .attrs = reduce_attrs(),
                         .type_relation = &reduction<&min, false>,
                         .reference = &extremum_kernel<&min, false>};
  return def;
}

const OpDef& argmax() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::nullopt},
                                       {"keepdims", ir::AttrKind::boolean, false}};
  static const OpDef def{.name = "argmax",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &argmax_relation,
                         .reference = &argmax_kernel};
  return def;
}

const OpDef& softmax() {
  static const OpDef def{.name = "softmax",
                         .arg_names = kX,
                         .attrs = softmax_attrs(),
                         .type_relation = &softmax_like<&softmax>,
                         .reference = &softmax_kernel<false>};
  return def;
}

const OpDef& log_softmax() {
  static const OpDef def{.name = "log_softmax",
                         .arg_names = kX,
                         .attrs = softmax_attrs(),
                         .type_relation = &softmax_like<&log_softmax>,
                         .reference = &softmax_kernel<true>};
  return def;
}

const OpDef& layer_norm() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::int64_t{-1}},
                                       {"epsilon", ir::AttrKind::real, 1e-5}};
  static const OpDef def{.name = "layer_norm",
                         .arg_names = kLayerNormArgs,
                         .attrs = attrs,
                         .type_relation = &layer_norm_relation,
                         .reference = &layer_norm_kernel};
  return def;
}

}  // namespace nimble::ops
