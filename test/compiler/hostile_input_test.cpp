// Hostile and huge inputs (docs/limits.md): structures nested or chained a
// million deep, sizes a few bytes of text ask for, values deeper than any
// C++ stack. Each gives a result or a clear Error, never a crash.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/compile.hpp"
#include "nimble/interpreter.hpp"
#include "nimble/ir/module.hpp"
#include "nimble/vm/virtual_machine.hpp"
#include "ops/ops.hpp"

using namespace nimble;

namespace {
constexpr int kMillion = 1'000'000;

// Runs `f`, expecting an Error of `kind`; returns its message.
template <class F>
std::string error_of(F&& f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    return e.message();
  }
  FAIL("no Error was thrown");
  return {};
}

std::string repeat(std::string_view piece, int times) {
  std::string out;
  out.reserve(piece.size() * static_cast<std::size_t>(times));
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}
}  // namespace

TEST_CASE("hostile text: a million postfix links are a parse error, not a stack overflow", "[ir]") {
  const std::string fields = "def @f(%x: (f32[],)) {\n  %x" + repeat(".0", kMillion) + "\n}\n";
  CHECK_THAT(error_of([&] { (void)ir::parse(fields); }, ErrorKind::parse_error),
             Catch::Contains("nesting deeper than 1000 levels"));
  const std::string calls =
      "def @f(%x: f32[]) -> f32[] {\n  @f(%x)" + repeat("(%x)", kMillion) + "\n}\n";
  CHECK_THAT(error_of([&] { (void)ir::parse(calls); }, ErrorKind::parse_error),
             Catch::Contains("nesting deeper than 1000 levels"));
}

TEST_CASE("hostile text: a 57-byte splat of 2^40 elements is an immediate error", "[ir]") {
  const std::string text = "def @f() {\n  const f32[1099511627776] [0; 1099511627776]\n}\n";
  CHECK_THAT(error_of([&] { (void)ir::parse(text); }, ErrorKind::parse_error),
             Catch::Contains("at most 1073741824 bytes"));
}

TEST_CASE("hostile text: types nest at most kMaxTypeDepth levels", "[ir]") {
  // Each let wraps the last in a one-field tuple: the 1001st type is too
  // deep (the parser's nesting limit does not see it: each let is flat).
  std::string text = "def @f(%t0: f32[]) {\n";
  for (int i = 1; i <= 1100; ++i)
    text += "  let %t" + std::to_string(i) + " = (%t" + std::to_string(i - 1) + ",);\n";
  text += "  %t1100\n}\n";
  const ir::Module m = ir::parse(text);
  CHECK_THAT(error_of([&] { ir::infer_types(m); }, ErrorKind::resource_exhausted),
             Catch::Contains("at most 1000 levels"));
}

TEST_CASE("hostile IR: an operand nested a million deep is a clear error in every stage",
          "[ir]") {
  // neg(neg(...neg(%x)...)), built directly (the builder and the parser
  // would each have stopped it earlier).
  const ir::Expr x = ir::var("x", ir::tensor_type({}, DType::f32));
  ir::Expr e = x;
  for (int i = 0; i < kMillion; ++i) e = ir::call(ir::op_ref(ops::neg()), {e});
  ir::Module m;
  m.add_function("main", ir::function({x}, {}, e));
  m.add_entry("main");
  const auto deep = [](const std::string& message) {
    CHECK_THAT(message, Catch::Contains("nesting too deep"));
  };
  deep(error_of([&] { (void)ir::print(m); }, ErrorKind::resource_exhausted));
  deep(error_of([&] { ir::verify(m); }, ErrorKind::resource_exhausted));
  deep(error_of([&] { (void)compile(m); }, ErrorKind::resource_exhausted));
  // The module, a million nodes deep, is torn down here without recursion.
}

