// ELEMWISE/<impl>/<op>/<n>: one elementwise op over f32[n], n = 16384 and
// 1048576, op = add (x + y), sigmoid (1 / (1 + exp(-x))), gelu
// (0.5 x (1 + erf(x / √2))), on
//   nimble  a module of one entry function, compiled with nimble::compile and
//           run on a vm::VirtualMachine: one invoke per iteration (which checks
//           its arguments and allocates its output from the warm pool, as a
//           host's call does); its kernel comes from the process's
//           KernelCache (the JIT's once it is registered, else the reference
//           kernels);
//   cpp     a plain C++ loop (elemwise_loops.cpp: -O3 -march=native, no
//           -ffast-math) into a buffer allocated once.
// Both run on one thread (nimble::set_num_threads(1)). Counters:
// elements_per_second and ns_per_element, over Google Benchmark's default
// time, the CPU time of the calling thread (on which all the work runs), so
// that other processes on the machine inflate them less than the wall time. Inputs: x from seed 6 and y from
// seed 7 of the generator of examples/models/workloads.hpp, scaled by 40 to
// [-4, 4).
//
// Before a nimble row is timed, its first call (which compiles its kernel)
// is compared with the cpp loop, element by element, within 1e-6 + 1e-5·|cpp|;
// a mismatch marks the row as failed with the first differing element, and
// the program exits with status 1, so that the bench never times wrong code.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nimble/nimble.hpp>

#include "elemwise_loops.hpp"
#include "engine.hpp"
#include "models/workloads.hpp"

