// Creation ops and ops whose result shape depends on run-time values: the
// extents they produce are Any, their ranks come from the types.
//
// Reference semantics:
//  - zeros, ones, full take the shape as an i64[k] tensor at run time; a
//    negative extent is Error(invalid_argument). full converts its scalar
//    value to the dtype attribute as cast does (reference_util.hpp: convert).
//  - arange(start, stop, step): ceil((stop - start) / step) elements (none
//    when the range is empty), element i = start + i·step computed in double
//    for floating point (rounded once) and exactly for integers. A zero step
//    or a non-finite bound is Error(runtime_error).
//  - nonzero(x): i64[count, rank], the indices of the elements != 0 (NaN is
//    non-zero) in row-major order; a scalar gives [count, 0].
//  - shape_of(x): i64[rank].
//
// Compute rules (pattern injective): zeros, ones and full read their extents
// from the shape tensor (checking that none is negative) and fill with a
// constant, or with `value` converted as te::cast converts; arange computes its
// count from the scalars as the reference does (checks: a zero step,
// non-finite bounds, too many elements) and element i as start + i·step (in
// the accumulator dtype for floating point, wrapping for integers). nonzero
// and shape_of are opaque: nonzero compacts data-dependent positions (a scan,
// not a loop nest over its output), and the VM reads shapes itself (ShapeOf).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/compute.hpp"
#include "ops/ops.hpp"
#include "ops/reference_util.hpp"
#include "ops/relation_util.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kShape[] = {"shape"};
constexpr std::string_view kFullArgs[] = {"shape", "value"};
constexpr std::string_view kArangeArgs[] = {"start", "stop", "step"};
constexpr std::string_view kX[] = {"x"};

// A tensor of `dtype` whose rank is the static length of the shape argument.
template <const OpDef& (*Op)()>
Type filled(std::span<const Type> args, const ir::Attrs& attrs) {
  const std::size_t rank = expect_static_i64_vector(expect_tensor(args, 0, Op()), "shape");
  if (Op().arg_names.size() > 1) expect_scalar(expect_tensor(args, 1, Op()), "value");
  return ir::tensor_type(Shape(rank, ir::Any), dtype_attr(Op(), attrs, "dtype"));
}

Type arange_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& start = expect_tensor(args, 0, arange());
  expect_numeric(start, "start");
  for (std::size_t i = 0; i < 3; ++i) {
    const TensorTypeNode& t = expect_tensor(args, i, arange());
    expect_scalar(t, kArangeArgs[i]);
    expect_same_dtype(start, "start", t, kArangeArgs[i]);
  }
  return ir::tensor_type({ir::Any}, start.dtype);
}

Type nonzero_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& x = expect_tensor(args, 0, nonzero());
  return ir::tensor_type({ir::Any, Dim(static_cast<std::int64_t>(x.rank()))}, DType::i64);
}

Type shape_of_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& x = expect_tensor(args, 0, shape_of());
  return ir::tensor_type({Dim(static_cast<std::int64_t>(x.rank()))}, DType::i64);
}

std::span<const ir::AttrSpec> dtype_attrs() {
  static const ir::AttrSpec attrs[] = {{"dtype", ir::AttrKind::dtype, std::nullopt}};
  return attrs;
}

// --- reference kernels ------------------------------------------------------------------

// The run-time shape given as the i64 vector argument `shape`.
nimble::Shape shape_arg(std::span<const Value> args) {
  const Tensor& t = ref::tensor_arg(args, 0);
  const std::vector<std::int64_t> dims = ref::i64_values(t, "shape");
  if (t.rank() != 1)
    throw_error(ErrorKind::invalid_argument, "shape must be an i64 vector, got {}",
                nimble::to_string(t.shape()));
  for (std::int64_t d : dims)
    if (d < 0)
      throw_error(ErrorKind::invalid_argument, "shape {} has a negative extent {}", to_string(dims),
                  d);
  return ref::make_shape(dims);
}

