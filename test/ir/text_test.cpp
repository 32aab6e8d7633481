// The text form of the IR: printer, parser, and print(parse(print(m))) == print(m).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "nimble/ir/module.hpp"
#include "ops/ops.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using namespace nimble::ir;

namespace {

const char* const kFile = "test.nir";

/// print(parse(text)); the text of every round-trip case is already in
/// printed form, so this must give it back unchanged.
std::string reprint(const std::string& text) {
  return print(parse(text, kFile));
}

void check_round_trip(const std::string& text) {
  const std::string once = reprint(text);
  CHECK(once == text);
  CHECK(reprint(once) == once);
}

/// The Function of global `name` in `m`.
const FunctionNode& function_of(const Module& m, std::string_view name) {
  const Expr f = m.find_function(name);
  REQUIRE(f.defined());
  return *f.as<FunctionNode>();
}

/// The value of the first let in the body of global `name`.
Expr first_let_value(const Module& m, std::string_view name) {
  const auto* let = function_of(m, name).body.as<LetNode>();
  REQUIRE(let != nullptr);
  return let->value;
}

AdtDef list_adt() {
  return make_ref<AdtDefNode>(
      "List", std::vector<std::string>{"T"},
      std::vector<ConstructorDef>{{"Nil", {}},
                                  {"Cons", {type_var("T"), adt_type("List", {type_var("T")})}}});
}

}  // namespace

// --- Printing ------------------------------------------------------------------------

TEST_CASE("print: a module built with the constructors, golden", "[ir]") {
  Module m;
  const AdtDef list = list_adt();
  m.add_adt(list);

  // entry def @main(%x, %w, %b): dense, then sum with attributes.
  const Expr x = var("x", tensor_type({Dim("n"), 768}, DType::f32));
  const Expr w = var("w", tensor_type({768, 768}, DType::f32));
  const Expr b = var("b", tensor_type({768}, DType::f32));
  const Expr t0 = var("0");
  const Expr s = var("s", tensor_type({Dim("n"), 1}, DType::f32));
  const Expr dense_call = call(op_ref(ops::dense()), {x, w, b});
  const Expr sum_call = call(op_ref(ops::sum()), {t0},
                             Attrs{{"axes", std::vector<std::int64_t>{1}}, {"keepdims", true}});
  m.add_function("main", function({x, w, b}, tensor_type({Dim("n"), 1}, DType::f32),
                                  let(t0, dense_call, let(s, sum_call, s))));
  m.add_entry("main");

  // def @sum_list(%xs, %acc): recursion over a List; the inner %acc is a
  // different variable with the same name, so it prints as %acc_1.
  const Expr xs = var("xs", adt_type("List", {scalar_type(DType::f32)}));
  const Expr acc = var("acc", scalar_type(DType::f32));
  const Expr h = var("h");
  const Expr tail = var("t");
  const Expr acc2 = var("acc");
  const Expr recurse = call(global_var("sum_list"), {tail, acc2});
  const Expr body = match(
      xs,
      {Clause{pattern_constructor(constructor(list, "Nil"), {}), acc},
       Clause{pattern_constructor(constructor(list, "Cons"), {pattern_var(h), pattern_var(tail)}),
              let(acc2, call(op_ref(ops::add()), {acc, h}), recurse)}});
  m.add_function("sum_list", function({xs, acc}, scalar_type(DType::f32), body));

  // def @consts(): constants, a tuple and a projection.
  const Expr pair = var("pair");
  m.add_function(
      "consts",
      function({}, {},
               let(pair,
                   tuple({constant(Tensor::scalar<std::int64_t>(1)),
                          constant(Tensor::from_data<float>({2, 2}, {1, 2.5f, -3, 0.125f})),
                          constant(Tensor::scalar<bool>(true)), constructor(list, "Nil")}),
                   tuple_get(pair, 1))));

  const std::string expected =
      "type List<T> { Nil, Cons(T, List<T>) }\n"
      "\n"
      "entry def @main(%x: f32[n, 768], %w: f32[768, 768], %b: f32[768]) -> f32[n, 1] {\n"
      "  let %0 = dense(%x, %w, %b);\n"
      "  let %s: f32[n, 1] = sum(%0, axes=[1], keepdims=true);\n"
      "  %s\n"
      "}\n"
      "\n"
      "def @sum_list(%xs: List<f32[]>, %acc: f32[]) -> f32[] {\n"
      "  match (%xs) {\n"
      "    Nil => {\n"
      "      %acc\n"
      "    },\n"
      "    Cons(%h, %t) => {\n"
      "      let %acc_1 = add(%acc, %h);\n"
      "      @sum_list(%t, %acc_1)\n"
      "    }\n"
      "  }\n"
      "}\n"
      "\n"
      "def @consts() {\n"
      "  let %pair = (1i64, const f32[2, 2] [1, 2.5, -3, 0.125], true, Nil);\n"
      "  %pair.1\n"
      "}\n";
  CHECK(print(m) == expected);
  check_round_trip(expected);
}

TEST_CASE("print: an empty module is empty text", "[ir]") {
  CHECK(print(Module{}).empty());
  CHECK(print(parse("", kFile)).empty());
  CHECK(print(parse("  // only a comment\n\n", kFile)).empty());
}

TEST_CASE("print: a single expression", "[ir]") {
  const Expr a = var("a", scalar_type(DType::i64));
  const Expr e = let(a, constant(Tensor::scalar<std::int64_t>(-3)),
                     call(op_ref(ops::add()), {a, constant(Tensor::scalar<std::int64_t>(2))}));
  CHECK(print(e) == "let %a: i64[] = -3i64;\nadd(%a, 2i64)");
  CHECK(print(tuple({})) == "()");
  CHECK(print(Expr{}) == "<undefined>");
}

