// Random calls of every op with a compute rule, and the check that runs one
// against the op's reference kernel: shared by the compute-rule tests
// (naive evaluator) and the JIT tests (compiled kernels).
#pragma once

#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ir/op.hpp"
#include "nimble/runtime/tensor.hpp"
#include "nimble/runtime/tensor_compare.hpp"
#include "nimble/runtime/value.hpp"
#include "ops/compute.hpp"

namespace nimble::testing {

using Ints = std::vector<std::int64_t>;
using Rng = std::mt19937;

/// The placeholders of a matmul over symbolic dims: a: f32[m, k], b: f32[k, n]
/// (the JIT's reduction and bucket tests compile its rule).
[[nodiscard]] std::vector<te::Tensor> symbolic_matmul_inputs(te::SymbolTable& symbols);

/// How random elements are drawn.
struct Range {
  double lo = -3;
  double hi = 3;
  bool whole = false;    ///< floating-point values whole too (ties for argmax)
  bool specials = true;  ///< an occasional NaN or ±inf in floating point
};

[[nodiscard]] std::int64_t pick(Rng& rng, std::int64_t lo, std::int64_t hi);
[[nodiscard]] Ints random_shape(Rng& rng, std::size_t min_rank = 0, std::size_t max_rank = 4);
[[nodiscard]] Tensor from_values(const Ints& shape, DType dtype, const std::vector<double>& values);
[[nodiscard]] Tensor i64s(const std::vector<std::int64_t>& values);
/// Random elements of `dtype` in the range (clamped to integer dtypes'
/// limits); integers and bool are whole.
[[nodiscard]] Tensor random_tensor(Rng& rng, const Ints& shape, DType dtype, Range range = {});

/// One call of an op: its arguments as the reference kernel takes them.
struct Call {
  std::vector<Value> args;
  ir::Attrs attrs = {};
  /// Flattened tensor arguments whose dims stay static (shapes and bounds
  /// given as tensors must have a static length).
  std::set<std::size_t> static_inputs = {};
  /// Every dim static (squeeze with axes [] needs static dims).
  bool all_static = false;
};

using Generator = std::function<Call(Rng&)>;

/// A generator of random calls for every op with a compute rule.
[[nodiscard]] std::map<const ir::OpDef*, Generator> generators();

/// Computes a rule's outputs on `values` bound to `placeholders`; `expected`
/// are the reference kernel's results (for the output shapes).
using RuleRunner = std::function<std::vector<Tensor>(
    const ir::OpDef& op, std::span<const te::Tensor> outputs, std::span<const te::Tensor> placeholders,
    std::span<const Tensor> values, std::span<const Tensor> expected)>;

/// The op's compute rule on `call`, with dims made dynamic at random, run by
/// `runner` and compared with the op's reference kernel within the tolerance
/// policy (a few ulps elementwise; Σ|x|·n·ε for reductions and products;
/// `in_dtype`: plus a few ulps of the inputs' magnitude elementwise, for code
/// that rounds every step of a composite op to the dtype, as the JIT does).
void check_rule(const ir::OpDef& op, const Call& call, Rng& rng, const RuleRunner& runner,
                bool in_dtype = false);

}  // namespace nimble::testing
