// The CPU JIT (lib/codegen): every op's compute rule compiled to machine code
// and run against the op's reference kernel on random calls (dims of 0, 1,
// primes and powers of two, Any and symbolic dims, NaN and infinities), the
// transcendental expansions' error in ulps over the float range, the error
// paths (checked loads and divisions, failed checks, dims that do not fit),
// and the JIT as the VM's default kernel provider.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>

#include "codegen/cpu/cpu_kernel.hpp"
#include "codegen/dot_product.hpp"
#include "codegen/kernel_ir.hpp"
#include "codegen/llvm/host_code.hpp"
#include "codegen/llvm/jit.hpp"
#include "nimble/builder.hpp"
#include "nimble/compile.hpp"
#include "nimble/interpreter.hpp"
#include "nimble/runtime/stats.hpp"
#include "nimble/runtime/threading.hpp"
#include "nimble/vm/virtual_machine.hpp"
#include "ops/ops.hpp"
#include "nimble/export.hpp"
#include "support/cache_scope.hpp"
#include "support/op_calls.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using namespace nimble::testing;

namespace {

// `kernel` run on `values` into new outputs shaped as `expected`.
std::vector<Tensor> run_into_new(const Kernel& kernel, std::span<const Tensor> values,
                                 std::span<const Tensor> expected) {
  std::vector<Tensor> results;
  for (const Tensor& e : expected) results.push_back(Tensor::empty(e.shape(), e.dtype()));
  kernel.run(values, results);
  return results;
}

std::vector<Tensor> run_compiled(const ir::OpDef& op, std::span<const te::Tensor> outputs,
                                 std::span<const te::Tensor> placeholders,
                                 std::span<const Tensor> values, std::span<const Tensor> expected) {
  const Ref<Kernel> kernel = codegen::compile_cpu_kernel(std::string(op.name), placeholders, outputs);
  INFO("kernel IR:\n" << codegen::cpu_kernel_ir(std::string(op.name), placeholders, outputs));
  return run_into_new(*kernel, values, expected);
}

// Every op with a rule, on `trials` random calls each, through `runner`.
void check_every_op(const RuleRunner& runner, std::uint64_t seed, int trials) {
  const std::map<const ir::OpDef*, Generator> calls = generators();
  Rng rng(seed);
  for (const ir::OpDef* op : ir::all_ops()) {
    if (op->compute == nullptr) continue;
    INFO("op " << op->name);
    const auto it = calls.find(op);
    REQUIRE(it != calls.end());
    for (int trial = 0; trial < trials; ++trial) check_rule(*op, it->second(rng), rng, runner, true);
  }
}

/// The rule of `op` on placeholders of `types` (named after its arguments),
/// compiled, run on `inputs` into outputs of `out_shapes`.
std::vector<Tensor> run_op(const ir::OpDef& op, const std::vector<ir::Type>& types,
                           const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                           const ir::Attrs& attrs = {}) {
  te::SymbolTable symbols;
  std::vector<te::Tensor> placeholders;
  for (std::size_t i = 0; i < types.size(); ++i)
    placeholders.push_back(te::placeholder_for(*types[i].as<ir::TensorTypeNode>(),
                                               std::string(op.arg_names[i]), symbols));
  const std::vector<te::Tensor> rule = op.compute(placeholders, attrs);
  const Ref<Kernel> kernel = codegen::compile_cpu_kernel(std::string(op.name), placeholders, rule);
  kernel->run(inputs, outputs);
  return outputs;
}


// --- ulps --------------------------------------------------------------------------------

// Floats ordered as integers: the distance in ulps between two finite floats.
std::int64_t ordered(float x) {
  const auto bits = std::bit_cast<std::int32_t>(x);
  return bits < 0 ? std::int64_t{std::numeric_limits<std::int32_t>::min()} - bits : bits;
}
std::int64_t ordered(double x) {
  const auto bits = std::bit_cast<std::int64_t>(x);
  return bits < 0 ? std::numeric_limits<std::int64_t>::min() - bits : bits;
}

template <class T>
double ulp_error(T actual, T expected) {
  if (std::isnan(expected)) return std::isnan(actual) ? 0 : std::numeric_limits<double>::infinity();
  if (std::isnan(actual)) return std::numeric_limits<double>::infinity();
  if (std::isinf(expected) || std::isinf(actual))
    return actual == expected ? 0 : std::numeric_limits<double>::infinity();
  return std::fabs(static_cast<double>(ordered(actual) - ordered(expected)));
}

struct UlpCase {
  const ir::OpDef* op;
  double (*reference)(double);
  double f32_bound;
  double f64_bound;
};

double sigmoid_ref(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }
double rsqrt_ref(double x) { return 1 / std::sqrt(x); }

// Every 2^k-th f32 bit pattern (both signs, all exponents, NaN and ±inf
// included) through op's JIT kernel; returns the worst error in ulps.
template <class T>
std::pair<double, T> worst_ulps(const UlpCase& c, std::int64_t count) {
  std::vector<T> xs;
  if constexpr (std::is_same_v<T, float>) {
    const std::uint64_t step = (std::uint64_t{1} << 32) / static_cast<std::uint64_t>(count);
    for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += step)
      xs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  } else {
    std::mt19937_64 rng(7);
    for (std::int64_t i = 0; i < count; ++i) xs.push_back(std::bit_cast<double>(rng()));
    for (double x = -40; x <= 40; x += 0.001) xs.push_back(x);
  }
  const DType dtype = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  const auto n = static_cast<std::int64_t>(xs.size());
  Tensor in = Tensor::from_data(Shape{n}, std::span<const T>(xs));
  Tensor out = Tensor::empty(Shape{n}, dtype);
  run_op(*c.op, {ir::tensor_type({ir::Any}, dtype)}, {in}, {out});
  double worst = 0;
  T at = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const T x = xs[static_cast<std::size_t>(i)];
    const auto expected = static_cast<T>(c.reference(static_cast<double>(x)));
    const double e = ulp_error(out.data<T>()[i], expected);
    if (e > worst) {
      worst = e;
      at = x;
    }
  }
  return {worst, at};
}

// The f32 result of `kernel` on `inputs`, computed on 1 thread and on 2.
std::pair<Tensor, Tensor> run_on_one_and_two_threads(const Kernel& kernel, const std::vector<Tensor>& inputs,
                                                     const Shape& shape) {
  Tensor one = Tensor::empty(shape, DType::f32);
  Tensor two = Tensor::empty(shape, DType::f32);
  set_num_threads(1);
  kernel.run(inputs, std::vector<Tensor>{one});
  set_num_threads(2);
  kernel.run(inputs, std::vector<Tensor>{two});
  return {one, two};
}

// The width of this CPU's vector registers, as the JIT emits for it.
unsigned host_vector_bits() { return codegen::vector_bits(codegen::jit_object_target()); }

// Kernel inputs of f32 with the given (symbolic) dims.
struct SymbolicInputs {
  te::SymbolTable symbols;
  te::Tensor operator()(std::vector<ir::Dim> dims, const char* name) {
    const ir::Type t = ir::tensor_type(std::move(dims), DType::f32);
    return te::placeholder_for(*t.as<ir::TensorTypeNode>(), name, symbols);
  }
};

// The kernel computing `out` from `in` at this CPU's vector width with its
// flat stages as vector loops (where the host's rules take them), and the
// same kernel with LLVM's vectorizer instead.
std::pair<Ref<Kernel>, Ref<Kernel>> with_and_without_vector_loops(const std::string& name,
                                                                  std::span<const te::Tensor> in,
                                                                  std::span<const te::Tensor> out) {
  codegen::CpuEmitOptions options = codegen::CpuEmitOptions::for_vector_bits(host_vector_bits());
  options.vector_loops = true;
  Ref<Kernel> vectors = codegen::compile_cpu_kernel_with(name, in, out, options);
  options.vector_loops = false;
  return {std::move(vectors), codegen::compile_cpu_kernel_with(name, in, out, options)};
}

// dense over static shapes [rows, depth] x [cols, depth]^T + [cols]: its
// kernel with `options`, random arguments in `values`, and the reference's
// result.
struct StaticDense {
  Ref<Kernel> kernel;
  std::vector<Tensor> args;
  Value expected;
};
StaticDense static_dense(Rng& rng, std::int64_t rows, std::int64_t cols, std::int64_t depth,
                         const codegen::CpuEmitOptions& options, const Range& values) {
  SymbolicInputs input;
  const std::vector<te::Tensor> in{input({rows, depth}, "x"), input({cols, depth}, "w"), input({cols}, "bias")};
  StaticDense d{codegen::compile_cpu_kernel_with("dense", in, ops::dense().compute(in, {}), options), {}, {}};
  d.args = {random_tensor(rng, {rows, depth}, DType::f32, values), random_tensor(rng, {cols, depth}, DType::f32, values),
            random_tensor(rng, {cols}, DType::f32, values)};
  d.expected = ops::dense().reference(std::vector<Value>(d.args.begin(), d.args.end()), {});
  return d;
}