TEST_CASE("print: distinct variables with one name get distinct names", "[ir]") {
  // Three variables named x, and one named x_1: the third x skips x_1.
  const Expr x1 = var("x", scalar_type(DType::f32));
  const Expr x2 = var("x_1", scalar_type(DType::f32));
  const Expr x3 = var("x");
  const Expr x4 = var("x");
  const Expr body =
      let(x3, x2, let(x4, call(op_ref(ops::add()), {x1, x3}), tuple({x1, x2, x3, x4})));
  Module m;
  m.add_function("f", function({x1, x2}, {}, body));
  const std::string expected =
      "def @f(%x: f32[], %x_1: f32[]) {\n"
      "  let %x_2 = %x_1;\n"
      "  let %x_3 = add(%x, %x_2);\n"
      "  (%x, %x_1, %x_2, %x_3)\n"
      "}\n";
  CHECK(print(m) == expected);
  check_round_trip(expected);

  // Names outside [A-Za-z0-9_] would not read back: they print with '_'.
  const Expr odd = var("a.b-c", scalar_type(DType::f32));
  Module m2;
  m2.add_function("g", function({odd}, {}, odd));
  CHECK(print(m2) == "def @g(%a_b_c: f32[]) {\n  %a_b_c\n}\n");
}

TEST_CASE("print: lets and closures outside body positions are parenthesized", "[ir]") {
  const Expr a = var("a", scalar_type(DType::i64));
  const Expr b = var("b");
  const Expr y = var("y", scalar_type(DType::i64));
  const Expr inner = let(b, a, b);            // a let as a call argument
  const Expr closure = function({y}, {}, y);  // a closure as a callee
  const Expr body = call(op_ref(ops::add()), {inner, call(closure, {a})});
  Module m;
  m.add_function("f", function({a}, {}, body));
  const std::string expected =
      "def @f(%a: i64[]) {\n"
      "  add((\n"
      "    let %b = %a;\n"
      "    %b\n"
      "  ), (fn (%y: i64[]) {\n"
      "    %y\n"
      "  })(%a))\n"
      "}\n";
  CHECK(print(m) == expected);
  check_round_trip(expected);
}

TEST_CASE("print: show_types appends inferred types as comments", "[ir]") {
  const Expr x = var("x", tensor_type({2}, DType::f32));
  const Expr y = var("y");
  const Expr value = call(op_ref(ops::add()), {x, x});
  value->checked_type = tensor_type({2}, DType::f32);
  const Expr fn = function({x}, {}, let(y, value, y));
  fn->checked_type = func_type({tensor_type({2}, DType::f32)}, tensor_type({2}, DType::f32));
  Module m;
  m.add_function("f", fn);
  const std::string expected =
      "def @f(%x: f32[2]) {  // fn(f32[2]) -> f32[2]\n"
      "  let %y = add(%x, %x);  // f32[2]\n"
      "  %y\n"
      "}\n";
  CHECK(print(m, PrintOptions{.show_types = true}) == expected);
  // Without the option, and without inference, there are no comments.
  CHECK(print(m) ==
        "def @f(%x: f32[2]) {\n"
        "  let %y = add(%x, %x);\n"
        "  %y\n"
        "}\n");
  // The comments are skipped by the parser.
  CHECK(reprint(expected) == print(m));
}

// --- Round trips ------------------------------------------------------------------------

TEST_CASE("round trip: the example program", "[ir]") {
  check_round_trip(
      "type List<T> { Nil, Cons(T, List<T>) }\n"
      "\n"
      "type Tree { Leaf(f32[1, 300]), Node(Tree, Tree) }\n"
      "\n"
      "entry def @main(%x: f32[n, 768], %w: f32[768, 768], %b: f32[768]) -> f32[n, 1] {\n"
      "  let %0 = dense(%x, %w, %b);\n"
      "  let %s = sum(%0, axes=[1], keepdims=true);\n"
      "  %s\n"
      "}\n"
      "\n"
      "def @f(%xs: List<f32[?, 512]>, %i: i64[]) {\n"
      "  match (%xs) {\n"
      "    Nil => {\n"
      "      %i\n"
      "    },\n"
      "    Cons(%h, _) => {\n"
      "      let %j = add(%i, 1i64);\n"
      "      @f(%xs, %j)\n"
      "    }\n"
      "  }\n"
      "}\n");
}

TEST_CASE("round trip: ADTs and types", "[ir]") {
  check_round_trip(
      "type Option<T> { None, Some(T) }\n"
      "\n"
      "type Pair<A, B> { MkPair(A, B) }\n"
      "\n"
      "type Tree { Leaf(f32[1, 300]), Node(Tree, Tree) }\n"
      "\n"
      "type Wrap { W(fn(Option<Tree>) -> (f32[?], (i64[],)), ()) }\n"
      "\n"
      "type Void {}\n"
      "\n"
      "def @types(%a: f32[n<=512, ?, 3], %b: (i64[], bool[]), %c: (f32[2],), %d: (), "
      "%e: fn(f32[2], i32[]) -> (f32[2], f32[2]), %f: Option<Pair<f16[m], bf16[]>>, "
      "%g: fn() -> i8[0]) -> () {\n"
      "  ()\n"
      "}\n");
  const Module m = parse(
      "type Pair<A, B> { MkPair(A, B) }\n"
      "def @f(%a: Pair<f32[n<=4], f64[]>) { %a }\n",
      kFile);
  REQUIRE(m.adts().size() == 1);
  const AdtDef& pair = m.adts()[0];
  CHECK(pair->type_params == std::vector<std::string>{"A", "B"});
  CHECK(pair->constructors[0].fields[1] == type_var("B"));
  const Type expected =
      adt_type("Pair", {tensor_type({Dim("n", 4)}, DType::f32), scalar_type(DType::f64)});
  CHECK(function_of(m, "f").params[0].as<VarNode>()->type_annotation == expected);
}

