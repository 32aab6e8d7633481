// Linear algebra: dense (x·Wᵀ + b), matmul and batch_matmul (with transposes
// and a broadcast batch). Reduction dims must be equal; the result keeps the
// more specific of two equal dims.
//
// Reference semantics: products run on Eigen over row-major maps. Floating
// point is multiplied in double and rounded once to the dtype; integers are
// multiplied modulo 2^64 and wrap to their dtype (two's complement, as an
// exact integer product would). Reduction dims (k), bias length and the batch
// broadcast are checked at run time: a mismatch is Error(invalid_argument)
// naming both shapes. A k of 0 gives zeros (plus bias).
//
// Compute rules (pattern out_elemwise_fusable): a sum over k of products in
// te::accumulator_dtype (f32 for f16/bf16), then an elementwise stage that
// adds dense's bias and rounds to the dtype (the stage a fused epilogue joins).
// They check the run-time k (and bias length, batch broadcast) as the
// reference does.
#include <Eigen/Core>

#include "ops/broadcast.hpp"
#include "ops/compute.hpp"
#include "ops/ops.hpp"
#include "ops/reference_util.hpp"
#include "support/check.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kDenseArgs[] = {"x", "weight", "bias"};
constexpr std::string_view kAB[] = {"a", "b"};

Type dense_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& x = expect_tensor(args, 0, dense());
  const TensorTypeNode& weight = expect_tensor(args, 1, dense());
  const TensorTypeNode& bias = expect_tensor(args, 2, dense());
  expect_numeric(x, "x");
  expect_same_dtype(x, "x", weight, "weight");
  expect_same_dtype(x, "x", bias, "bias");
  expect_min_rank(x, "x", 1);
  expect_rank(weight, "weight", 2);
  expect_rank(bias, "bias", 1);
  if (!merge_equal_dim(x.shape.back(), weight.shape[1]))
    throw_error(ErrorKind::type_error, "x has {} columns but weight expects {}",
                ir::to_string(x.shape.back()), ir::to_string(weight.shape[1]));
  std::optional<Dim> n = merge_equal_dim(weight.shape[0], bias.shape[0]);
  if (!n)
    throw_error(ErrorKind::type_error, "bias has {} elements but weight has {} rows",
                ir::to_string(bias.shape[0]), ir::to_string(weight.shape[0]));
  Shape shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(*n);
  return ir::tensor_type(std::move(shape), x.dtype);
}

// The result dims [m, n] of a·b over the last two dims of a and b (transposed
// as the attributes say), checking that their reduction dims agree.
template <const OpDef& (*Op)()>
Shape matmul_dims(const TensorTypeNode& a, const TensorTypeNode& b, const ir::Attrs& attrs) {
  const bool ta = bool_attr(Op(), attrs, "transpose_a");
  const bool tb = bool_attr(Op(), attrs, "transpose_b");
  const std::size_t r = a.rank();
  const Dim& m = a.shape[r - (ta ? 1 : 2)];
  const Dim& ka = a.shape[r - (ta ? 2 : 1)];
  const Dim& kb = b.shape[r - (tb ? 1 : 2)];
  const Dim& n = b.shape[r - (tb ? 2 : 1)];
  if (!merge_equal_dim(ka, kb))
    throw_error(ErrorKind::type_error, "a {} has k = {} but b {} has k = {}", to_string(a),
                ir::to_string(ka), to_string(b), ir::to_string(kb));
  return {m, n};
}

template <const OpDef& (*Op)()>
std::pair<const TensorTypeNode&, const TensorTypeNode&> matmul_operands(std::span<const Type> args,
                                                                        std::size_t rank) {
  const TensorTypeNode& a = expect_tensor(args, 0, Op());
  const TensorTypeNode& b = expect_tensor(args, 1, Op());
  expect_numeric(a, "a");
  expect_same_dtype(a, "a", b, "b");
  expect_rank(a, "a", rank);
  expect_rank(b, "b", rank);
  return {a, b};
}

Type matmul_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  auto [a, b] = matmul_operands<&matmul>(args, 2);
  return ir::tensor_type(matmul_dims<&matmul>(a, b, attrs), a.dtype);
}

Type batch_matmul_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  auto [a, b] = matmul_operands<&batch_matmul>(args, 3);
  std::optional<Dim> batch = broadcast_dim(a.shape[0], b.shape[0]);
  if (!batch)
    throw_error(ErrorKind::type_error, "a {} and b {} do not broadcast: dim 0 is {} vs {}",
                to_string(a), to_string(b), ir::to_string(a.shape[0]), ir::to_string(b.shape[0]));
  Shape shape = matmul_dims<&batch_matmul>(a, b, attrs);
  shape.insert(shape.begin(), *batch);
  return ir::tensor_type(std::move(shape), a.dtype);
}