// A tensor of the attribute dtype with every element converted from `value`.
template <const OpDef& (*Op)()>
Tensor filled_tensor(std::span<const Value> args, const ir::Attrs& attrs, const Tensor& value) {
  Tensor out = ref::fresh(shape_arg(args), dtype_attr(Op(), attrs, "dtype"));
  ref::dispatch<ref::Accepts::any>(value.dtype(), "value", [&](auto from_tag) {
    using From = decltype(from_tag);
    ref::dispatch<ref::Accepts::any>(out.dtype(), "dtype", [&](auto to_tag) {
      using To = decltype(to_tag);
      const To element = ref::convert<To>(value.data<From>()[0]);
      To* po = out.data<To>();
      for (std::int64_t i = 0; i < out.numel(); ++i) po[i] = element;
    });
  });
  return out;
}

template <const OpDef& (*Op)(), std::int64_t kValue>
Value constant_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  return filled_tensor<Op>(args, attrs, Tensor::scalar(kValue));
}

Value full_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& value = ref::tensor_arg(args, 1);
  if (value.numel() != 1)
    throw_error(ErrorKind::invalid_argument, "value must be a scalar, got {}",
                nimble::to_string(value.shape()));
  return filled_tensor<&full>(args, attrs, value);
}

Value arange_kernel(std::span<const Value> args, const ir::Attrs&) {
  const Tensor& start_t = ref::tensor_arg(args, 0);
  for (std::size_t i = 0; i < 3; ++i) {
    const Tensor& t = ref::tensor_arg(args, i);
    if (t.dtype() != start_t.dtype() || t.numel() != 1)
      throw_error(ErrorKind::invalid_argument, "{} must be a scalar of {}, got {} {}",
                  kArangeArgs[i], to_string(start_t.dtype()), to_string(t.dtype()),
                  nimble::to_string(t.shape()));
  }
  Tensor out;
  ref::dispatch<ref::Accepts::numeric>(start_t.dtype(), "start", [&](auto tag) {
    using T = decltype(tag);
    const T start = start_t.data<T>()[0];
    const T stop = ref::tensor_arg(args, 1).data<T>()[0];
    const T step = ref::tensor_arg(args, 2).data<T>()[0];
    if (ref::widen(step) == 0) throw_error(ErrorKind::runtime_error, "arange: step is 0");
    if constexpr (ref::is_float_v<T>) {
      const double b = to_double(start), e = to_double(stop), s = to_double(step);
      if (!std::isfinite(b) || !std::isfinite(e) || !std::isfinite(s))
        throw_error(ErrorKind::runtime_error,
                    "arange: start {}, stop {} and step {} must be finite", b, e, s);
      const double count = std::max(0.0, std::ceil((e - b) / s));
      if (count > 9.0e18)
        throw_error(ErrorKind::runtime_error, "arange: {} elements are too many", count);
      out = ref::fresh(nimble::Shape{static_cast<std::int64_t>(count)}, start_t.dtype());
      T* po = out.data<T>();
      for (std::int64_t i = 0; i < out.numel(); ++i)
        po[i] = ref::from_double<T>(b + static_cast<double>(i) * s);
    } else {
      // |stop - start| and |step| fit in uint64 for every pair of T values.
      const auto ub = static_cast<std::uint64_t>(start), ue = static_cast<std::uint64_t>(stop);
      const auto us = static_cast<std::uint64_t>(step);
      std::uint64_t count = 0;
      if (step > 0 && stop > start) count = (ue - ub - 1) / us + 1;
      if (step < 0 && stop < start) count = (ub - ue - 1) / (0 - us) + 1;
      if (count > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        throw_error(ErrorKind::runtime_error, "arange: {} elements are too many", count);
      out = ref::fresh(nimble::Shape{static_cast<std::int64_t>(count)}, start_t.dtype());
      T* po = out.data<T>();
      for (std::int64_t i = 0; i < out.numel(); ++i)
        po[i] = ref::wrap<T>(ub + static_cast<std::uint64_t>(i) * us);
    }
  });
  return out;
}

Value nonzero_kernel(std::span<const Value> args, const ir::Attrs&) {
  const Tensor& x = ref::tensor_arg(args, 0);
  std::vector<std::int64_t> flats;
  ref::dispatch<ref::Accepts::any>(x.dtype(), "x", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i)
      if (ref::widen(in[i]) != 0) flats.push_back(i);
  });
  const auto rank = static_cast<std::int64_t>(x.rank());
  Tensor out = ref::fresh(nimble::Shape{static_cast<std::int64_t>(flats.size()), rank}, DType::i64);
  std::int64_t* po = out.data<std::int64_t>();
  for (std::int64_t flat : flats) {
    for (std::int64_t d = rank; d-- > 0;) {
      po[d] = flat % x.shape()[static_cast<std::size_t>(d)];
      flat /= x.shape()[static_cast<std::size_t>(d)];
    }
    po += rank;
  }
  return out;
}