TEST_CASE("round trip: ADTs may be used before they are defined", "[ir]") {
  check_round_trip(
      "type A { MkA(B) }\n"
      "\n"
      "type B { MkB }\n"
      "\n"
      "def @f() {\n"
      "  MkA(MkB)\n"
      "}\n");
  // A function before the type definition it uses still reads; printing
  // lists ADTs first.
  const Module m = parse("def @f() { Some(1i64) }\ntype Option<T> { None, Some(T) }\n", kFile);
  CHECK(print(m) ==
        "type Option<T> { None, Some(T) }\n"
        "\n"
        "def @f() {\n"
        "  Some(1i64)\n"
        "}\n");
}

TEST_CASE("round trip: constants of every dtype", "[ir]") {
  check_round_trip(
      "def @constants() {\n"
      "  let %a = 1i64;\n"
      "  let %b = -3i32;\n"
      "  let %c = 0.125f32;\n"
      "  let %d = 2.5f64;\n"
      "  let %e = 1.5f16;\n"
      "  let %f = 1bf16;\n"
      "  let %g = -128i8;\n"
      "  let %h = true;\n"
      "  let %i = false;\n"
      "  let %j = inff32;\n"
      "  let %k = -inff64;\n"
      "  let %l = nanf32;\n"
      "  let %m = 0.1f32;\n"
      "  let %n = 0.1f64;\n"
      "  let %o = 1e+30f32;\n"
      "  let %p = -9223372036854775808i64;\n"
      "  let %q = 3.4028235e+38f32;\n"
      "  let %r = 1e-45f32;\n"
      "  let %s = -0f32;\n"
      "  let %t = -nanbf16;\n"
      "  let %u = const f32[2, 2] [1, 2.5, -3, inf];\n"
      "  let %v = const bool[3] [true, false, true];\n"
      "  let %w = const i64[2, 0] [];\n"
      "  let %x = const f16[3] [0.099975586, -nan, 65504];\n"
      "  let %y = const i8[1, 1, 2] [127, -128];\n"
      "  let %z = const f64[2] [1e-300, -1e+300];\n"
      "  (%a, %b, %c, %d, %e, %f, %g, %h, %i, %j, %k, %l, %m, %n, %o, %p, %q, %r, %s, %t, %u, %v, "
      "%w, %x, %y, %z)\n"
      "}\n");
}

TEST_CASE("parse: constant values", "[ir]") {
  const Module m = parse(
      "def @f() {\n"
      "  let %a = const f32[2, 2] [1, 2.5, -3, inf];\n"
      "  let %b = 0.1f16;\n"
      "  let %c = -nanf64;\n"
      "  let %d = 9223372036854775807i64;\n"
      "  let %e = 0.1f64;\n"
      "  %a\n"
      "}\n",
      kFile);
  const auto* a = function_of(m, "f").body.as<LetNode>();
  const Tensor ta = a->value.as<ConstantNode>()->value;
  CHECK(ta.dtype() == DType::f32);
  CHECK(ta.shape() == Shape{2, 2});
  CHECK(ta.at<float>({0, 1}) == 2.5f);
  CHECK(ta.at<float>({1, 0}) == -3.0f);
  CHECK(std::isinf(ta.at<float>({1, 1})));
  const auto* b = a->body.as<LetNode>();
  const Tensor tb = b->value.as<ConstantNode>()->value;
  CHECK(tb.rank() == 0);
  CHECK(tb.data<Half>()[0].bits == Half(0.1f).bits);
  const auto* c = b->body.as<LetNode>();
  const double nan = c->value.as<ConstantNode>()->value.data<double>()[0];
  CHECK(std::isnan(nan));
  CHECK(std::signbit(nan));
  const auto* d = c->body.as<LetNode>();
  CHECK(d->value.as<ConstantNode>()->value.data<std::int64_t>()[0] == INT64_MAX);
  const auto* e = d->body.as<LetNode>();
  CHECK(e->value.as<ConstantNode>()->value.data<double>()[0] == 0.1);
}

TEST_CASE("round trip: op calls with every kind of attribute", "[ir]") {
  check_round_trip(
      "def @attrs(%x: f32[4, 4], %g: f32[4], %b: f32[4]) {\n"
      "  let %a = sum(%x, axes=[], keepdims=false);\n"
      "  let %c = softmax(%x, axis=-1);\n"
      "  let %d = layer_norm(%x, %g, %b, axis=1, epsilon=1e-05);\n"
      "  let %e = cast(%x, dtype=i64);\n"
      "  let %f = reshape(%x, newshape=[-1, 2, 8]);\n"
      "  let %h = add(%x, %x, s=\"hello \\\"world\\\"\\n\", r=2.0, big=inf, small=-inf, "
      "undefined=nan, half=0.5, flag=true);\n"
      "  (%a, %c, %d, %e, %f, %h)\n"
      "}\n");
  const Module m = parse(
      "def @f(%x: f32[4]) {\n"
      "  let %a = add(%x, %x, b=true, i=-7, r=0.25, s=\"a\\tb\\x01\", l=[3, -2], t=bf16, "
      "n=-inf);\n"
      "  %a\n"
      "}\n",
      kFile);
  const auto* c = first_let_value(m, "f").as<CallNode>();
  REQUIRE(c != nullptr);
  CHECK(c->callee.as<OpNode>()->def == &ops::add());
  CHECK(c->args.size() == 2);
  const Attrs expected{{"b", true},
                       {"i", std::int64_t{-7}},
                       {"r", 0.25},
                       {"s", std::string("a\tb\x01")},
                       {"l", std::vector<std::int64_t>{3, -2}},
                       {"t", DType::bf16},
                       {"n", -std::numeric_limits<double>::infinity()}};
  CHECK(c->attrs == expected);
  // Strings with special characters print escaped and read back unchanged.
  CHECK(print(first_let_value(m, "f")) ==
        "add(%x, %x, b=true, i=-7, r=0.25, s=\"a\\tb\\x01\", l=[3, -2], t=bf16, n=-inf)");
}

