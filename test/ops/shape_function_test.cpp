// Shape functions agree with the shapes the reference kernels produce, for
// every op, and report run-time shape mismatches.
#include "ops/shape_function.hpp"

#include <catch2/catch.hpp>

#include <set>

#include "ops/ops.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using ir::Attrs;
using Ints = std::vector<std::int64_t>;

namespace {

struct Call {
  const ir::OpDef* op;
  std::vector<Value> args;
  Attrs attrs;
};

Tensor f(Shape s) { return Tensor::full(std::move(s), 0.5, DType::f32); }
Tensor b(Shape s) { return Tensor::full(std::move(s), 1, DType::boolean); }
Tensor ints(Shape s, std::vector<std::int64_t> v) {
  return Tensor::from_data<std::int64_t>(std::move(s), v);
}
Tensor scalar(float v) { return Tensor::scalar(v); }

std::vector<Shape> kernel_shapes(const Value& v) {
  if (v.is_tensor()) return {v.tensor().shape()};
  std::vector<Shape> out;
  for (const Value& field : v.fields())
    for (Shape& s : kernel_shapes(field)) out.push_back(std::move(s));
  return out;
}

std::vector<Call> one_call_per_op() {
  std::vector<Call> calls;
  // neg, abs and every element-wise op of one floating-point operand.
  for (const ir::OpDef* op : {&ops::neg(), &ops::abs()}) calls.push_back({op, {f({2, 3})}, {}});
  for (const ir::OpDef* op : ir::all_ops())
    if (op->float_inputs) calls.push_back({op, {f({2, 3})}, {}});
  calls.push_back({&ops::cast(), {f({2, 3})}, {{"dtype", DType::i32}}});
  calls.push_back({&ops::logical_not(), {b({2})}, {}});
  for (const ir::OpDef* op : {&ops::add(), &ops::sub(), &ops::mul(), &ops::div(), &ops::maximum(),
                              &ops::minimum(), &ops::power(), &ops::equal(), &ops::not_equal(),
                              &ops::less(), &ops::less_equal(), &ops::greater(),
                              &ops::greater_equal()})
    calls.push_back({op, {f({2, 3}), f({1, 3})}, {}});
  calls.push_back({&ops::logical_and(), {b({2, 1}), b({3})}, {}});
  calls.push_back({&ops::logical_or(), {b({2}), b({2})}, {}});
  calls.push_back({&ops::where(), {b({2, 1}), f({3}), f({2, 3})}, {}});
  for (const ir::OpDef* op : {&ops::sum(), &ops::mean(), &ops::max(), &ops::min()})
    calls.push_back({op, {f({2, 3, 4})}, {{"axes", Ints{1}}, {"keepdims", true}}});
  calls.push_back({&ops::argmax(), {f({2, 3})}, {{"axis", std::int64_t{1}}}});
  calls.push_back({&ops::softmax(), {f({2, 3})}, {}});
  calls.push_back({&ops::log_softmax(), {f({2, 3})}, {}});
  calls.push_back({&ops::layer_norm(), {f({2, 4}), f({4}), f({4})}, {}});
  calls.push_back({&ops::dense(), {f({2, 4}), f({3, 4}), f({3})}, {}});
  calls.push_back({&ops::matmul(), {f({4, 2}), f({4, 3})}, {{"transpose_a", true}}});
  calls.push_back({&ops::batch_matmul(), {f({2, 2, 4}), f({1, 4, 3})}, {}});
  calls.push_back({&ops::reshape(), {f({2, 6})}, {{"newshape", Ints{3, -1}}}});
  calls.push_back({&ops::transpose(), {f({2, 3, 4})}, {{"axes", Ints{2, 0, 1}}}});
  calls.push_back({&ops::expand_dims(), {f({2, 3})}, {{"axis", std::int64_t{1}}}});
  calls.push_back({&ops::squeeze(), {f({1, 3, 1})}, {{"axes", Ints{}}}});
  calls.push_back(
      {&ops::concatenate(), {Value::tuple({f({2, 3}), f({1, 3})})}, {{"axis", std::int64_t{0}}}});
  calls.push_back(
      {&ops::split(), {f({4, 6})}, {{"sections", std::int64_t{2}}, {"axis", std::int64_t{1}}}});
  calls.push_back({&ops::strided_slice(),
                   {f({10, 4})},
                   {{"begin", Ints{2}}, {"end", Ints{8}}, {"strides", Ints{2}}}});
  calls.push_back(
      {&ops::dynamic_strided_slice(), {f({10, 4}), ints({1}, {2}), ints({1}, {7})}, {}});
  calls.push_back({&ops::take(), {f({5, 3}), ints({2}, {0, 4})}, {}});
  calls.push_back({&ops::embedding(), {f({5, 3}), ints({2, 2}, {0, 1, 2, 3})}, {}});
  calls.push_back({&ops::zeros(), {ints({2}, {2, 3})}, {{"dtype", DType::f32}}});
  calls.push_back({&ops::ones(), {ints({1}, {4})}, {{"dtype", DType::i64}}});
  calls.push_back({&ops::full(), {ints({2}, {1, 2}), scalar(7)}, {{"dtype", DType::f32}}});
  calls.push_back({&ops::arange(), {scalar(0), scalar(5), scalar(2)}, {}});
  calls.push_back({&ops::nonzero(), {Tensor::from_data<float>({3}, {0, 1, 2})}, {}});
  calls.push_back({&ops::shape_of(), {f({2, 3})}, {}});
  calls.push_back({&ops::device_copy(), {f({2, 3})}, {{"src", std::string("cpu")}, {"dst", std::string("cuda:0")}}});
  const Value list = Value::adt(1, {f({3}), Value::adt(1, {f({3}), Value::adt(0, {})})});
  calls.push_back({&ops::stack(), {list}, {}});
  calls.push_back(
      {&ops::dynamic_update_slice(), {f({5, 3}), f({2, 3}), Tensor::scalar<std::int64_t>(1)}, {}});
  return calls;
}

}  // namespace

TEST_CASE("shape functions give the shapes the reference kernels produce", "[ops]") {
  std::set<const ir::OpDef*> covered;
  for (const Call& call : one_call_per_op()) {
    INFO("op " << call.op->name);
    covered.insert(call.op);
    const std::vector<Shape> expected = kernel_shapes(call.op->reference(call.args, call.attrs));
    CHECK(ops::output_shapes(*call.op, call.args, call.attrs) == expected);
  }
  for (const ir::OpDef* op : ir::all_ops()) {
    INFO("op " << op->name << " has no case in one_call_per_op()");
    CHECK(covered.count(op) == 1);
  }
}

TEST_CASE("shape functions report run-time shape mismatches", "[ops]") {
  const std::vector<Value> args{f({2, 3}), f({4, 3})};
  CHECK_NIMBLE_ERROR(ops::output_shapes(ops::add(), args, {}), ErrorKind::invalid_argument,
                     "add: a f32[2, 3] and b f32[4, 3] do not broadcast: dim 0 is 2 vs 4");
  const std::vector<Value> bad_take{f({5, 3}), ints({1}, {9})};
  // Index values are the kernel's to check; the shape does not depend on them.
  CHECK(ops::output_shapes(ops::take(), bad_take, {}) == std::vector<Shape>{Shape{1, 3}});
  CHECK(ops::has_data_dependent_shape(ops::nonzero()));
  CHECK_FALSE(ops::has_data_dependent_shape(ops::dense()));
}
