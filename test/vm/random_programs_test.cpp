// Randomly generated programs (support/random_program.hpp) on the VM and on
// the reference interpreter: both run the same kernels, so results must be
// exactly equal, and where the interpreter raises an Error the VM must raise
// one of the same kind. The compiled programs are optimized (simplify,
// fuse_ops): they are held to the interpreted optimized program, which is
// held to the original. Each program runs on inputs that fit it and on
// inputs with other extents (which may raise), on a VM of the compiled
// Executable and on one of the Executable saved and loaded again.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nimble/nimble.hpp"
#include "passes/passes.hpp"
#include "support/random_program.hpp"
#include "support/same_value.hpp"

using namespace nimble;
using nimble::testing::RandomProgram;
using nimble::testing::close_value;
using nimble::testing::same_value;

namespace {

constexpr std::uint64_t kPrograms = 250;

// A run's result or the Error it raised.
struct Outcome {
  Value value;
  std::optional<Error> error;
};

template <class Run>
Outcome outcome_of(Run&& run) {
  try {
    return {run(), std::nullopt};
  } catch (const Error& e) {
    return {{}, e};
  }
}

std::string describe(const Outcome& o) {
  if (o.error) return fmt::format("Error({}): {}", to_string(o.error->kind()), o.error->what());
  return to_string(o.value);
}

// The VM's outcome must be the interpreter's: the same value exactly, or an
// Error of the same kind.
void check_same_outcome(const Outcome& expected, const Outcome& actual, std::string_view engine) {
  INFO(engine << "\n  interpreter: " << describe(expected)
              << "\n  vm:          " << describe(actual));
  CHECK(actual.error.has_value() == expected.error.has_value());
  if (expected.error && actual.error)
    CHECK(actual.error->kind() == expected.error->kind());
  else if (!expected.error && !actual.error)
    CHECK(same_value(actual.value, expected.value));
}

// With JIT kernels, which round every step to f32 where the reference
// kernels compute each op in double, the values are close rather than equal
// — except where a program decides on floats (equal, where, a power of a
// base near 0) or divides by a cancellation (a log_softmax near 0): there an
// ulp can change the result. Such programs are counted, not failed; the ops
// themselves are checked one by one in [jit].
bool jit_outcome_matches(const Outcome& expected, const Outcome& actual) {
  if (expected.error || actual.error)
    return expected.error.has_value() == actual.error.has_value() &&
           (!expected.error || expected.error->kind() == actual.error->kind());
  return close_value(actual.value, expected.value, {.rtol = 1e-3, .atol = 1e-4});
}

}  // namespace

TEST_CASE("VM: random programs give the interpreter's results, exactly with its kernels", "[vm]") {
  const auto start = std::chrono::steady_clock::now();
  std::map<std::string, int> coverage;
  int redrawn_ok = 0, redrawn_errors = 0;
  std::vector<std::uint64_t> jit_differs;  // seeds whose JIT outcome is not close
  for (std::uint64_t seed = 0; seed < kPrograms; ++seed) {
    const RandomProgram p = testing::random_program(seed);
    INFO("seed " << seed << ":\n" << p.text);
    for (const std::string& f : p.features) ++coverage[f];

    // Every generated program type-checks and compiles.
    ir::Module m, fused;
    std::optional<vm::Executable> exe, reloaded;
    try {
      m = ir::parse(p.text, "random.nir");
      ir::verify(m);
      ir::infer_types(m);
      fused = passes::fuse_ops(passes::simplify(m));
      ir::verify(fused);
      exe = compile(m);
      reloaded = vm::Executable::load(exe->save());
    } catch (const Error& e) {
      FAIL_CHECK("the program does not compile: " << e.what());
      continue;
    }
    vm::VirtualMachine machine(*exe);
    vm::VirtualMachine machine_reloaded(*reloaded);
    machine.set_kernel_provider("reference");  // the interpreter's kernels: exact results
    machine_reloaded.set_kernel_provider("reference");
    vm::VirtualMachine machine_jit(*exe);  // the default: JIT kernels
    // Without optimizations: one kernel per op, every output in its own storage.
    vm::VirtualMachine machine_unplanned(
        compile(m, {.simplify = false, .fuse_ops = false, .plan_memory = false}));
    machine_unplanned.set_kernel_provider("reference");

    for (const bool redrawn : {false, true}) {
      INFO((redrawn ? "inputs with redrawn extents" : "inputs that fit the program"));
      const std::vector<Value>& args = redrawn ? p.other_args : p.args;
      const Outcome expected = outcome_of([&] { return evaluate(m, p.entry, args); });
      if (!redrawn) {
        // The generator's inputs fit: an error here is a generator bug.
        INFO("interpreter: " << describe(expected));
        CHECK_FALSE(expected.error.has_value());
      } else {
        ++(expected.error ? redrawn_errors : redrawn_ok);
      }
      // The optimized program (simplified and fused), interpreted: where the
      // original gives a value, the same value exactly (the same kernels on
      // the same data; folding runs them at compile time); where it raises,
      // an Error or a value — dead code is gone, and fusion moves a group to
      // its last op, so where two ops fail the other may fail first.
      const Outcome expected_fused = outcome_of([&] { return evaluate(fused, p.entry, args); });
      if (!expected.error) {
        INFO("optimized, interpreted: " << describe(expected_fused) << "\n  original: " << describe(expected));
        CHECK_FALSE(expected_fused.error.has_value());
        if (!expected_fused.error) CHECK(same_value(expected_fused.value, expected.value));
      }
      check_same_outcome(expected_fused, outcome_of([&] { return machine.invoke(p.entry, args); }),
                         "compiled");
      check_same_outcome(expected_fused,
                         outcome_of([&] { return machine_reloaded.invoke(p.entry, args); }),
                         "saved and loaded");
      check_same_outcome(expected,
                         outcome_of([&] { return machine_unplanned.invoke(p.entry, args); }),
                         "compiled without optimizations");
      const Outcome jit = outcome_of([&] { return machine_jit.invoke(p.entry, args); });
      if (!jit_outcome_matches(expected_fused, jit)) {
        jit_differs.push_back(seed);
        UNSCOPED_INFO("seed " << seed << " with JIT kernels:\n  interpreter: " << describe(expected)
                              << "\n  vm:          " << describe(jit));
      }
    }
  }

  std::string table = fmt::format(
      "{} random programs in {:.1f} s; on the inputs with redrawn extents the interpreter ran "
      "{} and raised an Error on {}.\nPrograms per feature:\n",
      kPrograms, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      redrawn_ok, redrawn_errors);
  table += fmt::format("With JIT kernels, {} runs were not close to the interpreter's (seeds {}).\n",
                       jit_differs.size(), fmt::join(jit_differs, ", "));
  for (const std::string& f : testing::random_program_features())
    table += fmt::format("  {:<22} {}\n", f, coverage[f]);
  WARN(table);
  // At most 2% of the 500 runs may differ through an ill-conditioned program.
  CHECK(jit_differs.size() <= 2 * kPrograms / 100);
  // Each feature is exercised (a generator change that loses one shows
  // here), and each one reported is listed.
  const auto& known = testing::random_program_features();
  for (const auto& [f, count] : coverage) {
    INFO("feature " << f);
    CHECK(std::find(known.begin(), known.end(), f) != known.end());
  }
  for (const std::string& f : known) {
    INFO("feature " << f);
    CHECK(coverage[f] >= 5);
  }
}