TEST_CASE("round trip: if, closures, tuples, projections and global calls", "[ir]") {
  check_round_trip(
      "def @control(%x: f32[2], %t: (f32[2], (i64[], bool[]))) -> f32[2] {\n"
      "  let %scale = fn (%y: f32[2]) -> f32[2] {\n"
      "    let %z = mul(%x, %y);\n"
      "    %z\n"
      "  };\n"
      "  let %u = %t.1.0;\n"
      "  let %p = (%x,);\n"
      "  let %q = ();\n"
      "  let %r = (%x, %u, %p);\n"
      "  let %c: f32[2] = if (%t.1.1) {\n"
      "    %scale(%p.0)\n"
      "  } else {\n"
      "    if (false) {\n"
      "      %x\n"
      "    } else {\n"
      "      %r.0\n"
      "    }\n"
      "  };\n"
      "  let %d = (fn (%w: f32[2]) {\n"
      "    %w\n"
      "  })(%c);\n"
      "  let %e = (if (true) {\n"
      "    %r\n"
      "  } else {\n"
      "    %r\n"
      "  }).2.0;\n"
      "  let %f = @control;\n"
      "  let %g = add;\n"
      "  let %h = %f(%d, %t);\n"
      "  @control(%e, %t)\n"
      "}\n");
}

TEST_CASE("round trip: nested matches with every kind of pattern", "[ir]") {
  check_round_trip(
      "type Option<T> { None, Some(T) }\n"
      "\n"
      "type Tree { Leaf(f32[2]), Node(Tree, Tree) }\n"
      "\n"
      "def @patterns(%v: Option<(Tree, Option<f32[2]>)>, %d: f32[2]) -> f32[2] {\n"
      "  match (%v) {\n"
      "    Some((Node(Leaf(%l), _), Some(%w: f32[2]))) => {\n"
      "      match ((%l, %w)) {\n"
      "        (%a, _) => {\n"
      "          add(%a, %w)\n"
      "        }\n"
      "      }\n"
      "    },\n"
      "    Some((%t, None)) => {\n"
      "      match (%t) {\n"
      "        Leaf(%x) => {\n"
      "          %x\n"
      "        },\n"
      "        Node(_, %r) => {\n"
      "          @patterns(Some((%r, None)), %d)\n"
      "        }\n"
      "      }\n"
      "    },\n"
      "    Some(((),)) => {\n"
      "      %d\n"
      "    },\n"
      "    %other => {\n"
      "      match (%other) {\n"
      "        None => {\n"
      "          %d\n"
      "        },\n"
      "        _ => {\n"
      "          %d\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n");
}

TEST_CASE("round trip: shadowed names are renamed, and scoping is lexical", "[ir]") {
  const std::string text =
      "def @shadow(%x: f32[2]) {\n"
      "  let %x = add(%x, %x);\n"
      "  let %y = fn (%x: f32[2]) {\n"
      "    %x\n"
      "  };\n"
      "  let %z = match (%x) {\n"
      "    %x => {\n"
      "      %x\n"
      "    }\n"
      "  };\n"
      "  %x\n"
      "}\n";
  const Module m = parse(text, kFile);
  const FunctionNode& f = function_of(m, "shadow");
  const auto* let_x = f.body.as<LetNode>();
  // `add(%x, %x)` uses the parameter; the final `%x` is the let's variable.
  CHECK(let_x->value.as<CallNode>()->args[0].same_as(f.params[0]));
  const auto* let_y = let_x->body.as<LetNode>();
  const auto* closure = let_y->value.as<FunctionNode>();
  CHECK(closure->body.same_as(closure->params[0]));
  const auto* let_z = let_y->body.as<LetNode>();
  CHECK(let_z->value.as<MatchNode>()->value.same_as(let_x->var));
  CHECK(let_z->body.same_as(let_x->var));
  const std::string expected =
      "def @shadow(%x: f32[2]) {\n"
      "  let %x_1 = add(%x, %x);\n"
      "  let %y = fn (%x_2: f32[2]) {\n"
      "    %x_2\n"
      "  };\n"
      "  let %z = match (%x_1) {\n"
      "    %x_3 => {\n"
      "      %x_3\n"
      "    }\n"
      "  };\n"
      "  %x_1\n"
      "}\n";
  CHECK(print(m) == expected);
  check_round_trip(expected);
}

TEST_CASE("round trip: a closure that calls itself through its let", "[ir]") {
  const std::string text =
      "def @count(%n: i64[]) {\n"
      "  let %loop = fn (%i: i64[]) -> i64[] {\n"
      "    if (less(%i, %n)) {\n"
      "      %loop(add(%i, 1i64))\n"
      "    } else {\n"
      "      %i\n"
      "    }\n"
      "  };\n"
      "  %loop(0i64)\n"
      "}\n";
  check_round_trip(text);
  const Module m = parse(text, kFile);
  const auto* let_loop = function_of(m, "count").body.as<LetNode>();
  const auto* closure = let_loop->value.as<FunctionNode>();
  const auto* branch = closure->body.as<IfNode>();
  CHECK(branch->then_branch.as<CallNode>()->callee.same_as(let_loop->var));
  CHECK(let_loop->body.as<CallNode>()->callee.same_as(let_loop->var));
}

TEST_CASE("round trip: entries, and several functions", "[ir]") {
  check_round_trip(
      "type List<T> { Nil, Cons(T, List<T>) }\n"
      "\n"
      "entry def @a(%x: f32[]) -> f32[] {\n"
      "  @b(%x)\n"
      "}\n"
      "\n"
      "def @b(%x: f32[]) -> f32[] {\n"
      "  %x\n"
      "}\n"
      "\n"
      "entry def @c() {\n"
      "  Nil()\n"
      "}\n"
      "\n"
      "def @d() {\n"
      "  (\n"
      "    let %u = (1i64,);\n"
      "    %u\n"
      "  ).0\n"
      "}\n");
}

