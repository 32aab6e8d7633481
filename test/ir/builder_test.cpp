// The fluent builder: every construct builds, prints, parses back and
// type-checks; the three models infer the types the issue asks for; type
// errors name the op, the types and the C++ line.
#include "nimble/builder.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <functional>
#include <limits>

#include "models/bert.hpp"
#include "models/lstm.hpp"
#include "models/tree_lstm.hpp"
#include "nimble/compile.hpp"
#include "nimble/interpreter.hpp"
#include "nimble/vm/virtual_machine.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using nimble::testing::IsCloseTo;

namespace {

std::string type_of(const ir::Module& m, const char* fn) {
  return ir::to_string(m.find_function(fn).type());
}

// print -> parse -> print is identical, and the parsed module type-checks to
// the same function types.
void check_round_trip(const ir::Module& m) {
  const std::string text = ir::print(m);
  const ir::Module parsed = ir::parse(text);
  CHECK(ir::print(parsed) == text);
  ir::verify(parsed);
  ir::infer_types(parsed);
  for (const auto& [name, fn] : m.functions())
    CHECK(ir::to_string(parsed.find_function(name).type()) == ir::to_string(fn.type()));
}

}  // namespace

TEST_CASE("the LSTM over xs[?, 1, 300] infers [?, 1, 512]", "[ir]") {
  Builder b;
  models::build_lstm(b);
  const ir::Module m = b.build();
  CHECK(type_of(m, "lstm_cell") ==
        "fn(f32[1, 2048], f32[1, 512], f32[1, 512], f32[2048, 512], f32[2048]) -> (f32[1, 512], f32[1, 512])");
  CHECK(type_of(m, "lstm_layer") ==
        "fn(f32[n, 1, k], f32[2048, k], f32[2048, 512], f32[2048], f32[2048]) -> f32[?, 1, 512]");
  CHECK(type_of(m, "lstm") ==
        "fn(f32[?, 1, 300], f32[2048, 300], f32[2048, 512], f32[2048], f32[2048], f32[2048, 512], "
        "f32[2048, 512], f32[2048], f32[2048]) -> f32[?, 1, 512]");
  CHECK(m.is_entry("lstm"));
  check_round_trip(m);
}

TEST_CASE("the Tree-LSTM's recursion type-checks", "[ir]") {
  Builder b;
  models::build_tree_lstm(b);
  const ir::Module m = b.build();
  CHECK(type_of(m, "tree_lstm") ==
        "fn(Tree, f32[n, 300], f32[450, 300], f32[450], f32[750, 300], f32[750]) -> "
        "(f32[150], f32[150])");
  check_round_trip(m);
}

TEST_CASE("a BERT layer over [n, 768] infers [n, 768]", "[ir]") {
  Builder b;
  models::build_bert(b);
  const ir::Module m = b.build();
  const std::string layer = type_of(m, "bert_layer");
  CHECK(layer.starts_with("fn(f32[n, 768], f32[768, 768], f32[768], "));
  CHECK(layer.ends_with(") -> f32[n, 768]"));
  CHECK(type_of(m, "bert").ends_with(") -> f32[n, 768]"));
  check_round_trip(m);
}

TEST_CASE("statements bind lets named after their ops", "[ir]") {
  Builder b;
  const Dim n{"n"};
  b.entry(b.def("f", {{"x", f32({n, 4})}, {"w", f32({8, 4})}, {"bias", f32({8})}},
                [&](Expr x, Expr w, Expr bias) {
                  Expr y = dense(x, w, bias);
                  Expr h = let("h", relu(y));
                  return -(h * 2.0) + h;
                }));
  const ir::Module m = b.build();
  CHECK(ir::print(m) ==
        "entry def @f(%x: f32[n, 4], %w: f32[8, 4], %bias: f32[8]) {\n"
        "  let %dense = dense(%x, %w, %bias);\n"
        "  let %h = relu(%dense);\n"
        "  let %mul = mul(%h, 2f32);\n"
        "  let %neg = neg(%mul);\n"
        "  let %add = add(%neg, %h);\n"
        "  %add\n"
        "}\n");
  CHECK(type_of(m, "f") == "fn(f32[n, 4], f32[8, 4], f32[8]) -> f32[n, 8]");
  check_round_trip(m);
}