std::span<const ir::AttrSpec> transpose_attrs() {
  static const ir::AttrSpec attrs[] = {{"transpose_a", ir::AttrKind::boolean, false},
                                       {"transpose_b", ir::AttrKind::boolean, false}};
  return attrs;
}

// --- reference kernels ------------------------------------------------------------------

// The type products accumulate in: double for floating point, uint64 (exact
// modulo 2^64) for integers.
template <class T>
using Acc = std::conditional_t<ref::is_float_v<T>, double, std::uint64_t>;
template <class T>
using AccMatrix = Eigen::Matrix<Acc<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class T>
Acc<T> widen_acc(T v) {
  if constexpr (ref::is_float_v<T>)
    return to_double(v);
  else
    return static_cast<std::uint64_t>(v);
}

template <class T>
T narrow_acc(Acc<T> v) {
  if constexpr (ref::is_float_v<T>)
    return ref::from_double<T>(v);
  else
    return ref::wrap<T>(v);
}

// The rows × cols row-major matrix at `data`, widened.
template <class T>
AccMatrix<T> load_matrix(const T* data, std::int64_t rows, std::int64_t cols) {
  AccMatrix<T> m(rows, cols);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) m(i, j) = widen_acc(data[i * cols + j]);
  return m;
}

template <class T>
void store_matrix(const AccMatrix<T>& m, T* out) {
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) out[i * m.cols() + j] = narrow_acc<T>(m(i, j));
}

// op(a) · op(b) where op transposes as asked; a is stored [m, k] (or [k, m]
// when ta), b [k, n] (or [n, k] when tb).
template <class T>
AccMatrix<T> product(const T* a, const T* b, std::int64_t m, std::int64_t k, std::int64_t n,
                     bool ta, bool tb) {
  const AccMatrix<T> ma = ta ? load_matrix(a, k, m) : load_matrix(a, m, k);
  const AccMatrix<T> mb = tb ? load_matrix(b, n, k) : load_matrix(b, k, n);
  AccMatrix<T> c = AccMatrix<T>::Zero(m, n);
  if (m == 0 || k == 0 || n == 0) return c;
  if (ta && tb)
    c.noalias() = ma.transpose() * mb.transpose();
  else if (ta)
    c.noalias() = ma.transpose() * mb;
  else if (tb)
    c.noalias() = ma * mb.transpose();
  else
    c.noalias() = ma * mb;
  return c;
}

void check_same_dtype(const Tensor& a, std::string_view a_name, const Tensor& b,
                      std::string_view b_name) {
  if (a.dtype() != b.dtype())
    throw_error(ErrorKind::type_error, "{} is {} but {} is {}", a_name, to_string(a.dtype()),
                b_name, to_string(b.dtype()));
}

void check_rank(const Tensor& t, std::string_view name, std::size_t rank) {
  if (t.rank() != rank)
    throw_error(ErrorKind::invalid_argument, "{} must have rank {}, got {}", name, rank,
                to_string(t.shape()));
}

Value dense_kernel(std::span<const Value> args, const ir::Attrs&) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const Tensor& weight = ref::tensor_arg(args, 1);
  const Tensor& bias = ref::tensor_arg(args, 2);
  check_same_dtype(x, "x", weight, "weight");
  check_same_dtype(x, "x", bias, "bias");
  if (x.rank() < 1)
    throw_error(ErrorKind::invalid_argument, "x must have rank >= 1, got {}", to_string(x.shape()));
  check_rank(weight, "weight", 2);
  check_rank(bias, "bias", 1);
  const std::int64_t k = x.dim(-1);
  const std::int64_t n = weight.dim(0);
  if (weight.dim(1) != k)
    throw_error(ErrorKind::invalid_argument, "x {} has {} columns but weight {} expects {}",
                to_string(x.shape()), k, to_string(weight.shape()), weight.dim(1));
  if (bias.dim(0) != n)
    throw_error(ErrorKind::invalid_argument, "bias {} has {} elements but weight {} has {} rows",
                to_string(bias.shape()), bias.dim(0), to_string(weight.shape()), n);
  std::vector<std::int64_t> dims = ref::dims_of(x.shape());
  dims.back() = n;
  Tensor out = ref::fresh(ref::make_shape(dims), x.dtype());
  std::int64_t rows = 1;  // x as a [rows, k] matrix
  for (std::size_t d = 0; d + 1 < x.rank(); ++d) rows *= x.shape()[d];
  ref::dispatch<ref::Accepts::numeric>(x.dtype(), "x", [&](auto tag) {
    using T = decltype(tag);
    AccMatrix<T> y = product(x.data<T>(), weight.data<T>(), rows, k, n, false, true);
    const T* pb = bias.data<T>();
    for (Eigen::Index j = 0; j < y.cols(); ++j) y.col(j).array() += widen_acc(pb[j]);
    store_matrix(y, out.data<T>());
  });
  return out;
}

