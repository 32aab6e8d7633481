// The VM against the reference interpreter: the same kernels run, so results
// must be exactly equal — control flow, recursion, closures, ADTs, dynamic
// shapes, the three models — plus argument checks and the profiler.
#include <catch2/catch.hpp>

#include <cstring>

#include "models/bert.hpp"
#include "models/lstm.hpp"
#include "models/tree_lstm.hpp"
#include "models/workloads.hpp"
#include "nimble/nimble.hpp"
#include "support/tensor_matchers.hpp"
#include "support/same_value.hpp"

using namespace nimble;
using nimble::testing::close_value;
using nimble::testing::same_value;

namespace {

Tensor i64s(std::int64_t v) { return Tensor::scalar<std::int64_t>(v); }

ir::Module typed(const char* text) {
  ir::Module m = ir::parse(text);
  ir::verify(m);
  ir::infer_types(m);
  return m;
}

// Runs `entry` on both engines: with the reference kernels the VM's result
// must be the interpreter's exactly; with the JIT's, within float tolerance.
Value check_same(const ir::Module& m, const std::string& entry, const std::vector<Value>& args) {
  const Value expected = evaluate(m, entry, args);
  vm::VirtualMachine machine(compile(m));
  CHECK(close_value(machine.invoke(entry, args), expected, {.rtol = 1e-4, .atol = 1e-5}));
  machine.set_kernel_provider("reference");
  const Value actual = machine.invoke(entry, args);
  CHECK(same_value(actual, expected));
  return actual;
}

Value tree_value(const workloads::TreeShape& t, const Adt& tree) {
  if (t.leaf >= 0) return tree["Leaf"].value({Tensor::scalar(t.leaf)});
  return tree["Node"].value({tree_value(*t.left, tree), tree_value(*t.right, tree)});
}

}  // namespace