TEST_CASE("if, loops, closures, tuples, ADTs and match build and type-check", "[ir]") {
  Builder b;
  Adt list = b.list();
  Adt option = b.option();
  const Constructor nil = list["Nil"], cons = list["Cons"];
  const Constructor none = option["None"], some = option["Some"];
  const Type vec = f32({3});

  // Recursion through a declared signature: the length of a list.
  Function length = b.declare("length", {{"xs", list.type({vec})}}, i64({}));
  b.define(length, [&](Expr xs) -> Expr {
    return Match(xs)
        .case_(nil, [&] { return scalar(0, DType::i64); })
        .case_(cons, [&](Expr, Expr tail) { return length(tail) + 1.0; });
  });

  // Nested patterns and a wildcard: the second element, if any.
  Function second = b.def("second", {{"xs", list.type({vec})}}, [&](Expr xs) -> Expr {
    return Match(xs)
        .case_(Pat(cons, {Pat::wildcard(), Pat(cons, {Pat::bind("y"), Pat::wildcard()})}),
               [&](Expr y) { return some({y}); })
        .otherwise([&] { return none(); });
  });

  Function main = b.def(
      "main", {{"x", vec}, {"n", i64({})}}, [&](Expr x, Expr n) {
        // A closure capturing x.
        Closure scale = closure({{"y", vec}}, vec, [&](Expr y) { return y * x; });
        // if with a join: both branches f32[3].
        Expr picked = if_(n < scalar(3, DType::i64), [&] { return scale(x); },
                          [&] { return x; });
        // A counted loop whose list state grows, and one whose tensor shape changes.
        auto [acc, xs] = foreach_(n, std::array<Expr, 2>{picked, nil()},
                                  [&](Expr, std::array<Expr, 2> s) {
                                    return std::array{s[0] + x, cons({s[0], s[1]})};
                                  });
        auto [grown] = foreach_(n, std::array<Expr, 1>{x}, [&](Expr, std::array<Expr, 1> s) {
          return std::array{concatenate({s[0], x}, 0)};
        });
        auto [count] = while_loop(
            std::array<Expr, 1>{scalar(0, DType::i64)}, [&](std::array<Expr, 1> s) { return s[0] < n; },
            [&](std::array<Expr, 1> s) { return std::array{s[0] + 1.0}; });
        auto [t0, t1] = unpack<2>(tuple({length(xs), second(xs)}));
        return std::array{acc, grown, count, t0, t1};
      });
  b.entry(main);
  const ir::Module m = b.build();
  CHECK(type_of(m, "length") == "fn(List<f32[3]>) -> i64[]");
  CHECK(type_of(m, "second") == "fn(List<f32[3]>) -> Option<f32[3]>");
  CHECK(type_of(m, "main") == "fn(f32[3], i64[]) -> (f32[3], f32[?], i64[], i64[], Option<f32[3]>)");
  check_round_trip(m);
}

TEST_CASE("mutual recursion through declarations", "[ir]") {
  Builder b;
  Function is_even = b.declare("is_even", {{"n", i64({})}}, bool_t({}));
  Function is_odd = b.declare("is_odd", {{"n", i64({})}}, bool_t({}));
  auto body = [&](const Function& other, bool at_zero) {
    return [&other, at_zero](Expr n) {
      return if_(equal(n, scalar(0, DType::i64)),
                 [&] { return constant(Tensor::scalar(at_zero)); },
                 [&] { return other(n - 1.0); });
    };
  };
  b.define(is_even, body(is_odd, true));
  b.define(is_odd, body(is_even, false));
  b.entry(is_even);
  const ir::Module m = b.build();
  CHECK(type_of(m, "is_even") == "fn(i64[]) -> bool[]");
  check_round_trip(m);
}

TEST_CASE("type errors name the op, the types and the C++ line", "[ir]") {
  Builder b;
  auto build = [&] {
    (void)b.def("bad", {{"x", f32({Any, 300})}, {"w", f32({2048, 512})}, {"bias", f32({2048})}},
                [&](Expr x, Expr w, Expr bias) { return dense(x, w, bias); });
  };
  const int line = __LINE__ - 2;  // the line of dense(...) above
  CHECK_NIMBLE_ERROR(build(), ErrorKind::type_error,
                     fmt::format("dense: x has 300 columns but weight expects 512 (in "
                                 "`dense(%x, %w, %bias)`, built at builder_test.cpp:{})",
                                 line));
}