TEST_CASE("parse: every node records where it was written", "[ir]") {
  const Module m = parse(
      "type List<T> { Nil, Cons(T, List<T>) }\n"
      "entry def @main(%x: f32[2]) {\n"
      "  let %y = add(%x,\n"
      "               %x);\n"
      "  match (Cons(%y, Nil)) {\n"
      "    Cons(%h, _) => { (%h, @main).1 }\n"
      "  }\n"
      "}\n",
      kFile);
  CHECK(m.is_entry("main"));
  const FunctionNode& f = function_of(m, "main");
  auto at = [](const SourceLoc& loc, std::uint32_t line, std::uint32_t column) {
    return std::string(loc.file) == kFile && loc.line == line && loc.column == column;
  };
  CHECK(at(f.loc, 2, 1));
  CHECK(at(f.params[0]->loc, 2, 17));
  const auto* let_y = f.body.as<LetNode>();
  CHECK(at(let_y->loc, 3, 3));
  CHECK(at(let_y->var->loc, 3, 7));
  const auto* add_call = let_y->value.as<CallNode>();
  CHECK(at(add_call->loc, 3, 12));
  CHECK(at(add_call->callee->loc, 3, 12));
  const auto* m_node = let_y->body.as<MatchNode>();
  CHECK(at(m_node->loc, 5, 3));
  const auto* cons = m_node->value.as<CallNode>();
  CHECK(at(cons->loc, 5, 10));
  CHECK(at(cons->args[1]->loc, 5, 19));
  const auto& clause = m_node->clauses[0];
  const auto* pattern = clause.pattern.as<PatternConstructorNode>();
  CHECK(at(pattern->ctor->loc, 6, 5));
  CHECK(at(pattern->fields[0].as<PatternVarNode>()->var->loc, 6, 10));
  const auto* get = clause.body.as<TupleGetNode>();
  CHECK(get->index == 1);
  CHECK(at(get->loc, 6, 22));
  CHECK(at(get->tuple.as<TupleNode>()->fields[1]->loc, 6, 27));
}

// --- Errors ---------------------------------------------------------------------------

TEST_CASE("parse errors: expected vs found, with line and column", "[ir]") {
  using nimble::ErrorKind;
  CHECK_NIMBLE_ERROR(parse("def @f() {\n  add(1i64, 2i64\n}\n", kFile), ErrorKind::parse_error,
                     "test.nir:3:1: expected ',' or ')', got '}'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: f32[2]) { %x", kFile), ErrorKind::parse_error,
                     "test.nir:1:24: expected '}', got end of input");
  CHECK_NIMBLE_ERROR(parse("foo", kFile), ErrorKind::parse_error,
                     "test.nir:1:1: expected 'def', 'entry def' or 'type', got 'foo'");
  CHECK_NIMBLE_ERROR(parse("entry type", kFile), ErrorKind::parse_error,
                     "test.nir:1:11: expected a type name, got end of input");
  CHECK_NIMBLE_ERROR(parse("entry @f() { 1i64 }", kFile), ErrorKind::parse_error,
                     "test.nir:1:7: expected 'def', got '@f'");
  CHECK_NIMBLE_ERROR(parse("def f() { 1i64 }", kFile), ErrorKind::parse_error,
                     "test.nir:1:5: expected a function name (@name), got 'f'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x f32[]) { %x }", kFile), ErrorKind::parse_error,
                     "test.nir:1:11: expected ':', got 'f32'");
  CHECK_NIMBLE_ERROR(parse("def @f() {\n  let %a 1i64;\n  %a\n}", kFile), ErrorKind::parse_error,
                     "test.nir:2:10: expected ':' or '=', got '1i64'");
  CHECK_NIMBLE_ERROR(parse("def @f() {\n  let %a = 1i64\n  %a\n}", kFile), ErrorKind::parse_error,
                     "test.nir:3:3: expected ';', got '%a'");
  CHECK_NIMBLE_ERROR(parse("def @f() { ; }", kFile), ErrorKind::parse_error,
                     "test.nir:1:12: expected an expression, got ';'");
  CHECK_NIMBLE_ERROR(parse("def @f() { else }", kFile), ErrorKind::parse_error,
                     "test.nir:1:12: expected an expression, got 'else'");
  CHECK_NIMBLE_ERROR(parse("def @f(%c: bool[]) { if (%c) { 1i64 } { 2i64 } }", kFile),
                     ErrorKind::parse_error, "test.nir:1:39: expected 'else', got '{'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: i64[]) { match (%x) {} }", kFile), ErrorKind::parse_error,
                     "test.nir:1:33: expected a pattern, got '}'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: i64[]) { match (%x) { _ -> { %x } } }", kFile),
                     ErrorKind::parse_error, "test.nir:1:36: expected '=>', got '->'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: f32[2]) { sum(keepdims=true, %x) }", kFile),
                     ErrorKind::parse_error,
                     "test.nir:1:41: expected an attribute (name=value), got '%x'");
  CHECK_NIMBLE_ERROR(parse("type T { A B }", kFile), ErrorKind::parse_error,
                     "test.nir:1:12: expected ',' or '}', got 'B'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: f32[2) { %x }", kFile), ErrorKind::parse_error,
                     "test.nir:1:17: expected ',' or ']', got ')'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: fn(f32[]) f32[]) { %x }", kFile), ErrorKind::parse_error,
                     "test.nir:1:22: expected '->', got 'f32'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: 3) { %x }", kFile), ErrorKind::parse_error,
                     "test.nir:1:12: expected a type, got '3'");
  CHECK_NIMBLE_ERROR(parse("def @f(%t: (f32[], f32[])) { %t.x }", kFile), ErrorKind::parse_error,
                     "test.nir:1:32: expected a token, got '.'");
}