// How many stages of the kernel computing `out` from `in` `match` recognizes.
template <class Match>
int stages_matching(std::span<const te::Tensor> in, std::span<const te::Tensor> out, Match match) {
  const codegen::KernelIR ir = codegen::lower_to_kernel_ir("k", in, out);
  int n = 0;
  for (const codegen::Stage& stage : ir.stages) n += match(ir, stage).has_value();
  return n;
}

}  // namespace

TEST_CASE("jit: every op with a rule matches its reference kernel on random calls", "[jit]") {
  check_every_op(run_compiled, 20261130, 12);
}

TEST_CASE("jit: every op's rule with its flat stages as vector loops matches its reference kernel", "[jit]") {
  // Every flat element-wise stage as one explicit vector loop with a masked
  // last iteration, whatever its size, at this CPU's vector width (the host
  // emits them from AVX-512 up, for bodies worth it): every dtype in
  // memory, dims of 0, 1, primes and powers of two against the lanes.
  codegen::CpuEmitOptions options = codegen::CpuEmitOptions::for_vector_bits(host_vector_bits());
  options.vector_loops = true;
  options.vector_loop_min_size = 0;
  check_every_op(
      [&](const ir::OpDef& op, std::span<const te::Tensor> outputs, std::span<const te::Tensor> placeholders,
          std::span<const Tensor> values, std::span<const Tensor> expected) {
        const Ref<Kernel> kernel =
            codegen::compile_cpu_kernel_with(std::string(op.name), placeholders, outputs, options);
        return run_into_new(*kernel, values, expected);
      },
      20261203, 6);
}

TEST_CASE("jit: vector loops cover every length around the vector width, on one thread and on two", "[jit]") {
  // sigmoid(a) * b + a over n elements: n from 0 past three vectors, and one
  // long enough to split (each thread's range ends in its own masked
  // iteration); against the LLVM-vectorized kernel, bit for bit (the same
  // expansions lane by lane).
  SymbolicInputs input;
  const std::vector<te::Tensor> in{input({ir::Dim("n")}, "a"), input({ir::Dim("n")}, "b")};
  const te::Tensor s = ops::sigmoid().compute(std::vector<te::Tensor>{in[0]}, {})[0];
  const te::Tensor sb = ops::mul().compute(std::vector<te::Tensor>{s, in[1]}, {})[0];
  const std::vector<te::Tensor> out = ops::add().compute(std::vector<te::Tensor>{sb, in[0]}, {});
  const auto [vectors, scalars] = with_and_without_vector_loops("sigmoid_mul_add", in, out);
  Rng rng(11);
  std::vector<std::int64_t> lengths{100003};
  for (std::int64_t n = 0; n <= 3 * 16 + 1; ++n) lengths.push_back(n);
  for (const std::int64_t n : lengths) {
    INFO("n = " << n);
    const Tensor a = random_tensor(rng, {n}, DType::f32);
    const Tensor b = random_tensor(rng, {n}, DType::f32);
    Tensor want = Tensor::empty({n}, DType::f32);
    scalars->run(std::vector<Tensor>{a, b}, std::vector<Tensor>{want});
    const auto [one, two] = run_on_one_and_two_threads(*vectors, {a, b}, {n});
    CHECK_THAT(one, IsCloseTo(want, {.rtol = 0, .atol = 0, .equal_nan = true}));
    CHECK_THAT(two, IsCloseTo(want, {.rtol = 0, .atol = 0, .equal_nan = true}));
  }
}

TEST_CASE("jit: reductions along a row run as explicit vectors over every length around the vector width", "[jit]") {
  // max, min and sum over the last axis of [3, n], and softmax (a max, a
  // sum of exps and their quotient), with n from 0 past two rounds of four
  // accumulators, and 1000; against LLVM's vectorized loops: max and min bit
  // for bit (exact in any order, with NaN, -0 and +0 placed in rows), the
  // sums within a reordered sum's rounding. f64 sums alike.
  for (const DType dtype : {DType::f32, DType::f64}) {
    SymbolicInputs input;
    const te::Tensor x = te::placeholder_for(
        *ir::tensor_type({3, ir::Dim("n")}, dtype).as<ir::TensorTypeNode>(), "x", input.symbols);
    const std::vector<te::Tensor> in{x};
    const ir::Attrs last_axis{{"axes", std::vector<std::int64_t>{1}}, {"keepdims", false}};
    struct Case {
      const char* name;
      std::vector<te::Tensor> out;
      bool exact;
      bool needs_elements;
    };
    std::vector<Case> cases{{"sum", ops::sum().compute(in, last_axis), false, false}};
    if (dtype == DType::f32) {
      cases.push_back({"max", ops::max().compute(in, last_axis), true, true});
      cases.push_back({"min", ops::min().compute(in, last_axis), true, true});
      cases.push_back({"softmax", ops::softmax().compute(in, {{"axis", std::int64_t{-1}}}), false, false});
    }
    for (const Case& c : cases) {
      const auto [vectors, scalars] = with_and_without_vector_loops(c.name, in, c.out);
      Rng rng(5);
      std::vector<std::int64_t> lengths{1000};
      for (std::int64_t n = 0; n <= 2 * 4 * 16 + 17; ++n) lengths.push_back(n);
      for (const std::int64_t n : lengths) {
        if (n == 0 && c.needs_elements) continue;
        INFO(c.name << " " << to_string(dtype) << ", n = " << n);
        Tensor a = random_tensor(rng, {3, n}, dtype, {.lo = -4, .hi = 4});
        if (dtype == DType::f32 && n > 0) {
          // Row 1: a NaN at its last element; row 2: signed zeros only.
          float* data = a.data<float>();
          data[n + n - 1] = std::numeric_limits<float>::quiet_NaN();
          for (std::int64_t i = 0; i < n; ++i) data[2 * n + i] = i % 2 == 0 ? -0.0f : 0.0f;
        }
        const Shape shape = c.out[0].ndim() == 2 ? Shape{3, n} : Shape{3};
        Tensor want = Tensor::empty(shape, dtype);
        Tensor got = Tensor::empty(shape, dtype);
        scalars->run(std::vector<Tensor>{a}, std::vector<Tensor>{want});
        vectors->run(std::vector<Tensor>{a}, std::vector<Tensor>{got});
        const Tolerance exact{.rtol = 0, .atol = 0, .equal_nan = true};
        const Tolerance summed{.rtol = 8 * static_cast<double>(n + 1) * epsilon(dtype),
                               .atol = 8 * static_cast<double>(n + 1) * epsilon(dtype), .equal_nan = true};
        CHECK_THAT(got, IsCloseTo(want, c.exact ? exact : summed));
        if (c.exact && n > 0) {
          // The zeros' row: max is +0 and min -0 (maximum and minimum
          // order them) unless the row has a single -0.
          const float z = got.data<float>()[2];
          CHECK(std::signbit(z) == (std::string(c.name) == "min" || n == 1));
        }
      }
    }
  }
}

TEST_CASE("jit: short static loops reading a row at an offset run as vector loops", "[jit]") {
  // split of a static [1, 750] at 150, 157, 300 and 749: parts read x's row
  // at constant offsets, lengths around the vector width and one part up to
  // the row's last element; against the LLVM-vectorized kernel, bit for bit.
  SymbolicInputs input;
  const std::vector<te::Tensor> in{input({1, 750}, "x")};
  const std::vector<te::Tensor> parts =
      ops::split().compute(in, {{"indices", std::vector<std::int64_t>{150, 157, 300, 749}}, {"axis", std::int64_t{1}}});
  const auto [vectors, scalars] = with_and_without_vector_loops("split", in, parts);
  Rng rng(3);
  const Tensor x = random_tensor(rng, {1, 750}, DType::f32);
  const std::vector<std::int64_t> widths{150, 7, 143, 449, 1};
  std::vector<Tensor> want, got;
  for (const std::int64_t w : widths) {
    want.push_back(Tensor::empty({1, w}, DType::f32));
    got.push_back(Tensor::empty({1, w}, DType::f32));
  }
  scalars->run(std::vector<Tensor>{x}, want);
  vectors->run(std::vector<Tensor>{x}, got);
  for (std::size_t p = 0; p < widths.size(); ++p) {
    INFO("part " << p);
    CHECK_THAT(got[p], IsCloseTo(want[p], {.rtol = 0, .atol = 0, .equal_nan = true}));
  }
}