TEST_CASE("a loop over shapes that change joins them to Any", "[ir]") {
  Builder b;
  b.def("grow", {{"x", f32({1, 4})}, {"n", i64({})}}, [&](Expr x, Expr n) {
    auto [y] = foreach_(n, std::array<Expr, 1>{x}, [&](Expr, std::array<Expr, 1> s) {
      return std::array{concatenate({s[0], x}, 0)};
    });
    return y;
  });
  const ir::Module m = b.build();
  CHECK(type_of(m, "grow") == "fn(f32[1, 4], i64[]) -> f32[?, 4]");
}

TEST_CASE("builder misuse is reported", "[ir]") {
  Builder b;
  b.declare("never", {{"x", f32({1})}}, f32({1}));
  CHECK_THROWS_AS(b.build(), Error);
  CHECK_THROWS_AS(relu(ir::var("x", f32({1}))), Error);  // outside a body
  Builder c;
  CHECK_THROWS_AS(c.def("f", {{"x", f32({1})}}, [&](Expr x, Expr y) { return add(x, y); }),
                  Error);  // the lambda takes 2 arguments, the function has 1
  CHECK_THROWS_AS(c.list()["Snoc"], Error);
}

TEST_CASE("host-side ADT values: build a tree, read it back", "[ir]") {
  Builder b;
  models::build_tree_lstm(b);
  const Adt tree(b.module().find_adt("Tree"));
  const Constructor leaf = tree["Leaf"], node = tree["Node"];
  auto l = [&](std::int64_t j) { return leaf.value({Tensor::scalar(j)}); };
  // The W2 tree for n = 8 of workloads.md: ((0, (((1, 2), 3), 4)), ((5, 6), 7)).
  const Value t = node.value({node.value({l(0), node.value({node.value({node.value({l(1), l(2)}),
                                                                       l(3)}),
                                                           l(4)})}),
                              node.value({node.value({l(5), l(6)}), l(7)})});
  // Read it back as text, in the notation of workloads.md.
  std::function<std::string(const Value&)> show = [&](const Value& v) -> std::string {
    if (leaf.made(v)) return std::to_string(v[0].tensor().at<std::int64_t>({}));
    return fmt::format("({}, {})", show(v[0]), show(v[1]));
  };
  CHECK(show(t) == "((0, (((1, 2), 3), 4)), ((5, 6), 7))");
  CHECK_NIMBLE_ERROR(leaf.value({}), ErrorKind::invalid_argument, "Leaf: expected 1 fields, got 0");
}

TEST_CASE("unknown types that would form a cycle are a type error, not a crash", "[ir]") {
  Builder b;
  Adt option = b.option();
  Adt list = b.list();
  auto build_option = [&] {
    (void)b.def("f", {{"c", bool_t({})}}, [&](Expr c) {
      Expr x = let("x", option["None"]());
      return if_(c, [&] { return option["Some"]({x}); }, [&] { return x; });
    });
  };
  CHECK_THROWS_AS(build_option(), Error);
  auto build_list = [&] {
    (void)b.def("g", {}, [&](std::span<const Expr>) {
      Expr n = let("n", list["Nil"]());
      return list["Cons"]({n, n});
    });
  };
  CHECK_THROWS_AS(build_list(), Error);
}

TEST_CASE("let keeps handles the user still holds bound", "[ir]") {
  Builder b;
  b.def("f", {{"x", f32({2})}}, [&](Expr x) {
    Expr r = relu(x);
    Expr h = let("h", r);  // r is still used below: h becomes an alias
    return r + h;
  });
  CHECK(ir::to_string(b.build().find_function("f").type()) == "fn(f32[2]) -> f32[2]");
}

TEST_CASE("a declared symbolic return type is not satisfied by a fixed dim", "[ir]") {
  Builder b;
  const Dim n{"n"};
  CHECK_THROWS_WITH(
      b.def("f", {{"x", f32({n})}}, f32({n}), [](Expr x) { return sum(x, {}, true); }),
      Catch::Matchers::StartsWith(
          "@f: the body's type f32[1] does not match the declared return type f32[n]"));
}