TEST_CASE("parse errors: names", "[ir]") {
  using nimble::ErrorKind;
  CHECK_NIMBLE_ERROR(parse("def @f() { %x }", kFile), ErrorKind::parse_error,
                     "test.nir:1:12: unbound variable %x");
  // A let's variable is not in scope in its own value (unless that is a
  // closure), nor after its body.
  CHECK_NIMBLE_ERROR(parse("def @f() {\n  let %a = %a;\n  %a\n}", kFile), ErrorKind::parse_error,
                     "test.nir:2:12: unbound variable %a");
  CHECK_NIMBLE_ERROR(parse("def @f() {\n  let %a = (let %b = 1i64; %b);\n  %b\n}", kFile),
                     ErrorKind::parse_error, "test.nir:3:3: unbound variable %b");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: i64[]) { match (%x) { %y => { %y }, _ => { %y } } }", kFile),
                     ErrorKind::parse_error, "test.nir:1:55: unbound variable %y");
  CHECK_NIMBLE_ERROR(parse("def @f() { foo(1i64) }", kFile), ErrorKind::parse_error,
                     "test.nir:1:12: unknown operator or constructor 'foo'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: i64[]) { match (%x) { Foo => { %x } } }", kFile),
                     ErrorKind::parse_error, "test.nir:1:34: unknown constructor 'Foo'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: Foo) { %x }", kFile), ErrorKind::parse_error,
                     "test.nir:1:12: unknown type 'Foo'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: f31[2]) { %x }", kFile), ErrorKind::parse_error,
                     "test.nir:1:12: unknown type 'f31'");
  // A type parameter is a type only inside its own definition.
  CHECK_NIMBLE_ERROR(parse("type L<T> { C(T) }\ndef @f(%x: T) { %x }", kFile),
                     ErrorKind::parse_error, "test.nir:2:12: unknown type 'T'");
  CHECK_NIMBLE_ERROR(parse("def @f() { 1i64 }\n\ndef @f() { 2i64 }", kFile), ErrorKind::parse_error,
                     "test.nir:3:5: module: function @f is already defined");
  CHECK_NIMBLE_ERROR(parse("type T { A }\ntype T { B }", kFile), ErrorKind::parse_error,
                     "test.nir:2:6: module: type 'T' is already defined");
  CHECK_NIMBLE_ERROR(parse("type T { A }\ntype U { A }", kFile), ErrorKind::parse_error,
                     "test.nir:2:6: module: constructor 'A' of type 'U' is already defined by "
                     "type 'T'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: f32[2]) { sum(%x, axes=[1], axes=[0]) }", kFile),
                     ErrorKind::parse_error, "test.nir:1:40: attribute 'axes' is given twice");
}

TEST_CASE("parse errors: literals and attribute values", "[ir]") {
  using nimble::ErrorKind;
  auto body = [](const std::string& expr) { return parse("def @f() { " + expr + " }", kFile); };
  CHECK_NIMBLE_ERROR(body("1"), ErrorKind::parse_error,
                     "test.nir:1:12: expected a literal with a dtype suffix (such as 1i64 or "
                     "0.5f32), got '1'");
  CHECK_NIMBLE_ERROR(body("1u8"), ErrorKind::parse_error, "test.nir:1:12: unknown type 'u8'");
  CHECK_NIMBLE_ERROR(body("1bool"), ErrorKind::parse_error,
                     "test.nir:1:12: expected true or false, got '1bool'");
  CHECK_NIMBLE_ERROR(body("128i8"), ErrorKind::parse_error,
                     "test.nir:1:12: expected an integer in the range of i8, got '128i8'");
  CHECK_NIMBLE_ERROR(
      body("-2147483649i32"), ErrorKind::parse_error,
      "test.nir:1:12: expected an integer in the range of i32, got '-2147483649i32'");
  CHECK_NIMBLE_ERROR(body("9223372036854775808i64"), ErrorKind::parse_error,
                     "test.nir:1:12: expected an integer in the range of i64, got "
                     "'9223372036854775808i64'");
  CHECK_NIMBLE_ERROR(body("1.5i32"), ErrorKind::parse_error,
                     "test.nir:1:12: expected an integer in the range of i32, got '1.5i32'");
  CHECK_NIMBLE_ERROR(body("1e39f32"), ErrorKind::parse_error,
                     "test.nir:1:12: expected a number in the range of f32, got '1e39f32'");
  CHECK_NIMBLE_ERROR(body("70000f16"), ErrorKind::parse_error,
                     "test.nir:1:12: expected a number in the range of f16, got '70000f16'");
  CHECK_NIMBLE_ERROR(body("1e-400f64"), ErrorKind::parse_error,
                     "test.nir:1:12: expected a number in the range of f64, got '1e-400f64'");
  CHECK_NIMBLE_ERROR(body("-foo"), ErrorKind::parse_error,
                     "test.nir:1:13: expected inf or nan after '-', got 'foo'");
  CHECK_NIMBLE_ERROR(body("const f32[2] [1]"), ErrorKind::parse_error,
                     "test.nir:1:25: expected 2 values for f32[2], got 1");
  CHECK_NIMBLE_ERROR(body("const f32[n] [1]"), ErrorKind::parse_error,
                     "test.nir:1:18: expected a tensor type with static dims, got 'f32[n]'");
  CHECK_NIMBLE_ERROR(body("const (f32[1],) [1]"), ErrorKind::parse_error,
                     "test.nir:1:18: expected a tensor type with static dims, got '(f32[1],)'");
  CHECK_NIMBLE_ERROR(body("const f32[4611686018427387904, 4] []"), ErrorKind::parse_error,
                     "test.nir:1:18: tensor type 'f32[4611686018427387904, 4]' has too many "
                     "elements");
  CHECK_NIMBLE_ERROR(body("const f32[2] [1, 2i64]"), ErrorKind::parse_error,
                     "test.nir:1:29: expected a number, got '2i64'");
  CHECK_NIMBLE_ERROR(body("const i32[1] [0.5]"), ErrorKind::parse_error,
                     "test.nir:1:26: expected an integer in the range of i32, got '0.5'");
  CHECK_NIMBLE_ERROR(body("const bool[1] [1]"), ErrorKind::parse_error,
                     "test.nir:1:27: expected true or false, got '1'");
  CHECK_NIMBLE_ERROR(body("(1i64,).4294967296"), ErrorKind::parse_error,
                     "test.nir:1:19: expected a field index, got '.4294967296'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: f32[-1]) { %x }", kFile), ErrorKind::parse_error,
                     "test.nir:1:16: expected a dim (an integer >= 0, '?' or a name), got '-1'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: f32[99999999999999999999]) { %x }", kFile),
                     ErrorKind::parse_error,
                     "test.nir:1:16: expected a dim (an integer >= 0, '?' or a name), got "
                     "'99999999999999999999'");
  CHECK_NIMBLE_ERROR(parse("def @f(%x: f32[n<=m]) { %x }", kFile), ErrorKind::parse_error,
                     "test.nir:1:19: expected an upper bound (an integer >= 0), got 'm'");
  auto attr = [](const std::string& value) {
    return parse("def @f(%x: f32[2]) { sum(%x, axes=" + value + ") }", kFile);
  };
  CHECK_NIMBLE_ERROR(attr("foo"), ErrorKind::parse_error,
                     "test.nir:1:35: expected an attribute value, got 'foo'");
  CHECK_NIMBLE_ERROR(attr("[1.5]"), ErrorKind::parse_error,
                     "test.nir:1:36: expected an integer, got '1.5'");
  CHECK_NIMBLE_ERROR(attr("[1, 99999999999999999999]"), ErrorKind::parse_error,
                     "test.nir:1:39: expected an integer in the range of i64, got "
                     "'99999999999999999999'");
  CHECK_NIMBLE_ERROR(attr("1e999"), ErrorKind::parse_error,
                     "test.nir:1:35: expected a number in the range of f64, got '1e999'");
  CHECK_NIMBLE_ERROR(attr("1i64"), ErrorKind::parse_error,
                     "test.nir:1:35: expected an attribute value, got '1i64'");
  CHECK_NIMBLE_ERROR(attr("\"abc"), ErrorKind::parse_error,
                     "test.nir:1:42: expected '\"' to close the string, got end of input");
  CHECK_NIMBLE_ERROR(attr("\"a\\qb\""), ErrorKind::parse_error,
                     "test.nir:1:37: expected an escape sequence (\\\", \\\\, \\n, \\t or \\xNN), "
                     "got '\\q'");
}

