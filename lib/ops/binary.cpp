// Binary ops with numpy broadcasting (broadcast.hpp): (a, b) of one dtype.
// Arithmetic takes numeric dtypes and keeps it; comparisons take any dtype
// and give bool; logical_and/or take bool. where(cond, x, y) broadcasts all three.
#include "ops/broadcast.hpp"
#include "ops/ops.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kAB[] = {"a", "b"};
constexpr std::string_view kWhereArgs[] = {"cond", "x", "y"};

// The broadcast shape of a and b, which must have one dtype.
template <const OpDef& (*Op)()>
Shape broadcast_pair(std::span<const Type> args) {
  const TensorTypeNode& a = expect_tensor(args, 0, Op());
  const TensorTypeNode& b = expect_tensor(args, 1, Op());
  expect_same_dtype(a, "a", b, "b");
  const BroadcastOperand operands[] = {{"a", &a}, {"b", &b}};
  return broadcast_shapes(operands);
}

template <const OpDef& (*Op)()>
Type arithmetic(std::span<const Type> args, const ir::Attrs&) {
  expect_numeric(expect_tensor(args, 0, Op()), "a");
  Shape shape = broadcast_pair<Op>(args);
  return ir::tensor_type(std::move(shape), args[0].as<TensorTypeNode>()->dtype);
}

template <const OpDef& (*Op)()>
Type comparison(std::span<const Type> args, const ir::Attrs&) {
  return ir::tensor_type(broadcast_pair<Op>(args), DType::boolean);
}

template <const OpDef& (*Op)()>
Type logical(std::span<const Type> args, const ir::Attrs&) {
  expect_dtype(expect_tensor(args, 0, Op()), "a", DType::boolean);
  expect_dtype(expect_tensor(args, 1, Op()), "b", DType::boolean);
  return ir::tensor_type(broadcast_pair<Op>(args), DType::boolean);
}

Type where_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& cond = expect_tensor(args, 0, where());
  const TensorTypeNode& x = expect_tensor(args, 1, where());
  const TensorTypeNode& y = expect_tensor(args, 2, where());
  expect_dtype(cond, "cond", DType::boolean);
  expect_same_dtype(x, "x", y, "y");
  const BroadcastOperand operands[] = {{"cond", &cond}, {"x", &x}, {"y", &y}};
  return ir::tensor_type(broadcast_shapes(operands), x.dtype);
}

}  // namespace

const OpDef& add() {
  static const OpDef def{
      .name = "add", .arg_names = kAB, .attrs = {}, .type_relation = &arithmetic<&add>};
  return def;
}

const OpDef& sub() {
  static const OpDef def{
      .name = "sub", .arg_names = kAB, .attrs = {}, .type_relation = &arithmetic<&sub>};
  return def;
}

const OpDef& mul() {
  static const OpDef def{
      .name = "mul", .arg_names = kAB, .attrs = {}, .type_relation = &arithmetic<&mul>};
  return def;
}

const OpDef& div() {
  static const OpDef def{
      .name = "div", .arg_names = kAB, .attrs = {}, .type_relation = &arithmetic<&div>};
  return def;
}

const OpDef& maximum() {
  static const OpDef def{
      .name = "maximum", .arg_names = kAB, .attrs = {}, .type_relation = &arithmetic<&maximum>};
  return def;
}

const OpDef& minimum() {
  static const OpDef def{
      .name = "minimum", .arg_names = kAB, .attrs = {}, .type_relation = &arithmetic<&minimum>};
  return def;
}

const OpDef& power() {
  static const OpDef def{
      .name = "power", .arg_names = kAB, .attrs = {}, .type_relation = &arithmetic<&power>};
  return def;
}

const OpDef& equal() {
  static const OpDef def{
      .name = "equal", .arg_names = kAB, .attrs = {}, .type_relation = &comparison<&equal>};
  return def;
}

const OpDef& not_equal() {
  static const OpDef def{
      .name = "not_equal", .arg_names = kAB, .attrs = {}, .type_relation = &comparison<&not_equal>};
  return def;
}

const OpDef& less() {
  static const OpDef def{
      .name = "less", .arg_names = kAB, .attrs = {}, .type_relation = &comparison<&less>};
  return def;
}

const OpDef& less_equal() {
  static const OpDef def{.name = "less_equal",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &comparison<&less_equal>};
  return def;
}

const OpDef& greater() {
  static const OpDef def{
      .name = "greater", .arg_names = kAB, .attrs = {}, .type_relation = &comparison<&greater>};
  return def;
}

const OpDef& greater_equal() {
  static const OpDef def{.name = "greater_equal",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &comparison<&greater_equal>};
  return def;
}

const OpDef& logical_and() {
  static const OpDef def{.name = "logical_and",
                         .arg_names = kAB,
                         .attrs = {},
                         .type_relation = &logical<&logical_and>};
  return def;
}

const OpDef& logical_or() {
  static const OpDef def{
      .name = "logical_or", .arg_names = kAB, .attrs = {}, .type_relation = &logical<&logical_or>};
  return def;
}

const OpDef& where() {
  static const OpDef def{
      .name = "where", .arg_names = kWhereArgs, .attrs = {}, .type_relation = &where_relation};
  return def;
}

}  // namespace nimble::ops