TEST_CASE("VM: recursion 10,000 calls deep and a loop of 100,000 steps", "[vm]") {
  Builder b;
  Function depth = b.declare("depth", {{"n", i64({})}}, i64({}));
  b.define(depth, [&](Expr n) {
    return if_(equal(n, scalar(0, DType::i64)), [&] { return scalar(0, DType::i64); },
               [&] { return depth(n - 1.0) + 1.0; });
  });
  b.entry(depth);
  b.entry(b.def("sum_to", {{"n", i64({})}}, [&](Expr n) {
    auto [total] = foreach_(n, std::array<Expr, 1>{scalar(0, DType::i64)},
                            [&](Expr i, std::array<Expr, 1> s) { return std::array{s[0] + i}; });
    return total;
  }));
  const ir::Module m = b.build();
  vm::VirtualMachine machine(compile(m));
  CHECK(machine.invoke("depth", {i64s(10'000)}).tensor().at<std::int64_t>({}) == 10'000);
  CHECK(machine.invoke("sum_to", {i64s(100'000)}).tensor().at<std::int64_t>({}) == 4'999'950'000);
  check_same(m, "depth", {i64s(100)});
  check_same(m, "sum_to", {i64s(1000)});
}

TEST_CASE("VM: tensor arguments are borrowed for the call: returned, repeated and viewed, they stay the caller's",
          "[vm]") {
  Builder b;
  b.entry(b.def("same", {{"x", f32({4})}}, [](Expr x) { return x; }));
  b.entry(b.def("both", {{"x", f32({4})}, {"y", f32({4})}},
                [](Expr x, Expr y) { return tuple({x, add(x, y), reshape(y, {2, 2}), x}); }));
  const ir::Module m = b.build();
  vm::VirtualMachine machine(compile(m));
  const Tensor x = Tensor::from_data<float>({4}, {1, 2, 3, 4});
  const Tensor y = Tensor::from_data<float>({4}, {10, 20, 30, 40});
  const std::uint32_t x_refs = x.storage()->use_count();
  const std::uint32_t y_refs = y.storage()->use_count();
  {
    // Returned as it came: the result holds the caller's storage.
    const Value same = machine.invoke("same", {x});
    CHECK(same.tensor().storage() == x.storage());
    CHECK(x.storage()->use_count() == x_refs + 1);
  }
  CHECK(x.storage()->use_count() == x_refs);
  {
    // The same argument twice, in a kernel and twice in the result, and a
    // view of the other: the views share the caller's storage.
    const std::vector<Value> args{x, y};
    const Value out = machine.invoke("both", args);
    CHECK(out[0].tensor().storage() == x.storage());
    CHECK(out[3].tensor().storage() == x.storage());
    CHECK(out[2].tensor().storage() == y.storage());
    CHECK(out[2].tensor().shape() == Shape{2, 2});
    CHECK_THAT(out[1].tensor(), nimble::testing::IsCloseTo(Tensor::from_data<float>({4}, {11, 22, 33, 44})));
    // Called again with the same Values: nothing of the first call is left
    // in the registers to hold them.
    (void)machine.invoke("both", args);
  }
  CHECK(x.storage()->use_count() == x_refs);
  CHECK(y.storage()->use_count() == y_refs);
  CHECK(x.data<float>()[0] == 1.0F);
}

TEST_CASE("VM: a call ending a match clause or an if branch is a tail call; fields never read are not loaded",
          "[vm]") {
  // count(xs, n) walks a list through a match whose Cons clause ends in an
  // if, each branch calling count: with the builder's lets around every
  // value (let r = count(...); r), each call is still in tail position, so
  // the walk runs in one frame. Its Cons clause tests no tag (Nil's clause
  // took every Nil) and loads the rest, not the head, which nothing reads.
  Builder b;
  Adt list = b.list();
  const Type ints = list.type({i64({})});
  Function count = b.declare("count", {{"xs", ints}, {"n", i64({})}}, i64({}));
  b.define(count, [&](Expr xs, Expr n) -> Expr {
    return Match(xs)
        .case_(list["Nil"], [&] { return n; })
        .case_(list["Cons"], [&](Expr, Expr rest) {
          return if_(n < scalar(1'000'000, DType::i64), [&] { return count(rest, n + scalar(1, DType::i64)); },
                     [&] { return count(rest, n); });
        });
  });
  // make(k, acc): a list of k cells, by a tail call in an if branch.
  Function make = b.declare("make", {{"k", i64({})}, {"acc", ints}}, ints);
  b.define(make, [&](Expr k, Expr acc) -> Expr {
    return if_(equal(k, scalar(0, DType::i64)), [&] { return acc; },
               [&] { return make(k - scalar(1, DType::i64), list["Cons"]({k, acc})); });
  });
  b.entry(b.def("main", {{"k", i64({})}}, [&](Expr k) {
    return count(make(k, list["Nil"]()), scalar(0, DType::i64));
  }));
  const ir::Module m = b.build();
  const vm::Executable exe = compile(m);
  const std::string code = exe.disassemble();
  const std::size_t begin = code.find("def @count"), end = code.find("\n\n", begin);
  REQUIRE(begin != std::string::npos);
  const std::string body = code.substr(begin, end - begin);
  INFO(body);
  const auto occurrences = [&](std::string_view what) {
    std::size_t n = 0;
    for (std::size_t at = body.find(what); at != std::string::npos; at = body.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(occurrences("TailCall") == 2);
  CHECK(occurrences("Invoke") == 0);
  CHECK(occurrences("GetTag") == 1);
  CHECK(occurrences("GetField") == 1);
  CHECK(code.find("def @make") != std::string::npos);
  CHECK(code.substr(code.find("def @make")).find("TailCall") < code.substr(code.find("def @make")).find("\n\n"));
  vm::VirtualMachine machine(exe);
  CHECK(machine.invoke("main", {i64s(200'000)}).tensor().at<std::int64_t>({}) == 200'000);
  check_same(m, "main", {i64s(50)});
  check_same(m, "main", {i64s(0)});
}

TEST_CASE("VM: closures, tuples, lists and match", "[vm]") {
  Builder b;
  Adt list = b.list();
  const Type vec = f32({2});
  Function total = b.declare("total", {{"xs", list.type({vec})}}, vec);
  b.define(total, [&](Expr xs) -> Expr {
    return Match(xs)
        .case_(list["Nil"], [&] { return constant(Tensor::zeros({2}, DType::f32)); })
        .case_(list["Cons"], [&](Expr h, Expr t) { return h + total(t); });
  });
  b.entry(b.def("main", {{"x", vec}, {"xs", list.type({vec})}}, [&](Expr x, Expr xs) {
    Closure scale = closure({{"y", vec}}, vec, [&](Expr y) { return y * x; });
    return tuple({scale(total(xs)), total(list["Cons"]({x, xs}))});
  }));
  const ir::Module m = b.build();
  const Tensor x = Tensor::from_data<float>({2}, {2, 3});
  const Value xs = list["Cons"].value(
      {Tensor::from_data<float>({2}, {1, 1}),
       list["Cons"].value({Tensor::from_data<float>({2}, {10, 20}), list["Nil"].value()})});
  const Value out = check_same(m, "main", {x, xs});
  CHECK(out[0].tensor().at<float>({1}) == 63.0f);
}

TEST_CASE("VM: text programs with dynamic shapes, views, tuples and data-dependent ops", "[vm]") {
  const ir::Module m = typed(R"(
    type List<T> { Nil, Cons(T, List<T>) }
    entry def @shapes(%x: f32[?, 4], %n: i64[]) -> (f32[?, 2, 2], i64[?, 2], f32[?], f32[?, 4]) {
      let %r = reshape(%x, newshape=[-1, 2, 2]);
      let %nz = nonzero(%x);
      let %a = arange(0.5f32, 3.5f32, 1f32);
      let %parts = split(%x, sections=2, axis=1);
      let %c = concatenate((%parts.1, %parts.0), axis=1);
      (%r, %nz, %a, %c)
    }
    entry def @stacked(%xs: List<f32[3]>) -> f32[?, 3] {
      stack(%xs, axis=0)
    }
  )");
  const Tensor x = Tensor::from_data<float>({3, 4}, {0, 1, 0, 2, 3, 0, 0, 4, 5, 6, 7, 0});
  check_same(m, "shapes", {x, i64s(3)});
  check_same(m, "shapes", {Tensor::zeros({0, 4}, DType::f32), i64s(0)});
  const Adt list(m.find_adt("List"));
  Value xs = list["Nil"].value();
  for (int k = 0; k < 4; ++k)
    xs = list["Cons"].value({Tensor::full({3}, k, DType::f32), xs});
  check_same(m, "stacked", {xs});
}

TEST_CASE("VM: the three models give the interpreter's results exactly", "[vm]") {
  SECTION("W1") {
    Builder b;
    models::build_lstm(b);
    const ir::Module m = b.build();
    const std::vector<Tensor> w = workloads::w1_weights();
    for (std::int64_t length : {1, 5}) {
      std::vector<Value> args{workloads::w1_input(length)};
      args.insert(args.end(), w.begin(), w.end());
      check_same(m, "lstm", args);
    }
  }
  SECTION("W2") {
    Builder b;
    models::build_tree_lstm(b);
    const ir::Module m = b.build();
    const Adt tree(m.find_adt("Tree"));
    const std::vector<Tensor> w = workloads::w2_weights();
    for (std::int64_t n : {1, 9, 19}) {  // 19: by levels (models::kTreeLevelsFrom)
      std::vector<Value> args{tree_value(*workloads::w2_tree(n), tree), workloads::w2_leaves(n)};
      args.insert(args.end(), w.begin(), w.end());
      check_same(m, "tree_lstm", args);
    }
  }
  SECTION("W3") {
    Builder b;
    models::build_bert(b);
    const ir::Module m = b.build();
    const Adt list(m.find_adt("List"));
    const auto layers = workloads::w3_weights(2);
    Value weights = list["Nil"].value();
    for (auto it = layers.rbegin(); it != layers.rend(); ++it)
      weights =
          list["Cons"].value({Value::tuple(std::vector<Value>(it->begin(), it->end())), weights});
    check_same(m, "bert", {workloads::w3_input(5), weights});
  }
}

TEST_CASE("VM: entry arguments are checked with the interpreter's messages", "[vm]") {
  Builder b;
  const Dim n{"n", 4};
  b.entry(b.def("f", {{"a", f32({n, 3})}, {"b", f32({n, Any})}},
                [](Expr a, Expr b2) { return tuple({a, b2}); }));
  const ir::Module m = b.build();
  vm::VirtualMachine machine(compile(m));
  const Tensor ok = Tensor::zeros({2, 3}, DType::f32);
  const std::vector<std::vector<Value>> bad = {
      {ok},
      {Tensor::zeros({2, 4}, DType::f32), ok},
      {Tensor::zeros({2, 3}, DType::i32), ok},
      {ok, Tensor::zeros({3, 3}, DType::f32)},
      {Tensor::zeros({5, 3}, DType::f32), ok},
      {Value::tuple({}), ok}};
  for (const auto& args : bad) {
    std::string expected, actual;
    try {
      (void)evaluate(m, "f", args);
    } catch (const Error& e) {
      expected = e.what();
    }
    try {
      (void)machine.invoke("f", args);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::type_error);
      actual = e.what();
    }
    CHECK(!expected.empty());
    CHECK(actual == expected);
  }
  CHECK_NIMBLE_ERROR(machine.invoke("g", {}), ErrorKind::invalid_argument,
                     "invoke: the executable has no function @g");
  // The VM is usable after an error.
  CHECK_NOTHROW(machine.invoke("f", {ok, ok}));
}

TEST_CASE("VM: kernel errors name the primitive and leave the VM usable", "[vm]") {
  const ir::Module m = typed(R"(
    entry def @pick(%x: f32[4], %i: i64[1]) -> f32[1] {
      take(%x, %i)
    }
    entry def @divide(%a: i64[], %b: i64[]) -> i64[] {
      div(%a, %b)
    }
  )");
  vm::VirtualMachine machine(compile(m));
  const Tensor x = Tensor::from_data<float>({4}, {1, 2, 3, 4});
  const auto at = [](std::int64_t i) { return Tensor::from_data<std::int64_t>({1}, {i}); };
  CHECK(machine.invoke("pick", {x, at(2)}).tensor().at<float>({0}) == 3.0f);
  CHECK_THROWS_AS(machine.invoke("pick", {x, at(4)}), Error);
  try {
    (void)machine.invoke("pick", {x, at(4)});
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("take_0") != std::string::npos);
  }
  CHECK_NIMBLE_ERROR(machine.invoke("divide", {i64s(1), i64s(0)}), ErrorKind::runtime_error,
                     "integer division by zero");
  CHECK(machine.invoke("divide", {i64s(-7), i64s(2)}).tensor().at<std::int64_t>({}) == -3);
  CHECK(machine.invoke("pick", {x, at(0)}).tensor().at<float>({0}) == 1.0f);
}

TEST_CASE("VM: take of a row by a scalar index is a view of it, checked as the kernel checks", "[vm]") {
  // Row i of a [3, 4] and element i of a [4] (a 0-d view), each read by
  // more than one kernel or returned (so that fusion leaves the take alone).
  const ir::Module m = typed(R"(
    entry def @rows(%x: f32[3, 4], %i: i64[]) -> (f32[4], f32[4], f32[]) {
      let %r = take(%x, %i);
      let %a = tanh(%r);
      let %b = sigmoid(%r);
      let %v = take(%a, %i);
      (%a, %b, %v)
    }
  )");
  const vm::Executable exe = compile(m);
  const std::string code = exe.disassemble();
  INFO(code);
  const std::size_t first = code.find("TakeRow");
  CHECK(first != std::string::npos);
  CHECK(code.find("TakeRow", first + 1) != std::string::npos);
  vm::VirtualMachine machine(exe);
  const Tensor x = Tensor::from_data<float>({3, 4}, {1, 2, 3, 4, -1, -2, -3, -4, 0.5, 0.25, 0.125, 0});
  for (std::int64_t i : {0, 1, 2}) {
    INFO("row " << i);
    CHECK(close_value(machine.invoke("rows", {x, i64s(i)}), evaluate(m, "rows", {x, i64s(i)}), {.rtol = 1e-5, .atol = 1e-6}));
  }
  for (std::int64_t i : {3, -1})
    CHECK_NIMBLE_ERROR(machine.invoke("rows", {x, i64s(i)}), ErrorKind::runtime_error,
                       "indices = " + std::to_string(i) + " is out of range for axis 0 of data [3, 4] (extent 3)");
  CHECK(close_value(machine.invoke("rows", {x, i64s(1)}), evaluate(m, "rows", {x, i64s(1)}), {.rtol = 1e-5, .atol = 1e-6}));
}

TEST_CASE("VM: the profiler counts kernels and instructions only when on", "[vm]") {
  const ir::Module m = typed(R"(
    entry def @f(%x: f32[8]) -> f32[8] {
      let %y = add(%x, %x);
      mul(%y, %y)
    }
  )");
  vm::VirtualMachine machine(compile(m));
  const Tensor x = Tensor::full({8}, 1.5, DType::f32);
  (void)machine.invoke("f", {x});
  CHECK(machine.profile().primitives.empty());
  machine.set_profiling(true);
  (void)machine.invoke("f", {x});
  (void)machine.invoke("f", {x});
  const vm::Profile p = machine.profile();
  INFO(p.table());
  REQUIRE(p.primitives.size() == 2);
  CHECK(p.primitives[0].calls == 2);
  bool saw_packed = false;
  for (const auto& c : p.instructions)
    if (c.name == "InvokePacked") saw_packed = c.count == 4;
  CHECK(saw_packed);
  CHECK(p.table().find("| add_0 | 2 |") != std::string::npos);
}

TEST_CASE("VM: an executable saved and loaded runs with the same results", "[vm]") {
  Builder b;
  models::build_tree_lstm(b);
  const ir::Module m = b.build();
  const vm::Executable exe = compile(m);
  const std::vector<std::byte> image = exe.save();
  const vm::Executable loaded = vm::Executable::load(image);
  CHECK(loaded.disassemble() == exe.disassemble());
  CHECK(loaded.save() == image);

  const Adt tree(m.find_adt("Tree"));
  const std::vector<Tensor> w = workloads::w2_weights();
  std::vector<Value> args{tree_value(*workloads::w2_tree(7), tree), workloads::w2_leaves(7)};
  args.insert(args.end(), w.begin(), w.end());
  vm::VirtualMachine original(exe);
  vm::VirtualMachine reloaded(loaded);
  CHECK(same_value(reloaded.invoke("tree_lstm", args), original.invoke("tree_lstm", args)));
}

namespace {

// @chain(x: f32[1024], flag): y = x, then 100 times y = y * 1.001 + 0.5
// (200 ops, each output 4 KiB); returns y if flag else y - x.
ir::Module chain_with_branch() {
  Builder b;
  b.entry(b.def("chain", {{"x", f32({1024})}, {"flag", bool_t({})}}, [](Expr x, Expr flag) {
    Expr y = x;
    for (int i = 0; i < 100; ++i) y = (y * 1.001) + 0.5;
    return if_(flag, [&] { return y; }, [&] { return y - x; });
  }));
  return b.build();
}

}  // namespace

TEST_CASE("VM: a value's register and memory are reused once it is dead", "[vm]") {
  // 200 ops, each output 4 KiB: with every value kept to the end the frame
  // would hold 200 buffers; with registers reused, a dead output's storage
  // goes back to the pool when its register is overwritten. Both arms of the
  // `if` write the result; `x` stays live across the chain into the second.
  const ir::Module m = chain_with_branch();
  const vm::Executable exe = compile(m);
  const std::string text = exe.disassemble();
  const std::size_t at = text.find("registers: ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoi(text.substr(at + 11)) <= 8);

  vm::VirtualMachine machine(exe);
  const Tensor x = Tensor::full({1024}, 1.0, DType::f32);
  for (bool flag : {true, false}) {
    const Value warm = machine.invoke("chain", {x, Tensor::scalar(flag)});
    reset_engine_stats();
    // What other tests of this process left alive counts in the peak too.
    const std::size_t live_before = cpu_allocator().stats().live_bytes;
    const Value out = machine.invoke("chain", {x, Tensor::scalar(flag)});
    CHECK(engine_stats().peak_bytes - live_before <= 8 * 4096);
    CHECK(close_value(out, evaluate(m, "chain", {x, Tensor::scalar(flag)}), {.rtol = 1e-4, .atol = 1e-4}));
  }
}

namespace {

std::uint64_t executed(const vm::Profile& p, std::string_view opcode) {
  for (const auto& c : p.instructions)
    if (c.name == opcode) return c.count;
  return 0;
}

}  // namespace

TEST_CASE("VM: memory planning puts a function's intermediates in one arena", "[vm]") {
  // The chain of the test above, unfused: 200 kernel outputs of 4 KiB.
  // Planned, its intermediates share one arena allocated on entry; only what
  // is returned (y, or y - x) has its own storage.
  const ir::Module m = chain_with_branch();
  vm::VirtualMachine planned(compile(m, {.fuse_ops = false}));
  vm::VirtualMachine unplanned(compile(m, {.fuse_ops = false, .plan_memory = false}));
  planned.set_kernel_provider("reference");
  unplanned.set_kernel_provider("reference");
  planned.set_profiling(true);
  unplanned.set_profiling(true);
  const Tensor x = Tensor::full({1024}, 1.0, DType::f32);
  for (bool flag : {true, false}) {
    INFO("flag " << flag);
    planned.set_profiling(true);
    unplanned.set_profiling(true);
    const Value a = planned.invoke("chain", {x, Tensor::scalar(flag)});
    const Value expected = unplanned.invoke("chain", {x, Tensor::scalar(flag)});
    CHECK(same_value(a, expected));
    // Each storage only one tensor views is allocated with it (fresh_tensors):
    // unplanned, all of them; planned, what is returned.
    CHECK(executed(unplanned.profile(), "AllocStorage") == 0);
    CHECK(executed(unplanned.profile(), "AllocFreshTensor") == (flag ? 200u : 201u));
    CHECK(executed(planned.profile(), "AllocStorage") == 1);
    CHECK(executed(planned.profile(), "AllocFreshTensor") == (flag ? 1u : 2u));
    // The peak, with JIT kernels (the reference ones allocate temporaries).
    vm::VirtualMachine jit(compile(m, {.fuse_ops = false}));
    const Value warm = jit.invoke("chain", {x, Tensor::scalar(flag)});
    CHECK(close_value(warm, expected, {.rtol = 1e-4, .atol = 1e-4}));
    reset_engine_stats();
    const std::size_t before = cpu_allocator().stats().live_bytes;
    const Value again = jit.invoke("chain", {x, Tensor::scalar(flag)});
    // Two 4 KiB slots in the arena (an op's input and output), and the
    // result's own storage (with y's, when y - x is returned).
    CHECK(engine_stats().peak_bytes - before <= (flag ? 3 : 4) * 4096 + 64);
  }
}

TEST_CASE("VM: a value dies right after its last use, not when its frame ends", "[vm]") {
  // `a` is dead once `b` is computed, but the caller's frame would hold it
  // through the call of `sink` if only overwriting its register freed it.
  // With kills, at most three 4 KiB tensors are live at once: b (held by
  // the caller for the call, which is not a tail call: its result is used)
  // and, inside sink, an op's input and output (and a shape function's
  // 8-byte result); a 4th would be `a`.
  Builder b;
  Function sink = b.def("sink", {{"y", f32({Any})}}, [](Expr y) { return tanh(tanh(tanh(y))); });
  b.entry(b.def("main", {{"x", f32({Any})}}, [&](Expr x) {
    Expr a = exp(x);
    Expr c = a * 2.0;
    return sink(c) + 1.0;
  }));
  const ir::Module m = b.build();
  vm::VirtualMachine machine(compile(m, {.simplify = false, .fuse_ops = false}));
  const Tensor x = Tensor::full({1024}, 0.5, DType::f32);
  machine.set_memory_tracing(true);
  const Value out = machine.invoke("main", {x});
  CHECK(close_value(out, evaluate(m, "main", {x}), {.rtol = 1e-5, .atol = 1e-6}));
  const vm::MemoryTrace trace = machine.memory_trace();
  CHECK(trace.activation_lower_bound_bytes >= 3 * 4096);
  CHECK(trace.activation_lower_bound_bytes < 4 * 4096);
  CHECK(trace.activation_peak_bytes >= trace.activation_lower_bound_bytes);
  CHECK(trace.activation_peak_bytes < 4 * 4096);
  CHECK(machine.executable().disassemble().find("KillRegister") != std::string::npos);
}

TEST_CASE("VM: a recursion holds no arena of its callers' dead intermediates", "[vm]") {
  // Each level computes planned intermediates before and after its call.
  // With one arena per region (between calls), nothing planned is held
  // while the callee runs; one arena per function would be held by every
  // level of the recursion with nothing live in it.
  Builder b;
  Function down = b.declare("down", {{"n", i64({})}, {"x", f32({256})}}, f32({256}));
  b.define(down, [&](Expr n, Expr x) {
    return if_(equal(n, scalar(0, DType::i64)), [&] { return x * 0.5; }, [&] {
      Expr y = tanh(tanh(x * 0.9) + 0.1);
      Expr w = down(n - 1.0, y);
      return tanh(tanh(w * 1.1) + 0.2);
    });
  });
  b.entry(down);
  const ir::Module m = b.build();
  vm::VirtualMachine machine(compile(m, {.fuse_ops = false}));
  machine.set_memory_tracing(true);
  const Tensor x = Tensor::full({256}, 0.3, DType::f32);
  const Value out = machine.invoke("down", {i64s(40), x});
  CHECK(close_value(out, evaluate(m, "down", {i64s(40), x}), {.rtol = 1e-4, .atol = 1e-5}));
  const vm::MemoryTrace trace = machine.memory_trace();
  INFO("peak " << trace.activation_peak_bytes << ", lower bound " << trace.activation_lower_bound_bytes);
  CHECK(trace.activation_peak_bytes <= trace.activation_lower_bound_bytes * 5 / 4);
}

TEST_CASE("VM: the memory trace leaves out weights and inputs and counts an arena whole", "[vm]") {
  Builder b;
  b.entry(b.def("id", {{"x", f32({Any})}}, [](Expr x) { return x; }));
  const Tensor w = Tensor::full({256}, 2.0, DType::f32);
  b.entry(b.def("scale", {{"x", f32({256})}}, [&](Expr x) { return x * constant(w); }));
  vm::VirtualMachine machine(compile(b.build()));
  machine.set_memory_tracing(true);
  const Value same = machine.invoke("id", {Tensor::full({1024}, 1.0, DType::f32)});
  CHECK(machine.memory_trace().activation_peak_bytes == 0);
  CHECK(machine.memory_trace().activation_lower_bound_bytes == 0);
  const Value scaled = machine.invoke("scale", {Tensor::full({256}, 1.0, DType::f32)});
  CHECK(machine.memory_trace().activation_lower_bound_bytes == 1024);  // the result only
  machine.set_memory_tracing(false);
  CHECK(machine.memory_trace().activation_peak_bytes == 0);

  // chain_with_branch, unfused: its intermediates share an arena of two
  // 4 KiB slots, held whole while either is live; y - x has its own storage.
  vm::VirtualMachine chain(compile(chain_with_branch(), {.fuse_ops = false}));
  chain.set_memory_tracing(true);
  const Tensor x = Tensor::full({1024}, 1.0, DType::f32);
  const Value y = chain.invoke("chain", {x, Tensor::scalar(false)});
  CHECK(chain.memory_trace().activation_lower_bound_bytes == 2 * 4096);
  CHECK(chain.memory_trace().activation_peak_bytes == 3 * 4096);
}

TEST_CASE("VM: planned memory never holds a result, a tuple field or a value live across a call",
          "[vm]") {
  // Results of successive calls stay intact (the arena of the next call is
  // another); a tuple's fields and a value a recursive call outlives keep
  // their own storage.
  Builder b;
  b.entry(b.def("pair", {{"x", f32({64})}}, [](Expr x) {
    Expr y = sigmoid(x * 2.0);
    Expr z = tanh(y + 1.0);
    return tuple({y, z * 3.0, exp(z)});
  }));
  Function down = b.declare("down", {{"n", i64({})}, {"x", f32({16})}}, f32({16}));
  b.define(down, [&](Expr n, Expr x) {
    return if_(equal(n, scalar(0, DType::i64)), [&] { return x * 0.5; }, [&] {
      Expr y = tanh(x * 0.9) + 0.1;
      Expr w = down(n - 1.0, y * 1.1);
      return w + y;  // y lives across the call
    });
  });
  b.entry(down);
  const ir::Module m = b.build();
  const vm::Executable exe = compile(m);
  vm::VirtualMachine machine(exe);
  machine.set_kernel_provider("reference");
  const Tensor x1 = Tensor::full({64}, 0.25, DType::f32);
  const Tensor x2 = Tensor::full({64}, -0.75, DType::f32);
  const Value r1 = machine.invoke("pair", {x1});
  const Value r2 = machine.invoke("pair", {x2});
  CHECK(same_value(r1, evaluate(m, "pair", {x1})));
  CHECK(same_value(r2, evaluate(m, "pair", {x2})));
  const Tensor v = Tensor::full({16}, 0.3, DType::f32);
  for (std::int64_t n : {0, 1, 7, 300}) {
    INFO("n " << n);
    CHECK(same_value(machine.invoke("down", {i64s(n), v}), evaluate(m, "down", {i64s(n), v})));
  }
  vm::VirtualMachine jit(exe);
  CHECK(close_value(jit.invoke("down", {i64s(50), v}), evaluate(m, "down", {i64s(50), v}),
                    {.rtol = 1e-4, .atol = 1e-5}));
}