TEST_CASE("jit: rows read at an offset along them (a slice of each row) run as vector rows", "[jit]") {
  // A Tree-LSTM leaf's cell over gates [n, 450]: c = sigmoid(i) * tanh(u),
  // h = sigmoid(o) * tanh(c), with i, o, u the columns from 0, 150 and 300
  // of each row (150 a row: a masked last vector). Its loads read
  // gates[r, j + offset]: lane by lane along j (lane_wise_along), so each row
  // is an explicit vector loop; against the kernel LLVM vectorizes, for row
  // counts 1..5 and 19, bit for bit.
  SymbolicInputs input;
  const std::vector<te::Tensor> in{input({ir::Dim("n"), 450}, "gates")};
  const std::vector<te::Tensor> parts =
      ops::split().compute(in, {{"indices", std::vector<std::int64_t>{150, 300}}, {"axis", std::int64_t{1}}});
  const auto unary = [](const ir::OpDef& op, const te::Tensor& x) { return op.compute(std::vector{x}, {}).at(0); };
  const auto times = [](const te::Tensor& a, const te::Tensor& b) { return ops::mul().compute(std::vector{a, b}, {}).at(0); };
  const te::Tensor c = times(unary(ops::sigmoid(), parts[0]), unary(ops::tanh(), parts[2]));
  const te::Tensor h = times(unary(ops::sigmoid(), parts[1]), unary(ops::tanh(), c));
  const std::vector<te::Tensor> out{c, h};
  const auto [vectors, scalars] = with_and_without_vector_loops("leaf_cell", in, out);
  Rng rng(17);
  for (const std::int64_t n : {1, 2, 3, 4, 5, 19}) {
    INFO("n = " << n);
    const Tensor gates = random_tensor(rng, {n, 450}, DType::f32, {.lo = -6, .hi = 6});
    std::vector<Tensor> want{Tensor::empty({n, 150}, DType::f32), Tensor::empty({n, 150}, DType::f32)};
    std::vector<Tensor> got{Tensor::empty({n, 150}, DType::f32), Tensor::empty({n, 150}, DType::f32)};
    scalars->run(std::vector<Tensor>{gates}, want);
    vectors->run(std::vector<Tensor>{gates}, got);
    for (std::size_t k = 0; k < 2; ++k) CHECK_THAT(got[k], IsCloseTo(want[k], {.rtol = 0, .atol = 0, .equal_nan = true}));
  }
  // Which loads move with j lane by lane: at j plus a term without j, on
  // either side, yes; at 2j, or with j in an outer index too, no.
  const te::Var i("i"), j("j");
  const te::Tensor x = input({8, 450}, "x");
  const te::Expr off = te::int_imm(300);
  CHECK(codegen::lane_wise_along(x({i, j + off}), j.node(), nullptr));
  CHECK(codegen::lane_wise_along(x({i, off + j}), j.node(), nullptr));
  CHECK(codegen::lane_wise_along(x({i, j}), j.node(), nullptr));
  CHECK_FALSE(codegen::lane_wise_along(x({i, j * te::int_imm(2)}), j.node(), nullptr));
  CHECK_FALSE(codegen::lane_wise_along(x({j, j + off}), j.node(), nullptr));
}

TEST_CASE("jit: a thread's code generation pipeline, run kernel after kernel, makes the same objects", "[jit]") {
  // The JIT keeps one pipeline per thread (jit.cpp); a kernel compiled by a
  // pipeline that has compiled others must be the object a new one makes.
  SymbolicInputs input;
  const std::vector<te::Tensor> in{input({ir::Dim("n")}, "a"), input({ir::Dim("n")}, "b")};
  const std::vector<te::Tensor> gelu = ops::gelu().compute(std::vector<te::Tensor>{in[0]}, {});
  const std::vector<te::Tensor> sum = ops::add().compute(in, {});
  const codegen::KernelIR first = codegen::lower_to_kernel_ir("gelu", std::span(in).first(1), gelu);
  const codegen::KernelIR other = codegen::lower_to_kernel_ir("add", in, sum);
  const codegen::HostKernelEmitter emit =
      codegen::cpu_kernel_emitter(codegen::CpuEmitOptions::for_vector_bits(host_vector_bits()));
  std::string before, between, again;
  // `before` on a thread of its own: from a pipeline that compiled nothing
  // yet (this thread's has compiled the tests before this one).
  std::thread fresh([&] { (void)codegen::compile_host_code(first, emit, "nimble_test_same_object", &before); });
  fresh.join();
  (void)codegen::compile_host_code(other, emit, "nimble_test_other_object", &between);
  (void)codegen::compile_host_code(first, emit, "nimble_test_same_object", &again);
  CHECK_FALSE(before.empty());
  CHECK(before != between);
  CHECK(again == before);
}

TEST_CASE("jit: transcendentals stay within their ulp bounds over the float range", "[jit]") {
  // f32: 2^22 bit patterns spread over all 2^32; f64: 2^20 random bit
  // patterns plus a dense grid over [-40, 40]. Distances are whole ulps to
  // the reference rounded to the dtype: math.hpp's bounds (against the exact
  // result) plus that rounding's half ulp, rounded up.
  const UlpCase cases[] = {
      {&ops::exp(), [](double x) { return std::exp(x); }, 2, 2},
      {&ops::log(), [](double x) { return std::log(x); }, 2, 2},
      {&ops::log1p(), [](double x) { return std::log1p(x); }, 2, 2},
      {&ops::tanh(), [](double x) { return std::tanh(x); }, 3, 4},
      {&ops::sigmoid(), sigmoid_ref, 3, 4},
      {&ops::erf(), [](double x) { return std::erf(x); }, 3, 4},
      {&ops::rsqrt(), rsqrt_ref, 2, 2},
  };
  for (const UlpCase& c : cases) {
    INFO(c.op->name);
    const auto [f32_worst, f32_at] = worst_ulps<float>(c, std::int64_t{1} << 22);
    INFO("f32: " << f32_worst << " ulps at " << f32_at);
    CHECK(f32_worst <= c.f32_bound);
    const auto [f64_worst, f64_at] = worst_ulps<double>(c, std::int64_t{1} << 20);
    INFO("f64: " << f64_worst << " ulps at " << f64_at);
    CHECK(f64_worst <= c.f64_bound);
  }
}

TEST_CASE("jit: checked loads and integer division fail with an Error, never a trap", "[jit]") {
  // take: an index out of range.
  const std::vector<ir::Type> take_types{f32({3, 2}), ir::tensor_type({2}, DType::i64)};
  const Tensor data = from_values({3, 2}, DType::f32, {1, 2, 3, 4, 5, 6});
  Tensor out = Tensor::empty({2, 2}, DType::f32);
  CHECK_THAT(run_op(ops::take(), take_types, {data, i64s({2, 0})}, {out})[0],
             IsCloseTo(from_values({2, 2}, DType::f32, {5, 6, 1, 2})));
  CHECK_NIMBLE_ERROR(run_op(ops::take(), take_types, {data, i64s({1, 3})}, {out}),
                     ErrorKind::runtime_error, "take: index 3 is out of range for axis 0 of data (extent 3)");
  CHECK_NIMBLE_ERROR(run_op(ops::take(), take_types, {data, i64s({-1, 0})}, {out}),
                     ErrorKind::runtime_error, "take: index -1 is out of range for axis 0 of data (extent 3)");

  // Integer division by zero, INT_MIN / -1 and a negative exponent.
  const std::vector<ir::Type> types{i32({3}), i32({3})};
  const Tensor a = Tensor::from_data<std::int32_t>({3}, {7, -7, std::numeric_limits<std::int32_t>::min()});
  Tensor q = Tensor::empty({3}, DType::i32);
  CHECK_THAT(run_op(ops::div(), types, {a, Tensor::from_data<std::int32_t>({3}, {2, 2, -3})}, {q})[0],
             IsCloseTo(Tensor::from_data<std::int32_t>({3}, {3, -3, 715827882})));
  CHECK_NIMBLE_ERROR(run_op(ops::div(), types, {a, Tensor::from_data<std::int32_t>({3}, {1, 0, 1})}, {q}),
                     ErrorKind::runtime_error, "div: integer division by zero");
  CHECK_NIMBLE_ERROR(run_op(ops::div(), types, {a, Tensor::from_data<std::int32_t>({3}, {1, 1, -1})}, {q}),
                     ErrorKind::runtime_error, "div: integer overflow: INT_MIN / -1");
  CHECK_NIMBLE_ERROR(
      run_op(ops::power(), types, {a, Tensor::from_data<std::int32_t>({3}, {2, -1, 0})}, {q}),
      ErrorKind::runtime_error, "power: negative exponent in integer power");
}

