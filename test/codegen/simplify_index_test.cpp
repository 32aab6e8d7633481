// Index simplification (codegen/simplify_index.hpp): golden forms of the
// reshape and transpose indices it exists for, the cases it must leave alone,
// and random linear indices checked against their value at random points.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/cpu/cpu_kernel.hpp"
#include "codegen/simplify_index.hpp"
#include "ops/compute.hpp"
#include "ops/ops.hpp"

namespace nimble {
namespace {

using codegen::simplify_index;
using codegen::VarBounds;
using te::Expr;

std::int64_t floor_div(std::int64_t n, std::int64_t d) {
  const std::int64_t q = n / d;
  return (n % d != 0 && (n < 0) != (d < 0)) ? q - 1 : q;
}

// The value of an integer index expression with `at` bound.
std::int64_t value_of(const Expr& e, const std::unordered_map<const te::VarNode*, std::int64_t>& at) {
  if (const auto c = te::as_int(e)) return *c;
  if (const auto* v = e.as<te::VarNode>()) return at.at(v);
  const auto* b = e.as<te::BinaryNode>();
  REQUIRE(b != nullptr);
  const std::int64_t x = value_of(b->a, at), y = value_of(b->b, at);
  switch (b->op) {
    case te::BinaryOp::add: return x + y;
    case te::BinaryOp::sub: return x - y;
    case te::BinaryOp::mul: return x * y;
    case te::BinaryOp::floordiv: return floor_div(x, y);
    case te::BinaryOp::floormod: return x - floor_div(x, y) * y;
    default: FAIL("unexpected operator in an index"); return 0;
  }
}

TEST_CASE("simplify_index: a reshape's unravelled index through a transpose becomes the axes", "[jit]") {
  const te::Var i("i"), h("h"), d("d");
  const VarBounds bounds{{h.node(), 11}, {d.node(), 63}};  // i: unbounded (a dynamic dim)
  const Expr flat = (i * 12 + h) * 64 + d;
  CHECK(te::to_string(simplify_index(te::floordiv(flat, te::int_imm(768)), bounds)) == "i");
  CHECK(te::to_string(simplify_index(te::floormod(flat, te::int_imm(768)), bounds)) == "((h * 64) + d)");
  // Nested: the head and the lane of a flat column.
  const te::Var j("j");
  const VarBounds columns{{j.node(), 767}};
  const Expr column = te::floormod(i * 768 + j, te::int_imm(768));
  CHECK(te::to_string(simplify_index(te::floordiv(column, te::int_imm(64)), columns)) == "floordiv(j, 64)");
  CHECK(te::to_string(simplify_index(te::floormod(column, te::int_imm(64)), columns)) == "floormod(j, 64)");
  // A constant below zero is taken out whole: floor((4 i - 1) / 4) = i - 1.
  CHECK(te::to_string(simplify_index(te::floordiv(i * 4 - 1, te::int_imm(4)), {})) == "(i + -1)");
  CHECK(te::to_string(simplify_index(te::floormod(i * 4 - 1, te::int_imm(4)), {})) == "3");
}

TEST_CASE("simplify_index: what it cannot prove stays, the same node where nothing changes", "[jit]") {
  const te::Var i("i"), j("j"), n("n");
  const Expr by_var = te::floordiv(i * 64 + j, n);  // a divisor that is not a constant
  CHECK(simplify_index(by_var, {{j.node(), 63}}).same_as(by_var));
  const Expr unbounded = te::floordiv(j, te::int_imm(64));  // j's range is unknown
  CHECK(simplify_index(unbounded, {}).same_as(unbounded));
  const Expr too_wide = te::floordiv(j, te::int_imm(64));  // j may reach 64
  CHECK(simplify_index(too_wide, {{j.node(), 64}}).same_as(too_wide));
  const Expr plain = i * 3 + j;
  CHECK(simplify_index(plain, {{j.node(), 2}}).same_as(plain));
  // The multiple of the divisor comes out; the rest, not provably below it, stays divided.
  CHECK(te::to_string(simplify_index(te::floordiv(i * 64 + j, te::int_imm(64)), {{j.node(), 100}})) ==
        "(i + floordiv(j, 64))");
}

TEST_CASE("simplify_index: random linear indices keep their value at every point in bounds", "[jit]") {
  std::mt19937_64 rng(7);
  const auto draw = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const te::Var a("a"), b("b"), c("c");
  const te::Var* vars[] = {&a, &b, &c};
  for (int trial = 0; trial < 300; ++trial) {
    VarBounds bounds;
    for (const te::Var* v : vars)
      if (draw(0, 3) != 0) bounds[v->node()] = draw(0, 20);  // else unknown: any value, of either sign
    Expr index = te::int_imm(draw(-30, 30));
    for (const te::Var* v : vars) index = index + *v * draw(-40, 40);
    const std::int64_t divisor = draw(1, 70);
    Expr e = draw(0, 1) != 0 ? te::floordiv(index, te::int_imm(divisor)) : te::floormod(index, te::int_imm(divisor));
    if (draw(0, 2) == 0)  // a second level, as reshape's unravelling makes
      e = te::floordiv(e * draw(1, 9) + a, te::int_imm(draw(1, 30)));
    const Expr simple = simplify_index(e, bounds);
    INFO(te::to_string(e) << "  ->  " << te::to_string(simple));
    for (int point = 0; point < 20; ++point) {
      std::unordered_map<const te::VarNode*, std::int64_t> at;
      for (const te::Var* v : vars) {
        const auto bound = bounds.find(v->node());
        at[v->node()] = bound != bounds.end() ? draw(0, bound->second) : draw(-50, 50);
      }
      CHECK(value_of(simple, at) == value_of(e, at));
    }
  }
}

TEST_CASE("simplify_index: BERT's heads copy without a division", "[jit]") {
  te::SymbolTable symbols;
  const ir::Type x = ir::tensor_type({ir::Dim("n"), 768}, DType::f32);
  const std::vector<te::Tensor> in{te::placeholder_for(*x.as<ir::TensorTypeNode>(), "x", symbols)};
  const te::Tensor heads = ops::reshape().compute(in, {{"newshape", std::vector<std::int64_t>{0, 12, 64}}})[0];
  const std::vector<te::Tensor> out = ops::transpose().compute({&heads, 1}, {{"axes", std::vector<std::int64_t>{1, 0, 2}}});
  const std::string ir = codegen::cpu_kernel_ir("heads", in, out);
  INFO(ir);
  CHECK(ir.find("floordiv") == std::string::npos);
  CHECK(ir.find("floormod") == std::string::npos);
}

TEST_CASE("lowering: heads put back into rows copy along rows of a head, without a division", "[jit]") {
  // [12, n, 64] -> transpose (1, 0, 2) -> reshape [n, 768], as BERT's
  // attention output: the row's axis splits into its head and its place in
  // it (what floordiv and floormod by 64 read), and the copy reads each
  // head's row contiguously; against the elements moved by hand.
  te::SymbolTable symbols;
  const ir::Type x = ir::tensor_type({12, ir::Dim("n"), 64}, DType::f32);
  const std::vector<te::Tensor> in{te::placeholder_for(*x.as<ir::TensorTypeNode>(), "x", symbols)};
  const te::Tensor moved = ops::transpose().compute(in, {{"axes", std::vector<std::int64_t>{1, 0, 2}}})[0];
  const std::vector<te::Tensor> out = ops::reshape().compute({&moved, 1}, {{"newshape", std::vector<std::int64_t>{0, 768}}});
  const std::string ir = codegen::cpu_kernel_ir("rows", in, out);
  INFO(ir);
  CHECK(ir.find("floordiv") == std::string::npos);
  CHECK(ir.find("floormod") == std::string::npos);
  const Ref<Kernel> kernel = codegen::compile_cpu_kernel("rows", in, out);
  for (const std::int64_t n : {1, 5, 37}) {
    std::vector<float> values(static_cast<std::size_t>(12 * n * 64));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    const Tensor input = Tensor::from_data<float>({12, n, 64}, std::span<const float>(values));
    Tensor rows = Tensor::empty({n, 768}, DType::f32);
    kernel->run(std::vector<Tensor>{input}, std::vector<Tensor>{rows});
    bool same = true;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < 768; ++c)
        same = same && rows.data<float>()[r * 768 + c] == values[static_cast<std::size_t>(((c / 64) * n + r) * 64 + c % 64)];
    CHECK(same);
  }
}

}  // namespace
}  // namespace nimble