TEST_CASE("hostile IR: a million lets compile, run and tear down", "[ir]") {
  std::string text = "entry def @main(%a0: f32[2]) -> f32[2] {\n";
  for (int i = 1; i <= kMillion; ++i)
    text += "  let %a" + std::to_string(i) + " = neg(%a" + std::to_string(i - 1) + ");\n";
  text += "  %a" + std::to_string(kMillion) + "\n}\n";
  const ir::Module m = ir::parse(text);
  (void)ir::print(m);
  const Tensor x = Tensor::from_data<float>({2}, {1.5f, -2});
  const Value expected = evaluate(m, "main", {x});  // an even number of negations
  CHECK(expected.tensor().data<float>()[0] == 1.5f);
  vm::VirtualMachine machine(compile(m));
  const Value got = machine.invoke("main", {x});
  CHECK(got.tensor().data<float>()[0] == 1.5f);
  CHECK(got.tensor().data<float>()[1] == -2);
}

namespace {
// depth(t): the tree's depth, by non-tail recursion (a frame per level).
constexpr std::string_view kTreeDepth =
    "type Tree { Leaf(i64[]), Node(Tree, Tree) }\n"
    "\n"
    "entry def @depth(%t: Tree) -> i64[] {\n"
    "  match (%t) {\n"
    "    Leaf(%j) => {\n"
    "      1i64\n"
    "    },\n"
    "    Node(%l, %r) => {\n"
    "      let %d = @depth(%l);\n"
    "      add(%d, 1i64)\n"
    "    }\n"
    "  }\n"
    "}\n";

// A left spine: Node(Node(...Leaf(0)..., Leaf), Leaf), `levels` deep.
Value left_spine(std::int64_t levels) {
  const Value leaf = Value::adt(0, {Tensor::scalar<std::int64_t>(0)});
  Value t = leaf;
  for (std::int64_t i = 1; i < levels; ++i) t = Value::adt(1, {t, leaf});
  return t;
}
}  // namespace

TEST_CASE("deep values: the VM runs a recursion over a tree a million levels deep", "[vm]") {
  const ir::Module m = ir::parse(kTreeDepth);
  vm::VirtualMachine machine(compile(m));
  const Value tree = left_spine(kMillion);
  CHECK(machine.invoke("depth", {tree}).tensor().data<std::int64_t>()[0] == kMillion);
  // The reference agrees at a depth its stack holds.
  const Value small = left_spine(1000);
  CHECK(evaluate(m, "depth", {small}).tensor().data<std::int64_t>()[0] == 1000);
  CHECK(machine.invoke("depth", {small}).tensor().data<std::int64_t>()[0] == 1000);

  // Past a limit the host sets, a clean error, and the VM stays usable.
  machine.set_max_call_depth(500);
  CHECK_THAT(error_of([&] { (void)machine.invoke("depth", {small}); }, ErrorKind::resource_exhausted),
             Catch::Contains("limit of 500 frames"));
  CHECK(machine.invoke("depth", {left_spine(400)}).tensor().data<std::int64_t>()[0] == 400);
  CHECK_THROWS_AS(machine.set_max_call_depth(0), Error);
}

TEST_CASE("deep values: the argument check of a million-level tree, on any field", "[vm]") {
  const ir::Module m = ir::parse(kTreeDepth);
  vm::VirtualMachine machine(compile(m));
  // Deep along the first field, then a wrong leaf at the bottom: the check
  // reaches it and names the argument.
  const Value bad_leaf = Value::adt(0, {Tensor::scalar<float>(0)});
  Value t = bad_leaf;
  for (int i = 1; i < kMillion; ++i) t = Value::adt(1, {t, Value::adt(0, {Tensor::scalar<std::int64_t>(0)})});
  CHECK_THROWS_AS(machine.invoke("depth", {t}), Error);
  // The reference's check, too (it runs before any evaluation).
  CHECK_THROWS_AS(evaluate(m, "depth", {t}), Error);
}