TEST_CASE("a loop state whose type is never known is reported", "[ir]") {
  Builder b;
  Adt list = b.list();
  CHECK_THROWS_WITH(b.def("f", {{"n", i64({})}},
                          [&](Expr n) {
                            auto [xs] = foreach_(n, std::array<Expr, 1>{list["Nil"]()},
                                                 [&](Expr, std::array<Expr, 1> s) {
                                                   return std::array{s[0]};
                                                 });
                            return xs;
                          }),
                    Catch::Matchers::StartsWith("loop: the type of state 0 is not known "
                                                "(List<?T"));
}

TEST_CASE("errors in calls and numbers name the user's line", "[ir]") {
  Builder b;
  Function g = b.def("g", {{"x", f32({2})}}, [](Expr x) { return x; });
  auto call_badly = [&] {
    (void)b.def("f", {{"y", f32({3})}}, [&](Expr y) { return g(y); });
  };
  const int line = __LINE__ - 2;
  CHECK_NIMBLE_ERROR(call_badly(), ErrorKind::type_error,
                     fmt::format("call of @g: argument 1 must be f32[2], got f32[3] (in `@g(%y)`, "
                                 "built at builder_test.cpp:{})",
                                 line));
  CHECK_THROWS_WITH(
      b.def("h", {{"i", i64({2})}}, [](Expr i) { return i * 0.5; }),
      Catch::Matchers::StartsWith("the number 0.5 cannot be used with a i64 tensor"));
}

TEST_CASE("numbers mix with tensors on either side, dim() reads a run-time dim, loop counts of any integer dtype",
          "[ir]") {
  Builder b;
  const Dim n{"n"};
  b.entry(b.def("f", {{"z", f32({n})}}, [](Expr z) {
    Expr half_complement = 2.0 * (1.0 - z) / 4.0;  // (1 - z) / 2
    Expr inverse = 3.0 / (z + 2.0);
    Expr picked = where(0.0 < z, half_complement, inverse);
    return tuple({picked + cast(z >= 1.5, DType::f32), dim(z, 0), dim(z, -1)});
  }));
  b.entry(b.def("g", {{"k", i32({})}, {"x", f32({2})}}, [](Expr k, Expr x) {
    auto [y] = foreach_(k, std::array<Expr, 1>{x},
                        [](Expr, std::array<Expr, 1> s) { return std::array<Expr, 1>{s[0] * 2.0}; });
    return y;
  }));
  const ir::Module m = b.build();
  check_round_trip(m);
  CHECK(type_of(m, "f") == "fn(f32[n]) -> (f32[n], i64[], i64[])");

  const std::vector<Value> z{Tensor::from_data<float>({3}, {-1.0f, 0.5f, 2.0f})};
  const std::vector<Value> g_args{Tensor::scalar<std::int32_t>(3), Tensor::from_data<float>({2}, {1.0f, -0.5f})};
  vm::VirtualMachine machine(compile(m));
  for (const Value& out : {evaluate(m, "f", z), machine.invoke("f", z)}) {
    // z = -1: 3 / (z + 2) = 3; z = 0.5: (1 - z) / 2 = 0.25; z = 2: (1 - z) / 2 + 1 = 0.5.
    CHECK_THAT(out[0].tensor(), IsCloseTo(Tensor::from_data<float>({3}, {3.0f, 0.25f, 0.5f})));
    CHECK(out[1].tensor().at<std::int64_t>({}) == 3);
    CHECK(out[2].tensor().at<std::int64_t>({}) == 3);
  }
  for (const Value& out : {evaluate(m, "g", g_args), machine.invoke("g", g_args)})
    CHECK_THAT(out.tensor(), IsCloseTo(Tensor::from_data<float>({2}, {8.0f, -4.0f})));

  Builder bad;
  CHECK_THROWS_WITH(bad.def("h", {{"x", f32({2})}}, [](Expr x) { return dim(x, 2); }),
                    Catch::Contains("dim: axis 2 is out of range for a tensor of rank 1 (f32[2])"));
  CHECK_THROWS_WITH(bad.def("k", {{"c", f32({})}, {"x", f32({2})}},
                            [](Expr c, Expr x) {
                              auto [y] = foreach_(c, std::array<Expr, 1>{x},
                                                  [](Expr, std::array<Expr, 1> s) { return s; });
                              return y;
                            }),
                    Catch::Contains("foreach_: the count must be an integer scalar (i64[], i32[], ...), got f32[]"));
}