// The [m, k, n] of op(a) · op(b) over the last two dims of a and b, checked.
struct ProductDims {
  std::int64_t m, k, n;
};

ProductDims product_dims(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const std::int64_t m = a.dim(ta ? -1 : -2);
  const std::int64_t ka = a.dim(ta ? -2 : -1);
  const std::int64_t kb = b.dim(tb ? -1 : -2);
  const std::int64_t n = b.dim(tb ? -2 : -1);
  if (ka != kb)
    throw_error(ErrorKind::invalid_argument, "a {} has k = {} but b {} has k = {}",
                to_string(a.shape()), ka, to_string(b.shape()), kb);
  return {m, ka, n};
}

template <const OpDef& (*Op)()>
Value matmul_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  constexpr bool kBatched = Op == &batch_matmul;
  const std::size_t rank = kBatched ? 3 : 2;
  const Tensor& a = ref::tensor_arg(args, 0);
  const Tensor& b = ref::tensor_arg(args, 1);
  check_same_dtype(a, "a", b, "b");
  check_rank(a, "a", rank);
  check_rank(b, "b", rank);
  const bool ta = bool_attr(Op(), attrs, "transpose_a");
  const bool tb = bool_attr(Op(), attrs, "transpose_b");
  const ProductDims dims = product_dims(a, b, ta, tb);
  const std::int64_t m = dims.m, k = dims.k, n = dims.n;
  std::int64_t batch = 1;
  if (kBatched) {
    batch = a.dim(0);
    if (a.dim(0) != b.dim(0) && a.dim(0) != 1 && b.dim(0) != 1)
      throw_error(ErrorKind::invalid_argument, "a {} and b {} do not broadcast: dim 0 is {} vs {}",
                  to_string(a.shape()), to_string(b.shape()), a.dim(0), b.dim(0));
    if (a.dim(0) == 1) batch = b.dim(0);
  }
  Tensor out = ref::fresh(kBatched ? nimble::Shape{batch, m, n} : nimble::Shape{m, n}, a.dtype());
  ref::dispatch<ref::Accepts::numeric>(a.dtype(), "a", [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t a_step = a.dim(0) == 1 || !kBatched ? 0 : m * k;
    const std::int64_t b_step = b.dim(0) == 1 || !kBatched ? 0 : k * n;
    for (std::int64_t i = 0; i < batch; ++i) {
      const AccMatrix<T> c =
          product(a.data<T>() + i * a_step, b.data<T>() + i * b_step, m, k, n, ta, tb);
      store_matrix(c, out.data<T>() + i * m * n);
    }
  });
  return out;
}

// --- compute rules ------------------------------------------------------------------------

// A check that two extents are equal at run time, unless they provably are.
void expect_equal(std::vector<te::Check>& checks, const te::Expr& a, const te::Expr& b,
                  std::string message) {
  te::add_check(checks, te::eq(a, b), ErrorKind::invalid_argument, std::move(message));
}

// out[i] = Σ_k product(i, k) in the accumulator dtype, then `epilogue(acc, i)`
// rounded to `dtype` (the sum alone when that is the identity).
template <class Product, class Epilogue>
std::vector<te::Tensor> product_stages(const std::string& name, std::vector<te::Expr> shape,
                                       const te::Expr& k, DType dtype, Product product,
                                       Epilogue epilogue, std::vector<te::Check> checks,
                                       bool has_epilogue) {
  const DType acc = te::accumulator_dtype(dtype);
  const bool one_stage = !has_epilogue && acc == dtype;
  const te::Tensor sum = te::compute(
      shape, one_stage ? name : name + ".acc",
      [&](std::span<const te::Var> i) {
        const te::IterVar kk = te::reduce_axis(k, "k");
        return te::reduce_sum(product(i, kk.var, acc), {kk});
      },
      std::move(checks));
  if (one_stage) return {sum};
  return {te::compute(shape, name, [&](std::span<const te::Var> i) {
    return te::cast(dtype, epilogue(sum(te::as_indices(i)), i, acc));
  })};
}

std::vector<te::Tensor> dense_rule(std::span<const te::Tensor> inputs, const ir::Attrs&) {
  const te::Tensor& x = inputs[0];
  const te::Tensor& weight = inputs[1];
  const te::Tensor& bias = inputs[2];
  const te::Expr& k = x.shape().back();
  std::vector<te::Check> checks;
  expect_equal(checks, weight.shape()[1], k, "x's columns do not match weight's");
  expect_equal(checks, bias.shape()[0], weight.shape()[0], "bias does not match weight's rows");
  std::vector<te::Expr> shape(x.shape().begin(), x.shape().end() - 1);
  shape.push_back(weight.shape()[0]);
  return product_stages(
      "dense", shape, k, x.dtype(),
      [&](std::span<const te::Var> i, const te::Var& kk, DType acc) {
        std::vector<te::Expr> xi(i.begin(), i.end() - 1);
        xi.push_back(kk);
        return te::cast(acc, x(std::move(xi))) * te::cast(acc, weight({i.back(), kk}));
      },
      [&](const te::Expr& sum, std::span<const te::Var> i, DType acc) {
        return sum + te::cast(acc, bias({i.back()}));
      },
      std::move(checks), true);
}

