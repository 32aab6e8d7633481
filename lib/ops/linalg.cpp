// Linear algebra: dense (x·Wᵀ + b), matmul and batch_matmul (with transposes
// and a broadcast batch). Reduction dims must be equal; the result keeps the
// more specific of two equal dims.
#include "ops/broadcast.hpp"
#include "ops/ops.hpp"
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

}  // namespace

const OpDef& dense() {
  static const OpDef def{
      .name = "dense", .arg_names = kDenseArgs, .attrs = {}, .type_relation = &dense_relation};
  return def;
}

const OpDef& matmul() {
  static const OpDef def{.name = "matmul",
                         .arg_names = kAB,
                         .attrs = transpose_attrs(),
                         .type_relation = &matmul_relation};
  return def;
}

const OpDef& batch_matmul() {
  static const OpDef def{.name = "batch_matmul",
                         .arg_names = kAB,
                         .attrs = transpose_attrs(),
                         .type_relation = &batch_matmul_relation};
  return def;
}

}  // namespace nimble::ops