TEST_CASE("parse errors: characters that start no token", "[ir]") {
  using nimble::ErrorKind;
  CHECK_NIMBLE_ERROR(parse("def @f() {\n  $\n}", kFile), ErrorKind::parse_error,
                     "test.nir:2:3: expected a token, got '$'");
  CHECK_NIMBLE_ERROR(parse("def @f() { % }", kFile), ErrorKind::parse_error,
                     "test.nir:1:13: expected a variable name after '%', got ' '");
  CHECK_NIMBLE_ERROR(parse("def @", kFile), ErrorKind::parse_error,
                     "test.nir:1:6: expected a function name after '@', got end of input");
  CHECK_NIMBLE_ERROR(parse(std::string("def @f() { \x01 }"), kFile), ErrorKind::parse_error,
                     "test.nir:1:12: expected a token, got '\\x01'");
  CHECK_NIMBLE_ERROR(parse("def @f() { 1i64 } / comment", kFile), ErrorKind::parse_error,
                     "test.nir:1:19: expected a token, got '/'");
  // An earlier syntax error is reported before a later bad character.
  CHECK_NIMBLE_ERROR(parse("def @f() { ) }\n$", kFile), ErrorKind::parse_error,
                     "test.nir:1:12: expected an expression, got ')'");
  // The default file name.
  CHECK_NIMBLE_ERROR(parse("}"), ErrorKind::parse_error,
                     "<text>:1:1: expected 'def', 'entry def' or 'type', got '}'");
}

TEST_CASE("parse errors: nesting deeper than 1000 levels", "[ir]") {
  auto nested = [](int depth) {
    return "def @f(%x: f32[]) { " + std::string(static_cast<std::size_t>(depth), '(') + "%x" +
           std::string(static_cast<std::size_t>(depth), ')') + " }";
  };
  // 999 parentheses and the body: 1000 levels.
  CHECK(print(parse(nested(999), kFile)) == "def @f(%x: f32[]) {\n  %x\n}\n");
  CHECK_NIMBLE_ERROR(parse(nested(1000), kFile), nimble::ErrorKind::parse_error,
                     "test.nir:1:1021: nesting deeper than 1000 levels");
  CHECK_NIMBLE_ERROR(parse(nested(100000), kFile), nimble::ErrorKind::parse_error,
                     "test.nir:1:1021: nesting deeper than 1000 levels");
  // Types and patterns count too.
  const std::string deep_type = std::string(2000, '(') + "f32[]" + std::string(2000, ')');
  CHECK_NIMBLE_ERROR(parse("def @f(%x: " + deep_type + ") { %x }", kFile),
                     nimble::ErrorKind::parse_error,
                     "test.nir:1:1012: nesting deeper than 1000 levels");
  // The most stack-hungry forms (calls, function types) at 1000 levels.
  auto nested_calls = [](int depth) {
    std::string text = "def @f(%x: f32[]) {\n  ";
    for (int i = 0; i < depth; ++i) text += "neg(";
    return text + "%x" + std::string(static_cast<std::size_t>(depth), ')') + "\n}\n";
  };
  CHECK(reprint(nested_calls(999)) == nested_calls(999));
  CHECK_NIMBLE_ERROR(parse(nested_calls(1000), kFile), nimble::ErrorKind::parse_error,
                     "test.nir:2:4002: nesting deeper than 1000 levels");
  auto nested_fn_type = [](int depth) {
    std::string text = "def @f(%x: ";
    for (int i = 0; i < depth; ++i) text += "fn() -> ";
    return text + "f32[]) {\n  %x\n}\n";
  };
  CHECK(reprint(nested_fn_type(999)) == nested_fn_type(999));
  CHECK_NIMBLE_ERROR(parse(nested_fn_type(1000), kFile), nimble::ErrorKind::parse_error,
                     "test.nir:1:8012: nesting deeper than 1000 levels");
  // A long chain of lets is not nesting.
  std::string chain = "def @f(%x0: f32[]) {\n";
  for (int i = 1; i <= 5000; ++i)
    chain += fmt::format("  let %x{} = add(%x{}, %x{});\n", i, i - 1, i - 1);
  chain += "  %x5000\n}\n";
  CHECK(reprint(chain) == chain);
}