template <const OpDef& (*Op)()>
std::vector<te::Tensor> matmul_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  constexpr bool kBatched = Op == &batch_matmul;
  const te::Tensor& a = inputs[0];
  const te::Tensor& b = inputs[1];
  const bool ta = bool_attr(Op(), attrs, "transpose_a");
  const bool tb = bool_attr(Op(), attrs, "transpose_b");
  const std::size_t r = a.ndim();  // the matrix dims are r - 2 and r - 1
  const te::Expr& m = a.shape()[r - (ta ? 1 : 2)];
  const te::Expr& ka = a.shape()[r - (ta ? 2 : 1)];
  const te::Expr& kb = b.shape()[r - (tb ? 1 : 2)];
  const te::Expr& n = b.shape()[r - (tb ? 2 : 1)];
  std::vector<te::Check> checks;
  expect_equal(checks, ka, kb, "a's k does not match b's");
  std::vector<te::Expr> shape{m, n};
  te::Expr batch = 1;
  if (kBatched) {
    BroadcastExtent merged = broadcast_extent(a.shape()[0], b.shape()[0]);
    te::add_check(checks, merged.ok, ErrorKind::invalid_argument,
                  "a and b do not broadcast at dim 0");
    batch = merged.extent;
    shape.insert(shape.begin(), batch);
  }
  return product_stages(
      std::string(Op().name), shape, ka, a.dtype(),
      [&](std::span<const te::Var> i, const te::Var& k, DType acc) {
        const te::Var& row = i[r - 2];
        const te::Var& col = i[r - 1];
        std::vector<te::Expr> ai =
            ta ? std::vector<te::Expr>{k, row} : std::vector<te::Expr>{row, k};
        std::vector<te::Expr> bi =
            tb ? std::vector<te::Expr>{col, k} : std::vector<te::Expr>{k, col};
        if (kBatched) {
          ai.insert(ai.begin(), broadcast_index(a.shape()[0], batch, i[0]));
          bi.insert(bi.begin(), broadcast_index(b.shape()[0], batch, i[0]));
        }
        return te::cast(acc, a(std::move(ai))) * te::cast(acc, b(std::move(bi)));
      },
      [](const te::Expr& sum, std::span<const te::Var>, DType) { return sum; }, std::move(checks),
      false);
}

}  // namespace

const OpDef& dense() {
  static const OpDef def{.name = "dense",
                         .arg_names = kDenseArgs,
                         .attrs = {},
                         .type_relation = &dense_relation,
                         .pattern = ir::OpPattern::out_elemwise_fusable,
                         .compute = &dense_rule,
                         .reference = &dense_kernel,
                         .summary = "x . weight^T + bias, weight stored [out, in] (PyTorch's "
                                    "Linear).",
                         .example = {"%x: f32[n, 768], %w: f32[3072, 768], %b: f32[3072]",
                                     "dense(%x, %w, %b)"}};
  return def;
}

const OpDef& matmul() {
  static const OpDef def{.name = "matmul",
                         .arg_names = kAB,
                         .attrs = transpose_attrs(),
                         .type_relation = &matmul_relation,
                         .pattern = ir::OpPattern::out_elemwise_fusable,
                         .compute = &matmul_rule<&matmul>,
                         .reference = &matmul_kernel<&matmul>,
                         .summary = "a . b over the last two dims (each optionally transposed).",
                         .example = {"%a: f32[n, 64], %b: f32[64, 32]",
                                     "matmul(%a, %b, transpose_a=false, transpose_b=false)"}};
  return def;
}

const OpDef& batch_matmul() {
  static const OpDef def{.name = "batch_matmul",
                         .arg_names = kAB,
                         .attrs = transpose_attrs(),
                         .type_relation = &batch_matmul_relation,
                         .pattern = ir::OpPattern::out_elemwise_fusable,
                         .compute = &matmul_rule<&batch_matmul>,
                         .reference = &matmul_kernel<&batch_matmul>,
                         .summary = "a . b per batch: [B, m, k] . [B, k, n]; B broadcasts.",
                         .example = {"%a: f32[12, n, 64], %b: f32[12, n, 64]",
                                     "batch_matmul(%a, %b, transpose_a=false, transpose_b=true)"}};
  return def;
}

}  // namespace nimble::ops