TEST_CASE("argmax and argmin of a vector are i64 scalars; argmin reverses the order without overflow", "[ir]") {
  Builder b;
  const Dim n{"n"};
  b.entry(b.def("f", {{"x", f32({n})}}, [](Expr x) { return tuple({argmax(x, 0), argmin(x, 0)}); }));
  b.entry(b.def("g", {{"k", i32({4})}}, [](Expr k) { return tuple({argmin(k, 0), argmin(k, 0, true)}); }));
  const ir::Module m = b.build();
  check_round_trip(m);
  CHECK(type_of(m, "f") == "fn(f32[n]) -> (i64[], i64[])");
  CHECK(type_of(m, "g") == "fn(i32[4]) -> (i64[], i64[1])");
  const std::vector<Value> x{Tensor::from_data<float>({5}, {2.0f, -3.0f, 7.0f, -3.0f, 7.0f})};
  const std::vector<Value> k{Tensor::from_data<std::int32_t>(
      {4}, {5, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(), -1})};
  vm::VirtualMachine machine(compile(m));
  for (const Value& out : {evaluate(m, "f", x), machine.invoke("f", x)}) {
    CHECK(out[0].tensor().at<std::int64_t>({}) == 2);  // the first of two maxima
    CHECK(out[1].tensor().at<std::int64_t>({}) == 1);  // the first of two minima
  }
  for (const Value& out : {evaluate(m, "g", k), machine.invoke("g", k)}) {
    CHECK(out[0].tensor().at<std::int64_t>({}) == 1);
    CHECK(out[1].tensor().at<std::int64_t>({0}) == 1);
  }
}

TEST_CASE("nonzero gives the indices of the nonzero elements, however many", "[ir]") {
  Builder b;
  const Dim n{"n"};
  b.entry(b.def("f", {{"x", f32({n, 2})}}, [](Expr x) { return nonzero(x); }));
  const ir::Module m = b.build();
  check_round_trip(m);
  CHECK(type_of(m, "f") == "fn(f32[n, 2]) -> i64[?, 2]");
  const std::vector<Value> x{Tensor::from_data<float>({3, 2}, {0.0f, 3.0f, 0.0f, 0.0f, -1.0f, 0.5f})};
  const Tensor expected = Tensor::from_data<std::int64_t>({3, 2}, {0, 1, 2, 0, 2, 1});
  vm::VirtualMachine machine(compile(m));
  for (const Value& out : {evaluate(m, "f", x), machine.invoke("f", x)}) {
    REQUIRE(out.tensor().shape() == expected.shape());
    CHECK_THAT(out.tensor(), IsCloseTo(expected));
  }
}

TEST_CASE("dense without a bias is x times weight transposed, at any rank of x", "[ir]") {
  Builder b;
  const Dim n{"n"};
  b.entry(b.def("f", {{"x", f32({n, 3})}, {"w", f32({2, 3})}}, [](Expr x, Expr w) { return dense(x, w); }));
  b.entry(b.def("g", {{"x", f32({2, n, 3})}, {"w", f32({2, 3})}}, [](Expr x, Expr w) { return dense(x, w); }));
  const ir::Module m = b.build();
  check_round_trip(m);
  CHECK(type_of(m, "f") == "fn(f32[n, 3], f32[2, 3]) -> f32[n, 2]");
  CHECK(type_of(m, "g") == "fn(f32[2, n, 3], f32[2, 3]) -> f32[2, n, 2]");
  const Tensor w = Tensor::from_data<float>({2, 3}, {1, 0, 2, -1, 1, 0});
  const Tensor x = Tensor::from_data<float>({1, 3}, {1, 2, 3});  // · wᵀ = [1 + 6, -1 + 2]
  const Tensor x3 = Tensor::from_data<float>({2, 1, 3}, {1, 2, 3, 0, 0, 1});
  vm::VirtualMachine machine(compile(m));
  for (const Value& out : {evaluate(m, "f", {x, w}), machine.invoke("f", {x, w})})
    CHECK_THAT(out.tensor(), IsCloseTo(Tensor::from_data<float>({1, 2}, {7, 1})));
  for (const Value& out : {evaluate(m, "g", {x3, w}), machine.invoke("g", {x3, w})})
    CHECK_THAT(out.tensor(), IsCloseTo(Tensor::from_data<float>({2, 1, 2}, {7, 1, 2, 0})));
}