// --- Robustness ------------------------------------------------------------------------

namespace {

const char* const kSample =
    "type List<T> { Nil, Cons(T, List<T>) }\n"
    "\n"
    "entry def @main(%x: f32[n<=8, 768], %w: f32[768, 768], %b: f32[768]) -> f32[n, 1] {\n"
    "  let %0: f32[n, 768] = dense(%x, %w, %b);  // a comment\n"
    "  let %s = sum(%0, axes=[1, -2], keepdims=true, eps=1e-05, name=\"s\\n\", t=f16);\n"
    "  let %c = const f32[2] [1.5, -inf];\n"
    "  let %f = fn (%y: (f32[?], i64[])) -> fn() -> bool[] {\n"
    "    if (true) { %y.1 } else { (-nanf32, 3i8, Nil).0 }\n"
    "  };\n"
    "  match (Cons(%s, Nil)) {\n"
    "    Cons(%h, (_, %t,)) => { @main(%h, %w, %b) },\n"
    "    _ => { %s }\n"
    "  }\n"
    "}\n";

/// Parses `text`; it must either read, and then print as a fixed point, or
/// throw nimble::Error — never crash, hang or throw anything else.
void check_parses_or_fails_cleanly(const std::string& text) {
  Module m;
  try {
    m = parse(text, kFile);
  } catch (const nimble::Error& e) {
    CHECK(e.kind() == nimble::ErrorKind::parse_error);
    return;
  }
  const std::string printed = print(m);
  INFO("input: " << text);
  CHECK(reprint(printed) == printed);
}

}  // namespace

TEST_CASE("parse: the sample is valid", "[ir]") {
  const Module m = parse(kSample, kFile);
  CHECK(m.functions().size() == 1);
  check_parses_or_fails_cleanly(kSample);
}

TEST_CASE("parse: every prefix of a valid program parses or fails cleanly", "[ir]") {
  const std::string sample = kSample;
  for (std::size_t n = 0; n <= sample.size(); ++n)
    check_parses_or_fails_cleanly(sample.substr(0, n));
}

TEST_CASE("parse: random edits and token soups parse or fail cleanly", "[ir]") {
  std::mt19937 rng(20240521);
  const std::string sample = kSample;
  const std::string alphabet = "(){}[]<>,:;=-?%@.\"\\/ \n_aAfi0123456789e+xT$";
  auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };
  for (int round = 0; round < 400; ++round) {
    std::string text = sample;
    const int edits = 1 + static_cast<int>(pick(4));
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = pick(text.size());
      switch (pick(3)) {
        case 0:
          text.erase(at, 1 + pick(8));
          break;
        case 1:
          text.insert(at, 1, alphabet[pick(alphabet.size())]);
          break;
        default:
          text[at] = alphabet[pick(alphabet.size())];
          break;
      }
    }
    check_parses_or_fails_cleanly(text);
  }
  const std::vector<std::string> tokens = {
      "type", "def",  "entry", "let",  "if", "else",   "match",  "fn",  "const", "true",
      "_",    "List", "Nil",   "Cons", "T",  "add",    "sum",    "f32", "i64",   "%x",
      "%y",   "@f",   "@main", "1i64", "-2", "0.5f32", "inff32", "inf", "nan",   "\"s\"",
      ".0",   "(",    ")",     "{",    "}",  "[",      "]",      "<",   ">",     ",",
      ":",    ";",    "=",     "->",   "=>", "-",      "<=",     "?",   "axes"};
  for (int round = 0; round < 400; ++round) {
    std::string text;
    const std::size_t length = 1 + pick(40);
    // Half of them inside a function body, where more of them read.
    if (round % 2) text = "def @f(%x: f32[], %y: List<f32[]>) { ";
    for (std::size_t i = 0; i < length; ++i) text += tokens[pick(tokens.size())] + " ";
    if (round % 2) text += "}\ntype List<T> { Nil, Cons(T, List<T>) }";
    check_parses_or_fails_cleanly(text);
  }
}

TEST_CASE("round trip: a constant of one repeated value prints as a splat", "[ir]") {
  check_round_trip(
      "def @f() {\n"
      "  let %z = const f32[1, 512] [0; 512];\n"
      "  let %o = const bool[2, 2] [true; 4];\n"
      "  let %m = const i32[3] [7, 7, 8];\n"
      "  (%z, %o, %m)\n"
      "}\n");
  const Module m = parse("def @f() {\n  const f32[2, 3] [-1.5; 6]\n}\n", kFile);
  const Tensor t = function_of(m, "f").body.as<ConstantNode>()->value;
  CHECK(t.shape() == Shape{2, 3});
  for (float v : t.values<float>()) CHECK(v == -1.5f);
  // Two equal values print as a splat too.
  CHECK(reprint("def @f() {\n  const i64[2] [4, 4]\n}\n") ==
        "def @f() {\n  const i64[2] [4; 2]\n}\n");
  CHECK_NIMBLE_ERROR(parse("def @f() {\n  const f32[2, 3] [0; 5]\n}\n", kFile),
                     ErrorKind::parse_error, "test.nir:2:19: expected 6 values for f32[2, 3], got 5");
  CHECK_NIMBLE_ERROR(parse("def @f() {\n  const f32[2] [0; x]\n}\n", kFile),
                     ErrorKind::parse_error, "test.nir:2:20: expected a count, got 'x'");
}