namespace nimble::bench {
namespace {

enum class Op { add, sigmoid, gelu };
constexpr Op kOps[] = {Op::add, Op::sigmoid, Op::gelu};
constexpr std::int64_t kSizes[] = {16384, 1048576};
constexpr const char* kEntry = "elemwise";
constexpr double kAbsTolerance = 1e-6;
constexpr double kRelTolerance = 1e-5;

int failures = 0;

const char* op_name(Op op) {
  switch (op) {
    case Op::add: return "add";
    case Op::sigmoid: return "sigmoid";
    case Op::gelu: return "gelu";
  }
  return "?";
}

// n draws of stream `seed`, scaled from [-0.1, 0.1) to [-4, 4).
Tensor input(std::uint64_t seed, std::int64_t n) {
  workloads::SplitMix64 rng(seed);
  Tensor t = Tensor::empty({n}, DType::f32);
  for (float& v : t.values<float>()) v = 40.0f * rng.uniform();
  return t;
}

// The inputs of size n, generated once per process on first use.
struct Inputs {
  Tensor x, y;
};
const Inputs& inputs(std::int64_t n) {
  static std::map<std::int64_t, Inputs> all;
  auto it = all.find(n);
  if (it == all.end()) it = all.emplace(n, Inputs{input(6, n), input(7, n)}).first;
  return it->second;
}

void run_loop(Op op, const Inputs& in, Tensor& out) {
  const float* x = in.x.data<float>();
  const std::int64_t n = in.x.numel();
  switch (op) {
    case Op::add: add_loop(x, in.y.data<float>(), out.data<float>(), n); return;
    case Op::sigmoid: sigmoid_loop(x, out.data<float>(), n); return;
    case Op::gelu: gelu_loop(x, out.data<float>(), n); return;
  }
}

// The module: @elemwise(x: f32[n] [, y: f32[n]]) -> f32[n].
ir::Module elemwise_module(Op op, std::int64_t n) {
  Builder b;
  const Type t = f32({n});
  Function f = op == Op::add
                   ? b.def(kEntry, {{"x", t}, {"y", t}}, [](Expr x, Expr y) { return add(x, y); })
                   : b.def(kEntry, {{"x", t}}, [op](Expr x) {
                       return op == Op::sigmoid ? sigmoid(x) : gelu(x);
                     });
  b.entry(f);
  return b.build();
}

// A nimble row's machine and arguments, set up on the row's first run.
struct NimbleRow {
  vm::VirtualMachine machine;
  std::vector<Value> args;
};

// The first element where `got` and `want` differ beyond the tolerance, or
// nothing.
std::optional<std::int64_t> first_mismatch(const Tensor& got, const Tensor& want) {
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double diff = std::fabs(static_cast<double>(g[i]) - static_cast<double>(w[i]));
    if (!(diff <= kAbsTolerance + kRelTolerance * std::fabs(static_cast<double>(w[i])))) return i;
  }
  return std::nullopt;
}

// Throws when nimble's first result is not the cpp loop's, within the
// tolerance.
void check_against_loop(Op op, const Inputs& in, const Value& result) {
  const std::int64_t n = in.x.numel();
  if (!result.is_tensor() || result.tensor().dtype() != DType::f32 ||
      result.tensor().numel() != n)
    throw std::runtime_error("nimble's result is not an f32 tensor of " + std::to_string(n) +
                             " elements");
  Tensor want = Tensor::empty({n}, DType::f32);
  run_loop(op, in, want);
  const std::optional<std::int64_t> i = first_mismatch(result.tensor(), want);
  if (!i) return;
  char y[48] = "";
  if (op == Op::add)
    std::snprintf(y, sizeof y, ", y = %.9g", static_cast<double>(in.y.data<float>()[*i]));
  char message[320];
  std::snprintf(message, sizeof message,
                "nimble's result differs from the C++ loop at element %lld (x = %.9g%s): "
                "nimble %.9g, C++ %.9g; tolerance %g + %g*|C++|; not timing wrong code",
                static_cast<long long>(*i), static_cast<double>(in.x.data<float>()[*i]), y,
                static_cast<double>(result.tensor().data<float>()[*i]),
                static_cast<double>(want.data<float>()[*i]), kAbsTolerance, kRelTolerance);
  throw std::runtime_error(message);
}

void set_counters(benchmark::State& state, std::int64_t n) {
  using benchmark::Counter;
  const auto elements = static_cast<double>(n);
  state.counters["elements_per_second"] = Counter(elements, Counter::kIsIterationInvariantRate);
  // Inverted rate: seconds per (1e-9 · n) elements = nanoseconds per element.
  state.counters["ns_per_element"] =
      Counter(elements * 1e-9, Counter::kIsIterationInvariantRate | Counter::kInvert);
}

void nimble_row(benchmark::State& state, const std::string& name, Op op, std::int64_t n,
                std::unique_ptr<NimbleRow>& row) {
  try {
    const Inputs& in = inputs(n);
    if (!row) {
      std::vector<Value> args{in.x};
      if (op == Op::add) args.emplace_back(in.y);
      auto r = std::make_unique<NimbleRow>(
          NimbleRow{vm::VirtualMachine(compile(elemwise_module(op, n))), std::move(args)});
      // The first call compiles the kernel (with the JIT): warm-up and check.
      check_against_loop(op, in, r->machine.invoke(kEntry, r->args));
      row = std::move(r);
    }
    for (auto _ : state) {
      const Value out = row->machine.invoke(kEntry, row->args);
      benchmark::DoNotOptimize(out.tensor().data<float>());
    }
    set_counters(state, n);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "elemwise_bench: %s: %s\n", name.c_str(), e.what());
    ++failures;
    state.SkipWithError(e.what());
  }
}

void cpp_row(benchmark::State& state, Op op, std::int64_t n) {
  const Inputs& in = inputs(n);
  Tensor out = Tensor::empty({n}, DType::f32);
  run_loop(op, in, out);  // warm-up: page the output in
  for (auto _ : state) {
    run_loop(op, in, out);
    benchmark::DoNotOptimize(out.data<float>());
    benchmark::ClobberMemory();
  }
  set_counters(state, n);
}

void register_rows() {
  for (Op op : kOps) {
    for (std::int64_t n : kSizes) {
      const std::string suffix = std::string("/") + op_name(op) + "/" + std::to_string(n);
      const std::string name = "ELEMWISE/nimble" + suffix;
      auto row = std::make_shared<std::unique_ptr<NimbleRow>>();
      benchmark::RegisterBenchmark(
          name.c_str(), [name, op, n, row](benchmark::State& s) { nimble_row(s, name, op, n, *row); })
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("ELEMWISE/cpp" + suffix).c_str(),
                                   [op, n](benchmark::State& s) { cpp_row(s, op, n); })
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace
}  // namespace nimble::bench

int main(int argc, char** argv) {
  nimble::set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::AddCustomContext("threads", "1");
  benchmark::AddCustomContext("nimble_version", nimble::kVersion);
  benchmark::AddCustomContext("nimble_engine", nimble::bench::kNimbleEngineDescription);
  nimble::bench::register_rows();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return nimble::bench::failures == 0 ? 0 : 1;
}