TEST_CASE("jit: rows picked by a concatenation or a gather run as branch-free loops, and still check", "[jit]") {
  // concatenate({a, b, c}, 0): which input a row reads from is decided per
  // row, so the loop over its columns runs as one version per input (no
  // branch per element); along the columns, as one part per input. sigmoid(take(concatenate({x, y}, 0), idx)): the
  // index check of a gathered row is made once per row, and the row's input
  // once per row too. Every row count, including empty inputs, against the
  // reference; a bad index in any row is the same Error as an unfused take's.
  SymbolicInputs input;
  const ir::Dim r1("r1"), r2("r2"), r3("r3"), cols("c");
  const std::vector<te::Tensor> parts{input({r1, cols}, "a"), input({r2, cols}, "b"), input({r3, cols}, "c")};
  const ir::Attrs rows_axis{{"axis", std::int64_t{0}}};
  const std::vector<te::Tensor> joined = ops::concatenate().compute(parts, rows_axis);
  const Ref<Kernel> concat = codegen::compile_cpu_kernel("concatenate", parts, joined);
  Rng rng(11);
  for (const std::int64_t width : {1, 16, 37})
    for (const std::array<std::int64_t, 3> rows : {std::array<std::int64_t, 3>{1, 1, 1}, {3, 0, 2}, {0, 5, 0}, {2, 4, 7}}) {
      INFO("rows " << rows[0] << ", " << rows[1] << ", " << rows[2] << " width " << width);
      std::vector<Tensor> args;
      for (const std::int64_t r : rows) args.push_back(random_tensor(rng, {r, width}, DType::f32));
      const Value expected = ops::concatenate().reference(
          std::vector<Value>{Value::tuple(std::vector<Value>(args.begin(), args.end()))}, rows_axis);
      const auto [one, two] = run_on_one_and_two_threads(*concat, args, {rows[0] + rows[1] + rows[2], width});
      CHECK_THAT(one, IsCloseTo(expected.tensor(), {.rtol = 0, .atol = 0, .equal_nan = true}));
      CHECK_THAT(two, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
    }

  // Along the last axis: the column decides the input, so the loop over
  // columns runs in one part per input, split at its offsets.
  const ir::Dim c1("c1"), c2("c2"), c3("c3"), rows_dim("rows");
  const std::vector<te::Tensor> side{input({rows_dim, c1}, "d"), input({rows_dim, c2}, "e"),
                                     input({rows_dim, c3}, "f")};
  const ir::Attrs columns_axis{{"axis", std::int64_t{1}}};
  const Ref<Kernel> beside =
      codegen::compile_cpu_kernel("concatenate", side, ops::concatenate().compute(side, columns_axis));
  for (const std::int64_t rows : {1, 3})
    for (const std::array<std::int64_t, 3> widths : {std::array<std::int64_t, 3>{1, 1, 1}, {16, 0, 5}, {0, 33, 0}, {7, 20, 9}}) {
      INFO("rows " << rows << " widths " << widths[0] << ", " << widths[1] << ", " << widths[2]);
      std::vector<Tensor> args;
      for (const std::int64_t w : widths) args.push_back(random_tensor(rng, {rows, w}, DType::f32));
      const Value expected = ops::concatenate().reference(
          std::vector<Value>{Value::tuple(std::vector<Value>(args.begin(), args.end()))}, columns_axis);
      const auto [one, two] = run_on_one_and_two_threads(*beside, args, {rows, widths[0] + widths[1] + widths[2]});
      CHECK_THAT(one, IsCloseTo(expected.tensor(), {.rtol = 0, .atol = 0, .equal_nan = true}));
      CHECK_THAT(two, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
    }

  const ir::Dim m("m");
  te::SymbolTable& symbols = input.symbols;
  const ir::Type index_type = ir::tensor_type({m}, DType::i64);
  const std::vector<te::Tensor> in{input({r1, cols}, "x"), input({r2, cols}, "y"),
                                   te::placeholder_for(*index_type.as<ir::TensorTypeNode>(), "idx", symbols)};
  const te::Tensor table = ops::concatenate().compute(std::vector<te::Tensor>{in[0], in[1]}, rows_axis)[0];
  const te::Tensor gathered = ops::take().compute(std::vector<te::Tensor>{table, in[2]}, {})[0];
  const std::vector<te::Tensor> out = ops::sigmoid().compute(std::vector<te::Tensor>{gathered}, {});
  const Ref<Kernel> gather = codegen::compile_cpu_kernel("gather_sigmoid", in, out);
  const Tensor x = random_tensor(rng, {3, 37}, DType::f32), y = random_tensor(rng, {2, 37}, DType::f32);
  const Value whole = ops::concatenate().reference(std::vector<Value>{Value::tuple({x, y})}, rows_axis);
  for (const std::vector<std::int64_t>& picks : {std::vector<std::int64_t>{4}, {0, 4, 2, 3, 3, 1}, {}}) {
    INFO("indices " << picks.size());
    const Tensor idx = i64s(picks);
    const Value rows = ops::take().reference(std::vector<Value>{whole, idx}, {});
    const Value expected = ops::sigmoid().reference(std::vector<Value>{rows}, {});
    const auto [one, two] = run_on_one_and_two_threads(*gather, {x, y, idx}, {static_cast<std::int64_t>(picks.size()), 37});
    CHECK_THAT(one, IsCloseTo(expected.tensor(), {.rtol = 1e-6, .atol = 1e-7, .equal_nan = true}));
    CHECK_THAT(two, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
  }
  const std::vector<Tensor> result{Tensor::empty({3, 37}, DType::f32)};
  const std::vector<Tensor> last_bad{x, y, i64s({0, 1, 5})}, first_bad{x, y, i64s({-1, 1, 2})};
  CHECK_NIMBLE_ERROR_MATCHES(gather->run(last_bad, result), ErrorKind::runtime_error,
                             Catch::Contains("index 5 is out of range for axis 0"));
  CHECK_NIMBLE_ERROR_MATCHES(gather->run(first_bad, result), ErrorKind::runtime_error,
                             Catch::Contains("index -1 is out of range for axis 0"));
}

TEST_CASE("jit: kernels check the dims and dtypes they are given", "[jit]") {
  const ir::Dim n("n");
  const std::vector<ir::Type> types{f32({n, 2}), f32({n, 2})};
  const Tensor x = from_values({1, 2}, DType::f32, {1, 2});
  const Tensor y = from_values({2, 2}, DType::f32, {1, 2, 3, 4});
  Tensor out = Tensor::empty({1, 2}, DType::f32);
  CHECK_NIMBLE_ERROR(run_op(ops::sub(), types, {x, y}, {out}), ErrorKind::invalid_argument,
                     "b [2, 2] has 2 at dim 0 but n is 1 (from a dim 0)");
  CHECK_NIMBLE_ERROR(run_op(ops::sub(), types, {x, from_values({1, 3}, DType::f32, {1, 2, 3})}, {out}),
                     ErrorKind::invalid_argument, "b [1, 3] has 3 at dim 1, expected 2");
  CHECK_NIMBLE_ERROR(run_op(ops::sub(), types, {x, from_values({2}, DType::f32, {1, 2})}, {out}),
                     ErrorKind::invalid_argument, "b must have rank 2, got [2]");
  CHECK_NIMBLE_ERROR(run_op(ops::sub(), types, {x, from_values({1, 2}, DType::f64, {1, 2})}, {out}),
                     ErrorKind::type_error, "b must be f32, got f64");
  Tensor wrong = Tensor::empty({3, 2}, DType::f32);
  CHECK_NIMBLE_ERROR(run_op(ops::sub(), types, {x, x}, {wrong}), ErrorKind::runtime_error,
                     "sub: output sub was allocated as [3, 2], but its dim 0 is 1 (n)");
  // An undefined tensor (of the default dtype and rank 0) is named.
  const std::vector<ir::Type> scalars{f32({}), f32({})};
  Tensor scalar_out = Tensor::empty({}, DType::f32);
  CHECK_NIMBLE_ERROR(run_op(ops::sub(), scalars, {Tensor::scalar(1.0f), Tensor()}, {scalar_out}),
                     ErrorKind::invalid_argument, "sub: input b is an undefined tensor");
  // A rule's check: Any dims that do not broadcast at run time.
  const std::vector<ir::Type> any{f32({ir::Any, 3}), f32({ir::Any, 1})};
  Tensor sum = Tensor::empty({2, 3}, DType::f32);
  CHECK_NIMBLE_ERROR(run_op(ops::add(), any,
                            {from_values({2, 3}, DType::f32, {1, 2, 3, 4, 5, 6}),
                             from_values({3, 1}, DType::f32, {1, 2, 3})},
                            {sum}),
                     ErrorKind::invalid_argument, "add: a, b do not broadcast at dim 0");
}

TEST_CASE("jit: kernels are flat loops where they can be, and split across threads", "[jit]") {
  te::SymbolTable symbols;
  const ir::Type t = f32({ir::Dim("n"), 64});
  const std::vector<te::Tensor> in{te::placeholder_for(*t.as<ir::TensorTypeNode>(), "a", symbols),
                                   te::placeholder_for(*t.as<ir::TensorTypeNode>(), "b", symbols)};
  const std::vector<te::Tensor> out = ops::add().compute(in, {});
  const std::string ir = codegen::cpu_kernel_ir("add", in, out);
  INFO(ir);
  CHECK(ir.find("bind n = a.dim0") != std::string::npos);
  CHECK(ir.find("check b.dim0 == n") != std::string::npos);
  CHECK(ir.find("parallel for add_i in [0, (n * 64))") != std::string::npos);

  // Large enough to split: the same result on 1 and on 2 threads.
  const Ref<Kernel> kernel = codegen::compile_cpu_kernel("add", in, out);
  Rng rng(3);
  const Tensor a = random_tensor(rng, {4099, 64}, DType::f32);
  const Tensor b = random_tensor(rng, {4099, 64}, DType::f32);
  const auto [one, two] = run_on_one_and_two_threads(*kernel, {a, b}, {4099, 64});
  CHECK_THAT(two, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
}

TEST_CASE("jit: matmul sums with the reduction outside the innermost output axis", "[jit]") {
  te::SymbolTable symbols;
  const std::vector<te::Tensor> in = symbolic_matmul_inputs(symbols);
  const std::vector<te::Tensor> out = ops::matmul().compute(in, {});
  const std::string ir = codegen::cpu_kernel_ir("matmul", in, out);
  INFO(ir);
  // Two stages: the init, then k outside the vectorized j loop.
  const std::size_t init = ir.find("_init");
  const std::size_t k_loop = ir.find("for ", ir.find("stage", init + 1));
  CHECK(init != std::string::npos);
  CHECK(ir.find("vectorized for", k_loop) != std::string::npos);

  const Ref<Kernel> kernel = codegen::compile_cpu_kernel("matmul", in, out);
  Rng rng(5);
  const Range values{.lo = -1, .hi = 1, .specials = false};
  const Tensor a = random_tensor(rng, {300, 70}, DType::f32, values);
  const Tensor b = random_tensor(rng, {70, 129}, DType::f32, values);
  const auto [one, two] = run_on_one_and_two_threads(*kernel, {a, b}, {300, 129});
  // Each element sums over k in order on any number of threads.
  CHECK_THAT(two, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
  const Value expected = ops::matmul().reference(std::vector<Value>{a, b}, {});
  CHECK_THAT(one, IsCloseTo(expected.tensor(), {.rtol = 1e-5, .atol = 1e-6 * 71}));
}

TEST_CASE("jit: matmul and batch_matmul with b not transposed run as register tiles of outer products", "[jit]") {
  SymbolicInputs input;
  const auto tiled = [](std::span<const te::Tensor> in, std::span<const te::Tensor> out) {
    return stages_matching(in, out, codegen::match_outer_product);
  };
  const ir::Dim m("m"), k("k"), n("n"), b("b");
  const std::vector<te::Tensor> mm_in{input({m, k}, "a"), input({k, n}, "w")};
  const std::vector<te::Tensor> mm_out = ops::matmul().compute(mm_in, {});
  // Attention's p · v: a batch of products (the batch is the loop split across threads).
  const std::vector<te::Tensor> bmm_in{input({b, m, k}, "p"), input({b, k, n}, "v")};
  const std::vector<te::Tensor> bmm_out = ops::batch_matmul().compute(bmm_in, {});
  const std::vector<te::Tensor> bmt_in{input({b, m, k}, "q"), input({b, n, k}, "kt")};
  const std::vector<te::Tensor> bmt_out = ops::batch_matmul().compute(bmt_in, {{"transpose_b", true}});
  CHECK(tiled(mm_in, mm_out) == 1);
  CHECK(tiled(bmm_in, bmm_out) == 1);
  CHECK(tiled(bmt_in, bmt_out) == 0);  // b[j, k]: a dot product (the test above)

  const Ref<Kernel> mm = codegen::compile_cpu_kernel("matmul", mm_in, mm_out);
  const Ref<Kernel> bmm = codegen::compile_cpu_kernel("batch_matmul", bmm_in, bmm_out);
  Rng rng(12);
  const Range values{.lo = -1, .hi = 1, .specials = false};
  // Rows around the in-place tile's 6 and the packed tile's 8, past the 24
  // that pack b (on 1 thread and on 2) and many (1000), columns around one,
  // two and three vectors of 4, 8 and 16 lanes (masked tails, partial
  // panels), k around nothing and past the 512 steps a panel holds.
  const std::int64_t ms[] = {0, 1, 5, 6, 7, 13, 61, 1000};
  const std::int64_t ns[] = {0, 1, 3, 4, 7, 8, 9, 16, 17, 33, 64, 100};
  const std::int64_t ks[] = {0, 1, 3, 64, 301, 530};
  // Then, whatever the draws, many rows over several panels, and columns
  // past a block of panels (384 columns: 8 panels of 3 vectors of 16, or 24
  // of 2 vectors of 8), the last partial.
  const std::int64_t fixed[][3] = {{1000, 64, 301}, {1000, 100, 64}, {1000, 33, 530}, {103, 401, 77}};
  for (std::size_t trial = 0; trial < 40 + std::size(fixed); ++trial) {
    const bool drawn = trial < 40;
    const std::int64_t rows = drawn ? ms[pick(rng, 0, 7)] : fixed[trial - 40][0];
    const std::int64_t cols = drawn ? ns[pick(rng, 0, 11)] : fixed[trial - 40][1];
    const std::int64_t depth = drawn ? ks[pick(rng, 0, 5)] : fixed[trial - 40][2];
    INFO("m " << rows << " n " << cols << " k " << depth);
    // Each element sums over k in order, with a fused multiply-add per step.
    const Tolerance tolerance{.rtol = 1e-5, .atol = 1e-6 * static_cast<double>(depth + 1)};
    const auto check = [&](const Kernel& kernel, const ir::OpDef& op, const std::vector<Tensor>& in,
                           const Shape& shape) {
      const Value expected = op.reference(std::vector<Value>(in.begin(), in.end()), {});
      const auto [one, two] = run_on_one_and_two_threads(kernel, in, shape);
      CHECK_THAT(one, IsCloseTo(expected.tensor(), tolerance));
      CHECK_THAT(two, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
    };
    check(*mm, ops::matmul(),
          {random_tensor(rng, {rows, depth}, DType::f32, values), random_tensor(rng, {depth, cols}, DType::f32, values)},
          {rows, cols});
    check(*bmm, ops::batch_matmul(),
          {random_tensor(rng, {3, rows, depth}, DType::f32, values), random_tensor(rng, {3, depth, cols}, DType::f32, values)},
          {3, rows, cols});
  }
  // A specialized kernel at rows x cols x depth on 1 and 2 threads: the
  // reference's sums, and the same bits on both.
  const auto check_specialized = [&](const Kernel& kernel, std::int64_t rows, std::int64_t cols, std::int64_t depth) {
    INFO("m " << rows << " n " << cols << " k " << depth);
    const std::vector<Tensor> in{random_tensor(rng, {rows, depth}, DType::f32, values),
                                 random_tensor(rng, {depth, cols}, DType::f32, values)};
    const Value expected = ops::matmul().reference(std::vector<Value>(in.begin(), in.end()), {});
    const auto [one, two] = run_on_one_and_two_threads(kernel, in, {rows, cols});
    CHECK_THAT(one, IsCloseTo(expected.tensor(), {.rtol = 1e-5, .atol = 1e-6 * static_cast<double>(depth + 1)}));
    CHECK_THAT(two, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
  };
  // Kernels specialized for fewer rows than a tile split their columns
  // across threads (a [1, k] x [k, n] on one thread otherwise): each
  // thread's share in whole single-row tiles of four vectors, the last
  // partial; enough work for two threads.
  for (const std::int64_t rows : {1, 2, 5}) {
    const Bucket bucket{{DimBucket{.exact = rows, .min = rows, .max = rows}, DimBucket{}, DimBucket{}}};
    const Ref<Kernel> few = codegen::compile_cpu_kernel("matmul", mm_in, mm_out, bucket);
    for (const std::int64_t cols : {1, 63, 64, 65, 200, 1000}) check_specialized(*few, rows, cols, cols < 64 ? 2000 : 300);
  }
  // So do kernels specialized for at most a row block of rows and at least
  // 512 columns (each thread packs only its panels of b): ranges of whole
  // panels, the last one's columns partial; rows below the packing
  // threshold (16) and past it, in whole tiles and not.
  const Bucket wide_bucket{{DimBucket{.min = 16, .max = 255}, DimBucket{}, DimBucket{.min = 512, .max = 1023}}};
  const Ref<Kernel> wide = codegen::compile_cpu_kernel("matmul", mm_in, mm_out, wide_bucket);
  for (const std::int64_t rows : {16, 37, 128})
    for (const std::int64_t cols : {512, 700, 1023}) check_specialized(*wide, rows, cols, 300);
}

TEST_CASE("jit: dense and batch_matmul with b transposed run as register tiles of dot products", "[jit]") {
  SymbolicInputs input;
  te::SymbolTable& symbols = input.symbols;
  const auto tiled = [](std::span<const te::Tensor> in, std::span<const te::Tensor> out) {
    return stages_matching(in, out, codegen::match_dot_product);
  };
  const ir::Dim m("m"), k("k"), n("n"), b("b");
  const std::vector<te::Tensor> dense_in{input({m, k}, "x"), input({n, k}, "w"),
                                         input({n}, "bias")};
  const std::vector<te::Tensor> dense_out = ops::dense().compute(dense_in, {});
  // W1's layout: rows along the outer dim, a unit dim between them and the columns.
  const std::vector<te::Tensor> seq_in{input({m, 1, k}, "xs"), input({n, k}, "w"),
                                       input({n}, "bias")};
  const std::vector<te::Tensor> seq_out = ops::dense().compute(seq_in, {});
  // One row: the only loop is the columns'.
  const std::vector<te::Tensor> vec_in{input({k}, "v"), input({n, k}, "w"), input({n}, "bias")};
  const std::vector<te::Tensor> vec_out = ops::dense().compute(vec_in, {});
  // A batch of one: the columns are the loop split across threads.
  const std::vector<te::Tensor> one_in{input({1, k}, "h"), input({n, k}, "w"), input({n}, "bias")};
  const std::vector<te::Tensor> one_out = ops::dense().compute(one_in, {});
  const std::string one_ir = codegen::cpu_kernel_ir("dense", one_in, one_out);
  INFO(one_ir);
  CHECK(one_ir.find("parallel for i1 in [0, n)") != std::string::npos);
  const std::vector<te::Tensor> bmm_in{input({b, m, k}, "q"), input({b, n, k}, "kt")};
  const std::vector<te::Tensor> bmm_out = ops::batch_matmul().compute(bmm_in, {{"transpose_b", true}});
  const std::vector<te::Tensor> mm_in = symbolic_matmul_inputs(symbols);
  const std::vector<te::Tensor> mm_out = ops::matmul().compute(mm_in, {});
  CHECK(tiled(dense_in, dense_out) == 1);
  CHECK(tiled(seq_in, seq_out) == 1);
  CHECK(tiled(vec_in, vec_out) == 1);
  CHECK(tiled(one_in, one_out) == 1);
  CHECK(tiled(bmm_in, bmm_out) == 1);
  CHECK(tiled(mm_in, mm_out) == 0);  // b[k, j]: summed with k outside the columns

  const Ref<Kernel> dense = codegen::compile_cpu_kernel("dense", dense_in, dense_out);
  const Ref<Kernel> seq = codegen::compile_cpu_kernel("dense", seq_in, seq_out);
  const Ref<Kernel> vec = codegen::compile_cpu_kernel("dense", vec_in, vec_out);
  const Ref<Kernel> single = codegen::compile_cpu_kernel("dense", one_in, one_out);
  const Ref<Kernel> bmm = codegen::compile_cpu_kernel("batch_matmul", bmm_in, bmm_out);
  Rng rng(11);
  const Range values{.lo = -1, .hi = 1, .specials = false};
  // Rows around the tile's 4, columns around its 3 and a column block, k
  // around the vector's 8 and 16 lanes and the chunks of k (1024: one chunk
  // and a few, one with a masked last vector, 20000 with 20).
  const std::int64_t ms[] = {0, 1, 3, 4, 5, 9, 14};
  const std::int64_t ns[] = {0, 1, 2, 3, 4, 7, 65, 130};
  const std::int64_t ks[] = {0, 1, 7, 8, 9, 17, 100, 1024, 1030, 2049, 20000};
  for (int trial = 0; trial < 48; ++trial) {
    const std::int64_t rows = ms[pick(rng, 0, 6)], cols = ns[pick(rng, 0, 7)], depth = ks[pick(rng, 0, 10)];
    INFO("m " << rows << " n " << cols << " k " << depth);
    const Tensor w = random_tensor(rng, {cols, depth}, DType::f32, values);
    const Tensor bias = random_tensor(rng, {cols}, DType::f32, values);
    // Sums of up to 20000 products of [-1, 1]: rounding in another order.
    const Tolerance tolerance{.rtol = 1e-5, .atol = 1e-6 * static_cast<double>(depth + 1)};
    const auto check = [&](const Kernel& kernel, const ir::OpDef& op, const std::vector<Tensor>& in,
                           const ir::Attrs& attrs) {
      const Value expected = op.reference(std::vector<Value>(in.begin(), in.end()), attrs);
      const auto [one, two] = run_on_one_and_two_threads(kernel, in, expected.tensor().shape());
      CHECK_THAT(one, IsCloseTo(expected.tensor(), tolerance));
      CHECK_THAT(two, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
    };
    check(*dense, ops::dense(), {random_tensor(rng, {rows, depth}, DType::f32, values), w, bias}, {});
    check(*seq, ops::dense(), {random_tensor(rng, {rows, 1, depth}, DType::f32, values), w, bias}, {});
    check(*vec, ops::dense(), {random_tensor(rng, {depth}, DType::f32, values), w, bias}, {});
    check(*single, ops::dense(), {random_tensor(rng, {1, depth}, DType::f32, values), w, bias}, {});
    if (depth <= 100) {
      const Tensor q = random_tensor(rng, {3, rows, depth}, DType::f32, values);
      const Tensor kt = random_tensor(rng, {3, cols, depth}, DType::f32, values);
      check(*bmm, ops::batch_matmul(), {q, kt}, {{"transpose_b", true}});
    }
  }
  // Every count of rows past the whole tiles (2 and 3 run as one tile of 3
  // whose rows past the end read the last one and store nothing), with k in
  // one chunk and in several (sums added to the output chunk by chunk).
  for (const std::int64_t rows : {2, 3, 6, 7})
    for (const std::int64_t depth : {17, 1030, 2049}) {
      INFO("m " << rows << " k " << depth);
      const std::vector<Tensor> in{random_tensor(rng, {rows, depth}, DType::f32, values),
                                   random_tensor(rng, {65, depth}, DType::f32, values),
                                   random_tensor(rng, {65}, DType::f32, values)};
      const Value expected = ops::dense().reference(std::vector<Value>(in.begin(), in.end()), {});
      const auto [one, two] = run_on_one_and_two_threads(*dense, in, {rows, 65});
      CHECK_THAT(one, IsCloseTo(expected.tensor(), {.rtol = 1e-5, .atol = 1e-6 * static_cast<double>(depth + 1)}));
      CHECK_THAT(two, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
    }
}

TEST_CASE("jit: a product of many rows runs as outer products over b packed transposed, to the reference's sums",
          "[jit]") {
  // dense(x, w, bias) * scale and batch_matmul(q, ktᵀ) with 96 rows and more,
  // or 24 and more with a b of at most 256 Ki floats (dot_packed; all of
  // these): tiles of 8 rows (6 below AVX-512) and single rows past
  // them; columns around a panel (3 vectors, 2 below AVX-512), a block of
  // panels and a partial last panel of 1, 2 or 3 vectors (b's rows past it
  // are zeros, the output's columns past it untouched); k around a vector,
  // a masked last vector and the 512 steps a panel holds (the sums added to
  // the output step by step, the scale — not additive — at the last, and
  // the init alone with k = 0). At both vector widths, on one thread and two
  // (the columns split), bit for bit alike; outputs start as NaN. Then
  // kernels whose columns are known few pairs of vectors (panels of 2),
  // dense and matmul.
  Rng rng(31);
  const Range values{.lo = -1, .hi = 1, .specials = false};
  const std::int64_t ms[] = {24, 33, 97, 103, 130};
  const std::int64_t ns[] = {1, 16, 47, 48, 49, 100, 145, 300, 400};
  const std::int64_t ks[] = {0, 1, 15, 16, 17, 300, 512, 513, 1100};
  const ir::Dim m("m"), k("k"), n("n"), b("b");
  for (const unsigned bits : {host_vector_bits(), 256u}) {
    const codegen::CpuEmitOptions options = codegen::CpuEmitOptions::for_vector_bits(bits);
    SymbolicInputs input;
    const std::vector<te::Tensor> dense_in{input({m, k}, "x"), input({n, k}, "w"), input({n}, "bias")};
    const te::Tensor d = ops::dense().compute(dense_in, {})[0];
    std::vector<te::Tensor> in = dense_in;
    in.push_back(input({m, n}, "scale"));
    const std::vector<te::Tensor> out = ops::mul().compute(std::vector<te::Tensor>{d, in[3]}, {});
    const Ref<Kernel> dense_mul = codegen::compile_cpu_kernel_with("dense_mul", in, out, options);
    const std::vector<te::Tensor> bmm_in{input({b, m, k}, "q"), input({b, n, k}, "kt")};
    const Ref<Kernel> bmm = codegen::compile_cpu_kernel_with(
        "batch_matmul", bmm_in, ops::batch_matmul().compute(bmm_in, {{"transpose_b", true}}), options);
    const auto check = [&](const Kernel& kernel, const std::vector<Tensor>& args, const Value& expected,
                           std::int64_t depth) {
      const Tolerance tolerance{.rtol = 1e-5, .atol = 1e-6 * static_cast<double>(depth + 1)};
      Tensor one;
      for (const int threads : {1, 2}) {
        INFO(threads << " threads");
        Tensor result = Tensor::full(expected.tensor().shape(), std::nan(""), DType::f32);
        set_num_threads(threads);
        kernel.run(args, std::vector<Tensor>{result});
        CHECK_THAT(result, IsCloseTo(expected.tensor(), tolerance));
        if (threads == 1) one = result;
        else CHECK_THAT(result, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
      }
    };
    for (int trial = 0; trial < 16; ++trial) {
      const std::int64_t rows = ms[trial % 5], cols = ns[pick(rng, 0, 8)], depth = ks[pick(rng, 0, 8)];
      INFO("vector bits " << bits << " m " << rows << " n " << cols << " k " << depth);
      const std::vector<Tensor> args{random_tensor(rng, {rows, depth}, DType::f32, values),
                                     random_tensor(rng, {cols, depth}, DType::f32, values),
                                     random_tensor(rng, {cols}, DType::f32, values),
                                     random_tensor(rng, {rows, cols}, DType::f32, values)};
      const Value dense = ops::dense().reference(std::vector<Value>(args.begin(), args.begin() + 3), {});
      check(*dense_mul, args, ops::mul().reference(std::vector<Value>{dense, args[3]}, {}), depth);
      if (trial % 4 == 0) {
        const std::vector<Tensor> qk{random_tensor(rng, {2, rows, depth}, DType::f32, values),
                                     random_tensor(rng, {2, cols, depth}, DType::f32, values)};
        check(*bmm, qk, ops::batch_matmul().reference(std::vector<Value>(qk.begin(), qk.end()), {{"transpose_b", true}}),
              depth);
      }
    }
    for (const std::int64_t cols : {32, 64, 96, 160}) {
      const std::int64_t rows = 101, depth = 300;
      INFO("vector bits " << bits << " static m " << rows << " n " << cols << " k " << depth);
      const StaticDense fixed_dense = static_dense(rng, rows, cols, depth, options, values);
      check(*fixed_dense.kernel, fixed_dense.args, fixed_dense.expected, depth);
      SymbolicInputs fixed;
      const std::vector<te::Tensor> m_in{fixed({rows, depth}, "a"), fixed({depth, cols}, "b")};
      const Ref<Kernel> m_kernel = codegen::compile_cpu_kernel_with("matmul", m_in, ops::matmul().compute(m_in, {}), options);
      const std::vector<Tensor> m_args{random_tensor(rng, {rows, depth}, DType::f32, values),
                                       random_tensor(rng, {depth, cols}, DType::f32, values)};
      check(*m_kernel, m_args, ops::matmul().reference(std::vector<Value>(m_args.begin(), m_args.end()), {}), depth);
    }
  }
}

TEST_CASE("jit: a product's static sizes leave out the tiles they rule out, and nothing else", "[jit]") {
  // dense over static shapes: rows below, at and past the tile's 4 (a
  // specialized kernel's, BERT's 16), each of them, leaving 1, 2 or 3 rows
  // past the whole tiles (2 and 3 go as one tile of that many rows);
  // columns that are and are not whole tiles (4 with AVX-512, 3 below it),
  // split across two threads in whole tiles; k of whole vectors, one chunk
  // and two, and with a masked tail. The outputs start as NaN: a tile left
  // out that was needed shows.
  Rng rng(17);
  const Range values{.lo = -1, .hi = 1, .specials = false};
  const std::int64_t ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 11, 16};
  const std::int64_t ns[] = {3, 4, 6, 8, 12, 130, 132};
  const std::int64_t ks[] = {8, 16, 20, 48, 1056, 2048};
  for (const unsigned bits : {host_vector_bits(), 256u}) {
    const codegen::CpuEmitOptions options = codegen::CpuEmitOptions::for_vector_bits(bits);
    for (int trial = 0; trial < 20; ++trial) {
      const std::int64_t rows = ms[trial % 10], cols = ns[pick(rng, 0, 6)], depth = ks[pick(rng, 0, 5)];
      INFO("vector bits " << bits << " m " << rows << " n " << cols << " k " << depth);
      const auto [kernel, args, expected] = static_dense(rng, rows, cols, depth, options, values);
      const Tolerance tolerance{.rtol = 1e-5, .atol = 1e-6 * static_cast<double>(depth + 1)};
      for (const int threads : {1, 2}) {
        INFO(threads << " threads");
        Tensor out = Tensor::full({rows, cols}, std::nan(""), DType::f32);
        set_num_threads(threads);
        kernel->run(args, std::vector<Tensor>{out});
        CHECK_THAT(out, IsCloseTo(expected.tensor(), tolerance));
      }
    }
  }
}

TEST_CASE("jit: a product whose rows of b cross cache lines reads them by groups that start alike", "[jit]") {
  // dense of one vector (no row loop), or of 2, 3 or 7 rows (a tile of
  // fewer rows than a whole one, and a whole one), over static rows of b
  // that are not whole vectors
  // (W2's 300 and 150): its columns go in groups of 4 (300 floats: 1200
  // bytes, a row starts 48 bytes further into a line than the one before,
  // so every 4th starts alike) or 8 (150), and each tile steps from its
  // rows' vector boundary, its first step masked below the row and its
  // last past it. Columns around the groups (a group of tiles, one more,
  // one fewer), k in one chunk of 1024 and in several; scaled by a [n]
  // tensor, lane-wise along a row, so that each row of a group of tiles
  // leaves as one vector over the group's columns. Then rows known only at
  // run time (-1: a kernel for any number, run at 1, 5, 6, 9 and 19 rows):
  // whole tiles of 4 and the rows past them in a tile of 3 that stores only
  // the rows there are. At both vector widths, on one thread and two (the
  // columns split in whole tiles, not groups). The outputs start as NaN: a
  // column or row left out shows.
  Rng rng(23);
  const Range values{.lo = -1, .hi = 1, .specials = false};
  const std::int64_t ns[] = {1, 3, 5, 15, 16, 17, 31, 33, 65, 750};
  const std::int64_t ks[] = {7, 17, 150, 300, 1030, 2049};
  const ir::Dim m("m");
  for (const unsigned bits : {host_vector_bits(), 256u}) {
    const codegen::CpuEmitOptions options = codegen::CpuEmitOptions::for_vector_bits(bits);
    for (const std::int64_t depth : ks)
      for (const std::int64_t kernel_rows : {0, 2, 3, 7, -1}) {
        const std::int64_t cols = ns[pick(rng, 0, 9)];
        SymbolicInputs input;
        const te::Tensor x = kernel_rows < 0   ? input({m, depth}, "x")
                             : kernel_rows == 0 ? input({depth}, "x")
                                                : input({kernel_rows, depth}, "x");
        const std::vector<te::Tensor> dense_in{x, input({cols, depth}, "w"), input({cols}, "bias")};
        std::vector<te::Tensor> in = dense_in;
        in.push_back(input({cols}, "scale"));
        const std::vector<te::Tensor> out =
            ops::mul().compute(std::vector<te::Tensor>{ops::dense().compute(dense_in, {})[0], in[3]}, {});
        const codegen::KernelIR ir = codegen::lower_to_kernel_ir("dense_mul", in, out);
        REQUIRE(ir.stages.size() == 1);
        const std::optional<codegen::DotProductStage> dot = codegen::match_dot_product(ir, ir.stages[0]);
        REQUIRE(dot);
        CHECK((dot->rows == nullptr) == (kernel_rows == 0));
        const Ref<Kernel> kernel = codegen::compile_cpu_kernel_with("dense_mul", in, out, options);
        for (const std::int64_t rows : kernel_rows >= 0 ? std::vector<std::int64_t>{kernel_rows}
                                                        : std::vector<std::int64_t>{1, 5, 6, 9, 19}) {
          INFO("vector bits " << bits << " m " << rows << (kernel_rows < 0 ? " (any)" : "") << " n " << cols
                              << " k " << depth);
          // The output's shape, and x's without its last dim: none without rows.
          const std::vector<std::int64_t> out_shape = rows == 0 ? std::vector<std::int64_t>{cols}
                                                                : std::vector<std::int64_t>{rows, cols};
          const std::vector<std::int64_t> x_shape = rows == 0 ? std::vector<std::int64_t>{depth}
                                                              : std::vector<std::int64_t>{rows, depth};
          const std::vector<Tensor> args{random_tensor(rng, x_shape, DType::f32, values),
                                         random_tensor(rng, {cols, depth}, DType::f32, values),
                                         random_tensor(rng, {cols}, DType::f32, values),
                                         random_tensor(rng, {cols}, DType::f32, values)};
          const Value dense = ops::dense().reference(std::vector<Value>(args.begin(), args.begin() + 3), {});
          const Value expected = ops::mul().reference(std::vector<Value>{dense, args[3]}, {});
          const Tolerance tolerance{.rtol = 1e-5, .atol = 1e-6 * static_cast<double>(depth + 1)};
          for (const int threads : {1, 2}) {
            INFO(threads << " threads");
            Tensor result = Tensor::full(Shape(out_shape), std::nan(""), DType::f32);
            set_num_threads(threads);
            kernel->run(args, std::vector<Tensor>{result});
            CHECK_THAT(result, IsCloseTo(expected.tensor(), tolerance));
          }
        }
      }
  }
}

TEST_CASE("jit: a matrix-vector product walks its column blocks in turn forwards and backwards, to the same sums",
          "[jit]") {
  // Columns over several blocks of b (48 Ki floats of b a block: 96
  // columns of 512, 48 of a chunk of 1024), the last one partial; every
  // call on one thread equals the reference and, bit for bit, the call
  // before it (which walked the other way).
  Rng rng(29);
  const Range values{.lo = -1, .hi = 1, .specials = false};
  for (const auto& [cols, depth] : {std::pair<std::int64_t, std::int64_t>{300, 512}, {2048, 512}, {100, 2049},
                                    {750, 300}, {5, 17}}) {
    INFO("n " << cols << " k " << depth);
    SymbolicInputs input;
    const std::vector<te::Tensor> in{input({1, depth}, "h"), input({cols, depth}, "w"), input({cols}, "bias")};
    const Ref<Kernel> kernel = codegen::compile_cpu_kernel("dense", in, ops::dense().compute(in, {}));
    const std::vector<Tensor> args{random_tensor(rng, {1, depth}, DType::f32, values),
                                   random_tensor(rng, {cols, depth}, DType::f32, values),
                                   random_tensor(rng, {cols}, DType::f32, values)};
    const Value expected = ops::dense().reference(std::vector<Value>(args.begin(), args.end()), {});
    set_num_threads(1);
    Tensor before;
    for (int call = 0; call < 3; ++call) {
      INFO("call " << call);
      Tensor out = Tensor::full({1, cols}, std::nan(""), DType::f32);
      kernel->run(args, std::vector<Tensor>{out});
      CHECK_THAT(out, IsCloseTo(expected.tensor(), {.rtol = 1e-5, .atol = 1e-6 * static_cast<double>(depth + 1)}));
      if (call > 0) CHECK_THAT(out, IsCloseTo(before, {.rtol = 0, .atol = 0, .equal_nan = true}));
      before = out;
    }
  }
}

TEST_CASE("jit: a product's epilogue is folded into its stage and applied to its complete sums", "[jit]") {
  // dense(x, w, bias) * scale: the sum, its bias and the scale in one stage
  // with no temporary; the scale is not additive, so an epilogue applied
  // to a chunk's partial sums (k over 1024) would show. The scale is [m, n]
  // (read along the columns) or [m, 1] (one value per row, broadcast): both
  // go through the epilogue a tile row at a time, as vectors.
  SymbolicInputs input;
  const ir::Dim m("m"), k("k"), n("n");
  const std::vector<te::Tensor> dense_in{input({m, k}, "x"), input({n, k}, "w"), input({n}, "bias")};
  const te::Tensor d = ops::dense().compute(dense_in, {})[0];
  for (const bool per_row : {false, true}) {
    INFO((per_row ? "scale [m, 1]" : "scale [m, n]"));
    std::vector<te::Tensor> in = dense_in;
    in.push_back(per_row ? input({m, 1}, "scale") : input({m, n}, "scale"));
    const std::vector<te::Tensor> out = ops::mul().compute(std::vector<te::Tensor>{d, in[3]}, {});
    const codegen::KernelIR ir = codegen::lower_to_kernel_ir("dense_mul", in, out);
    INFO(codegen::to_string(ir));
    CHECK(ir.stages.size() == 1);
    CHECK(ir.buffers.size() == in.size() + 1);
    const std::optional<codegen::DotProductStage> dot = codegen::match_dot_product(ir, ir.stages[0]);
    REQUIRE(dot);
    CHECK(dot->row_vectors);

    const Ref<Kernel> kernel = codegen::compile_cpu_kernel("dense_mul", in, out);
    Rng rng(per_row ? 6 : 5);
    const Range values{.lo = -1, .hi = 1, .specials = false};
    for (const std::int64_t depth : {0, 5, 16, 1024, 1030, 2049, 3100})
      for (const std::int64_t rows : {1, 5})
        for (const std::int64_t cols : {3, 9}) {
          INFO("m " << rows << " n " << cols << " k " << depth);
          const std::vector<Tensor> args{random_tensor(rng, {rows, depth}, DType::f32, values),
                                         random_tensor(rng, {cols, depth}, DType::f32, values),
                                         random_tensor(rng, {cols}, DType::f32, values),
                                         random_tensor(rng, {rows, per_row ? 1 : cols}, DType::f32, values)};
          const Value dense = ops::dense().reference(std::vector<Value>(args.begin(), args.begin() + 3), {});
          const Value expected = ops::mul().reference(std::vector<Value>{dense, args[3]}, {});
          const auto [one, two] = run_on_one_and_two_threads(*kernel, args, {rows, cols});
          const Tolerance tolerance{.rtol = 1e-5, .atol = 1e-6 * static_cast<double>(depth + 1)};
          CHECK_THAT(one, IsCloseTo(expected.tensor(), tolerance));
          CHECK_THAT(two, IsCloseTo(one, {.rtol = 0, .atol = 0, .equal_nan = true}));
        }
  }
  // A GELU is no epilogue for scalar sums: it stays a stage of its own, which vectorizes.
  const std::vector<te::Tensor> gelu = ops::gelu().compute(std::vector<te::Tensor>{d}, {});
  CHECK(codegen::lower_to_kernel_ir("dense_gelu", dense_in, gelu).stages.size() == 2);
  // A sum read twice (softmax's max, by the exp and the sum) stays materialized.
  const std::vector<te::Tensor> soft_in{input({m, n}, "s")};
  const std::vector<te::Tensor> soft = ops::softmax().compute(soft_in, {{"axis", std::int64_t{-1}}});
  CHECK(codegen::lower_to_kernel_ir("softmax", soft_in, soft).stages.size() == 3);
}

TEST_CASE("jit: the VM uses JIT kernels by default and counts their compilation", "[jit]") {
  Builder b;
  b.entry(b.def("f", {{"x", ir::tensor_type({ir::Any, 3}, DType::f32)}},
                [&](Expr x) { return sigmoid(x * x + 1.0); }));
  const ir::Module m = b.build();
  KernelCache::global().clear();
  reset_engine_stats();
  vm::VirtualMachine machine(compile(m));
  const Tensor x = from_values({2, 3}, DType::f32, {-2, -1, 0, 1, 2, 3});
  const Value expected = evaluate(m, "f", {x});
  CHECK_THAT(machine.invoke("f", {x}).tensor(), IsCloseTo(expected.tensor(), {.rtol = 1e-6, .atol = 1e-7}));
  KernelCache::global().wait_for_background();  // the specialized kernel of its bucket
  const EngineStats s = engine_stats();
  CHECK(s.kernels_compiled >= 1);
  CHECK(kernel_compile_log().size() == s.kernels_compiled);
  for (const KernelCompileRecord& r : kernel_compile_log()) {
    CHECK(r.ms > 0);
    // Every kernel went through LLVM's passes, its code generator and ORC;
    // the phases are parts of the whole.
    CHECK(r.optimize_ms > 0);
    CHECK(r.codegen_ms > 0);
    CHECK(r.link_ms > 0);
    CHECK(r.optimize_ms + r.codegen_ms + r.link_ms <= r.ms);
  }
  // A second VM finds them in the cache.
  vm::VirtualMachine again(compile(m));
  (void)again.invoke("f", {x});
  CHECK(engine_stats().kernels_compiled == s.kernels_compiled);
  // An export compiles objects on this thread that no record counts; the
  // next kernel's record has its own phases only.
  const TempDir dir;
  std::filesystem::create_directories(dir.str());
  (void)export_executable(machine.executable(), dir.str() + "/f.nimble");
  Builder other;
  other.entry(other.def("g", {{"x", ir::tensor_type({ir::Any, 3}, DType::f32)}}, [&](Expr v) { return tanh(v); }));
  vm::VirtualMachine next(compile(other.build()));
  const std::size_t logged = kernel_compile_log().size();
  (void)next.invoke("g", {x});
  KernelCache::global().wait_for_background();
  const std::vector<KernelCompileRecord> log = kernel_compile_log();
  const auto generic = std::find_if(log.begin() + static_cast<std::ptrdiff_t>(logged), log.end(),
                                    [](const KernelCompileRecord& r) { return r.bucket.empty(); });
  REQUIRE(generic != log.end());  // compiled on this thread, after the export
  CHECK(generic->optimize_ms + generic->codegen_ms + generic->link_ms <= generic->ms);
}