Value shape_of_kernel(std::span<const Value> args, const ir::Attrs&) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::vector<std::int64_t> dims = ref::dims_of(x.shape());
  return Tensor::from_data(nimble::Shape{static_cast<std::int64_t>(dims.size())},
                           std::span<const std::int64_t>(dims));
}

// --- compute rules ------------------------------------------------------------------------

// The run-time extents held by the shape tensor (a static-length i64 vector).
std::vector<te::Expr> extents_of(const te::Tensor& shape, std::vector<te::Check>& checks) {
  const std::optional<std::int64_t> rank = te::as_int(shape.shape()[0]);
  NIMBLE_ASSERT(rank.has_value(), "shape has a static length (the type relation says so)");
  std::vector<te::Expr> extents;
  for (std::int64_t d = 0; d < *rank; ++d) {
    extents.push_back(shape({d}));
    te::add_check(checks, extents.back() >= 0, ErrorKind::invalid_argument,
                  fmt::format("shape has a negative extent at {}", d));
  }
  return extents;
}

template <const OpDef& (*Op)(), std::int64_t kValue>
std::vector<te::Tensor> constant_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const DType dtype = dtype_attr(Op(), attrs, "dtype");
  std::vector<te::Check> checks;
  std::vector<te::Expr> shape = extents_of(inputs[0], checks);
  return {te::compute(
      std::move(shape), std::string(Op().name),
      [&](std::span<const te::Var>) { return te::constant(dtype, static_cast<double>(kValue)); },
      std::move(checks))};
}

std::vector<te::Tensor> full_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const DType dtype = dtype_attr(full(), attrs, "dtype");
  const te::Tensor& value = inputs[1];
  std::vector<te::Check> checks;
  std::vector<te::Expr> shape = extents_of(inputs[0], checks);
  return {te::compute(
      std::move(shape), "full",
      [&](std::span<const te::Var>) { return te::cast(dtype, value({})); }, std::move(checks))};
}

// The element count of arange on floating point: ceil((stop - start) / step),
// at least 0, in the accumulator dtype.
te::Expr float_arange_count(const te::Expr& start, const te::Expr& stop, const te::Expr& step,
                            std::vector<te::Check>& checks) {
  const te::Expr inf = te::constant(start.dtype(), std::numeric_limits<double>::infinity());
  te::add_check(checks, te::abs(start) < inf && te::abs(stop) < inf && te::abs(step) < inf,
                ErrorKind::runtime_error, "start, stop and step must be finite");
  const te::Expr count = te::ceil((stop - start) / step);
  te::add_check(checks, count <= 9.0e18, ErrorKind::runtime_error, "too many elements");
  return te::maximum(te::cast(DType::i64, count), 0);
}

// The element count of arange on integers (as i64, exact for i8 and i32):
// ceil((stop - start) / step) for a non-empty range, with truncating
// division so that no step (not even INT64_MIN) overflows.
te::Expr int_arange_count(const te::Expr& start, const te::Expr& stop, const te::Expr& step,
                          DType dtype, std::vector<te::Check>& checks) {
  const te::Expr distance = stop - start;
  if (dtype == DType::i64)  // the distance itself may wrap
    te::add_check(checks,
                  te::select(stop > start, distance > 0,
                             te::select(stop < start,
                                        distance < 0 && te::ne(distance, te::lowest(DType::i64)),
                                        te::int_imm(1, DType::boolean))),
                  ErrorKind::runtime_error, "too many elements");
  const te::Expr up = te::select(stop > start, (distance - 1) / step + 1, 0);
  const te::Expr down = te::select(stop < start, (distance + 1) / step + 1, 0);
  return te::select(step > 0, up, down);
}

