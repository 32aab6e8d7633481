// Failure injection (nimble/support/fault_injection.hpp): the Nth of
// nimble's own allocations fails, for N spread over every allocation of
// each stage — parse, compile, load, the reference interpreter, the VM, and
// the JIT's lowering of a kernel. Each stage must end with
// Error(resource_exhausted) or finish; then the same objects run again and
// give the right answer. Under ASan (script/test asan) the leak check at
// exit proves that each unwinding freed what it held.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/tree_lstm.hpp"
#include "models/workloads.hpp"
#include "nimble/nimble.hpp"
#include "nimble/support/fault_injection.hpp"
#include "support/cache_scope.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using nimble::testing::IsCloseTo;

namespace {

Value tree_value(const workloads::TreeShape& t, const Adt& tree) {
  if (t.leaf >= 0) return tree["Leaf"].value({Tensor::scalar(t.leaf)});
  return tree["Node"].value({tree_value(*t.left, tree), tree_value(*t.right, tree)});
}

// The points to fail at: the first 12, then `spread` more evenly over the
// rest of the `total` a successful run passes.
std::vector<std::int64_t> failure_points(std::int64_t total, std::int64_t spread) {
  std::vector<std::int64_t> points;
  for (std::int64_t n = 1; n <= std::min<std::int64_t>(total, 12); ++n) points.push_back(n);
  for (std::int64_t i = 1; i <= spread && total > 12; ++i) points.push_back(12 + (total - 12) * i / spread);
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

// Runs `stage` once counting its allocation points, then once per failure
// point with that point failing: each run must throw
// Error(resource_exhausted) or return, and `check` must then hold for a run
// without injection. Nearly every injected run must fail or absorb the
// failure by design (the runs are the same each time, so each reaches its
// point).
void inject(const std::string& name, std::int64_t spread, const std::function<void()>& stage,
            const std::function<void()>& check) {
  count_allocations_start();
  stage();
  const std::int64_t total = count_allocations_stop();
  INFO(name << ": " << total << " allocation points");
  REQUIRE(total > 0);
  std::int64_t failed = 0;
  const std::vector<std::int64_t> points = failure_points(total, spread);
  for (const std::int64_t n : points) {
    INFO(name << ": allocation " << n << " of " << total << " fails");
    fail_nth_allocation(n);
    const std::uint64_t absorbed = engine_stats().specializations_failed;
    try {
      stage();
      // A failed specialization is not an error: the generic kernel serves
      // its bucket (counted).
      if (engine_stats().specializations_failed > absorbed) ++failed;
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::resource_exhausted);
      CHECK_THAT(e.message(), Catch::Contains("out of memory"));
      ++failed;
    }
    fail_nth_allocation(0);
    check();
  }
  CHECK(failed * 10 >= static_cast<std::int64_t>(points.size()) * 9);
}

}  // namespace

TEST_CASE("failure injection: every stage unwinds an allocation failure and runs again", "[vm]") {
  // One thread, compiles in the foreground: the Nth point is the same in
  // every run.
  struct OneThread {
    int saved = num_threads();
    OneThread() { set_num_threads(1); }
    ~OneThread() { set_num_threads(saved); }
  } one_thread;
  KernelCacheOptions options;
  options.background = false;
  options.disk_cache_dir = "";
  const nimble::testing::ScopedCacheOptions scope(options);

  Builder b;
  models::build_tree_lstm(b);
  const ir::Module built = b.build();
  const std::string text = ir::print(built);
  const Adt tree(built.find_adt("Tree"));
  const std::vector<Tensor> w = workloads::w2_weights();
  std::vector<Value> args{tree_value(*workloads::w2_tree(5), tree), workloads::w2_leaves(5)};
  args.insert(args.end(), w.begin(), w.end());
  const Value expected = evaluate(built, "tree_lstm", args);
  const auto same = [&](const Value& out) {
    CHECK_THAT(out[0].tensor(), IsCloseTo(expected[0].tensor()));
    CHECK_THAT(out[1].tensor(), IsCloseTo(expected[1].tensor()));
  };

  ir::Module parsed;
  inject("parse", 40, [&] { parsed = ir::parse(text); }, [&] { CHECK(ir::print(ir::parse(text)) == text); });

  const vm::Executable exe = compile(built);
  inject("compile", 40, [&] { (void)compile(built); },
         [&] { same(vm::VirtualMachine(compile(built)).invoke("tree_lstm", args)); });

  inject("evaluate", 40, [&] { (void)evaluate(built, "tree_lstm", args); },
         [&] { same(evaluate(built, "tree_lstm", args)); });

  // The VM with every kernel compiled: its frames, registers, tensors and values.
  vm::VirtualMachine machine(exe);
  same(machine.invoke("tree_lstm", args));
  inject("invoke", 40, [&] { (void)machine.invoke("tree_lstm", args); },
         [&] { same(machine.invoke("tree_lstm", args)); });

  // The JIT: each run compiles every kernel again (up to LLVM, whose own
  // allocations are not points).
  const auto fresh_run = [&] {
    KernelCache::global().clear();
    return vm::VirtualMachine(exe).invoke("tree_lstm", args);
  };
  inject("jit", 12, [&] { (void)fresh_run(); }, [&] { same(fresh_run()); });

  // Loading an image: its constants are the allocations (the tables are
  // standard containers, whose allocations are not points).
  Builder cb;
  const Dim n{"n"};
  const Tensor scale = workloads::w2_leaves(1).reshape({300});
  cb.entry(cb.def("scaled", {{"x", f32({n, 300})}},
                  [&](Expr x) { return tanh(x * constant(scale) + constant(Tensor::full({300}, 0.25, DType::f32))); }));
  const ir::Module with_constants = cb.build();
  const std::vector<std::byte> image = compile(with_constants).save();
  const Tensor x = workloads::w2_leaves(3);
  const Value scaled = evaluate(with_constants, "scaled", {x});
  inject("load", 24, [&] { (void)vm::Executable::load(image); }, [&] {
    CHECK_THAT(vm::VirtualMachine(vm::Executable::load(image)).invoke("scaled", {x}).tensor(),
               IsCloseTo(scaled.tensor()));
  });

}
