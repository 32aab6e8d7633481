// The kernel IR: a small loop-nest form, in the spirit of TVM's TIR, between
// compute rules (ops/compute.hpp) and a code generator (LLVM for the CPU now,
// NVPTX later). A KernelIR is one primitive function lowered to
//
//   buffers   its inputs, outputs and temporaries, each a te placeholder with
//             a symbolic shape (row-major, contiguous);
//   bindings  which input dim gives each shape Var its value;
//   checks    conditions that must hold before any element is computed (the
//             input dims the types fix, the output dims the VM allocated, the
//             rules' Checks);
//   stages    one loop nest per materialized stage, producers first: loops
//             with symbolic extents around a store of one element.
//
// Expressions are te::Exprs: arithmetic, selects, casts, loads of buffers
// (te::LoadNode of a buffer's placeholder, multi-dimensional) and reductions
// (a te::ReduceNode as a stored value, which the code generator lowers to an
// accumulator loop). Injective stages are inlined into their consumers before
// this point, so a load always reads a buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nimble/error.hpp"
#include "nimble/runtime/bucket.hpp"
#include "ops/compute.hpp"

namespace nimble::codegen {

/// A buffer of the kernel: inputs and outputs come from the caller in that
/// order (so buffer index = argument index), temporaries after them are
/// allocated by the kernel's caller from sizes the prologue computes.
struct Buffer {
  enum class Role : std::uint8_t { input, output, temp };
  te::Tensor tensor;  ///< a placeholder: name, dtype and symbolic shape
  Role role = Role::input;
};

enum class ForKind : std::uint8_t {
  serial,
  /// The outermost loop of a stage: its range may be split across threads
  /// (the caller decides from the stage's work).
  parallel,
  /// The innermost loop: contiguous, a hint to vectorize.
  vectorized,
};

class Stmt;
using StmtRef = std::shared_ptr<const Stmt>;

/// A statement: a loop or a store (kernels need no more yet).
class Stmt {
 public:
  enum class Kind : std::uint8_t { loop, store };
  Kind kind = Kind::store;
  // loop: for var in [0, extent): body
  te::Var var{"_"};
  te::Expr extent;
  ForKind for_kind = ForKind::serial;
  StmtRef body;
  // store: buffer[flat index] = value (rounded to the buffer's dtype)
  int buffer = -1;
  te::Expr index;  ///< i64, row-major flat
  te::Expr value;
};

[[nodiscard]] StmtRef make_loop(te::Var var, te::Expr extent, ForKind kind, StmtRef body);
[[nodiscard]] StmtRef make_store(int buffer, te::Expr index, te::Expr value);

/// A condition checked before any element is computed, and what its failure says.
struct KernelCheck {
  te::Expr condition;
  ErrorKind kind = ErrorKind::invalid_argument;
  std::string message;
};

/// One loop nest: computes all of buffer `output` (a kernel output or temp).
struct Stage {
  std::string name;  ///< the te stage's, for messages
  int output = -1;
  StmtRef body;      ///< a loop nest whose outermost loop is ForKind::parallel
  /// Estimated element operations (elements × reduction extent), i64 over the
  /// shape Vars: whether splitting across threads pays.
  te::Expr work;
  /// Threads that compute each iteration of the range together: 1, a GPU
  /// warp's lanes for a stage whose elements are reductions split across
  /// them, or a block's threads for a tile of a product
  /// (codegen/cuda/gpu_schedule.hpp).
  unsigned lanes = 1;
  /// A dot product computed in shared-memory tiles on a GPU (GpuProductTile
  /// in codegen/llvm/kernel_emitter.hpp): its range is `tiles`, not its outer
  /// loop.
  bool product_tiles = false;
  /// The tiles of a stage of product tiles: the outer loops' iterations ×
  /// the row tiles × the column tiles (undefined otherwise).
  te::Expr tiles;
  /// Elements an iteration of a flat element-wise GPU stage: each thread
  /// reads and writes them as vectors where they are all in range and
  /// aligned (codegen/cuda/gpu_schedule.hpp); its range is its loop's
  /// extent in groups of them. 1: an element an iteration.
  unsigned vector_elements = 1;
};

struct KernelIR {
  std::string name;
  std::vector<Buffer> buffers;
  int num_inputs = 0;
  int num_outputs = 0;
  /// Buffer index of every te::Tensor a load may name (a buffer's own
  /// placeholder and the flat 1-d views of it that flattening makes).
  std::unordered_map<const te::TensorNode*, int> buffer_of;
  /// Shape Vars in binding order: `var` is dim `dim` of input `buffer`.
  struct Binding {
    te::Expr var;  ///< a te::VarNode
    int buffer = -1;
    int dim = -1;
    /// What a kernel specialized for a bucket assumes of the Var (the
    /// prologue checks it first): an exact value becomes a constant, a
    /// multiple and a range become assumptions the optimizer may use.
    /// Default: nothing (the generic kernel).
    DimBucket bucket;
  };
  std::vector<Binding> bindings;
  /// Input dims that are not the binding occurrence of a Var (a constant, or
  /// a Var bound by an earlier dim) must equal their expression.
  struct DimCheck {
    int buffer = -1;
    int dim = -1;
    te::Expr expected;
  };
  std::vector<DimCheck> input_dims;
  /// Output dims the caller allocated must equal their shape expressions.
  std::vector<DimCheck> output_dims;
  std::vector<KernelCheck> checks;  ///< the rules' Checks, in stage order
  std::vector<Stage> stages;        ///< producers first
};

/// Whether reduction `r`, in the element of a stage of several lanes
/// (Stage::lanes > 1), is split across them (its axes flattened): a sum,
/// max or min over at least one axis (not argmax, whose first index a
/// butterfly of partials would not keep), with no reduction inside its
/// source. The code generators split exactly these; a stage gets lanes only
/// where every reduction of its element is one.
[[nodiscard]] bool splits_across_lanes(const te::ReduceNode& r);

/// Lowers the compute rule whose placeholders are `inputs` and whose results
/// are `outputs` (as an op's ComputeRule gives them) to a kernel: every
/// compute stage the outputs need either inlined into its consumers
/// (injective ones) or materialized (reductions, and stages read through a
/// checked load); a stage whose loads all read their whole buffers at its own
/// index is flattened to one loop. Throws Error(not_supported) for what it
/// cannot lower (an output that is an input, a check that reads a temporary).
[[nodiscard]] KernelIR lower_to_kernel_ir(std::string name, std::span<const te::Tensor> inputs,
                                          std::span<const te::Tensor> outputs);

/// Specializes `kernel` for `bucket`, whose dims are its bindings' Vars in
/// order (a generic kernel's dynamic dims). Throws Error(invalid_argument)
/// if the bucket has another number of dims.
void specialize(KernelIR& kernel, const Bucket& bucket);

/// The kernel as text, for tests and debugging:
///   kernel add_0(in a: f32[n], in b: f32[n], out out: f32[n])
///     bind n = a.dim0
///     check b.dim0 == n
///     stage out: parallel for i in [0, n): out[i] = (a[i] + b[i])
[[nodiscard]] std::string to_string(const KernelIR& kernel);

/// `expr` with every Var in `map` replaced (loads, reductions and selects rebuilt).
[[nodiscard]] te::Expr substitute(const te::Expr& expr,
                                  const std::unordered_map<const te::VarNode*, te::Expr>& map);

}  // namespace nimble::codegen