std::vector<te::Tensor> arange_rule(std::span<const te::Tensor> inputs, const ir::Attrs&) {
  const DType dtype = inputs[0].dtype();
  const bool floating = is_floating(dtype);
  // Floating point computes in the accumulator dtype, integers in i64.
  const DType wide = floating ? te::accumulator_dtype(dtype) : DType::i64;
  const te::Expr start = te::cast(wide, inputs[0]({}));
  const te::Expr stop = te::cast(wide, inputs[1]({}));
  const te::Expr step = te::cast(wide, inputs[2]({}));
  std::vector<te::Check> checks;
  te::add_check(checks, te::ne(step, te::constant(wide, 0)), ErrorKind::runtime_error, "step is 0");
  te::Expr count = floating ? float_arange_count(start, stop, step, checks)
                            : int_arange_count(start, stop, step, dtype, checks);
  return {te::compute(
      {std::move(count)}, "arange",
      [&](std::span<const te::Var> i) {
        if (floating) return te::cast(dtype, start + te::cast(wide, i[0]) * step);
        // Wrapping in the dtype gives the reference's start + i·step modulo 2^bits.
        return inputs[0]({}) + te::cast(dtype, i[0]) * inputs[2]({});
      },
      std::move(checks))};
}

}  // namespace

const OpDef& zeros() {
  static const OpDef def{.name = "zeros",
                         .arg_names = kShape,
                         .attrs = dtype_attrs(),
                         .type_relation = &filled<&zeros>,
                         .pattern = ir::OpPattern::injective,
                         .compute = &constant_rule<&zeros, 0>,
                         .reference = &constant_kernel<&zeros, 0>,
                         .summary = "A tensor of zeros of a run-time shape.",
                         .example = {"%shape: i64[2]", "zeros(%shape, dtype=f32)"}};
  return def;
}

const OpDef& ones() {
  static const OpDef def{.name = "ones",
                         .arg_names = kShape,
                         .attrs = dtype_attrs(),
                         .type_relation = &filled<&ones>,
                         .pattern = ir::OpPattern::injective,
                         .compute = &constant_rule<&ones, 1>,
                         .reference = &constant_kernel<&ones, 1>,
                         .summary = "A tensor of ones of a run-time shape.",
                         .example = {"%shape: i64[2]", "ones(%shape, dtype=f32)"}};
  return def;
}

const OpDef& full() {
  static const OpDef def{.name = "full",
                         .arg_names = kFullArgs,
                         .attrs = dtype_attrs(),
                         .type_relation = &filled<&full>,
                         .pattern = ir::OpPattern::injective,
                         .compute = &full_rule,
                         .reference = &full_kernel,
                         .summary = "A tensor of a run-time shape filled with a scalar value.",
                         .example = {"%shape: i64[2], %value: f32[]",
                                     "full(%shape, %value, dtype=f32)"}};
  return def;
}

const OpDef& arange() {
  static const OpDef def{.name = "arange",
                         .arg_names = kArangeArgs,
                         .attrs = {},
                         .type_relation = &arange_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &arange_rule,
                         .reference = &arange_kernel,
                         .summary = "start, start + step, ... up to stop (excluded), of the "
                                    "scalars' dtype.",
                         .example = {"%stop: i64[]", "arange(0i64, %stop, 1i64)"}};
  return def;
}

const OpDef& nonzero() {
  // Opaque: the output compacts the positions of non-zero elements, a
  // data-dependent scan rather than a loop nest over the output.
  static const OpDef def{.name = "nonzero",
                         .arg_names = kX,
                         .attrs = {},
                         .type_relation = &nonzero_relation,
                         .pattern = ir::OpPattern::opaque,
                         .compute = nullptr,
                         .reference = &nonzero_kernel,
                         .summary = "The indices of the nonzero elements (NaN counts), row-major: "
                                    "i64[count, rank].",
                         .example = {"%x: f32[n, 4]", "nonzero(%x)"}};
  return def;
}

const OpDef& shape_of() {
  // Opaque: the VM reads a tensor's shape itself (ShapeOf); no kernel runs.
  static const OpDef def{.name = "shape_of",
                         .arg_names = kX,
                         .attrs = {},
                         .type_relation = &shape_of_relation,
                         .pattern = ir::OpPattern::opaque,
                         .compute = nullptr,
                         .reference = &shape_of_kernel,
                         .summary = "The shape of x at run time: i64[rank].",
                         .example = {"%x: f32[n, 4]", "shape_of(%x)"}};
  return def;
}

}  // namespace nimble::ops
