// The LLVM IR emitter of kernel IR, shared by the CPU's kernels and the
// GPU's (kernel_emitter.hpp is its interface; private to lib/codegen/llvm):
// FunctionEmitter emits one function of a kernel — its prologue or one of
// its stages — and the helpers here are what its parts share. Its members
// are defined in the file of what they emit:
//
//   emit_kernel.cpp       a function's entry, its bucket assumptions and
//                         error exits; the prologue; which schedule a stage
//                         takes and the range its threads split; emit_cpu_kernel
//   emit_loops.cpp        loop nests, innermost loops made branch-free
//                         (versions), vector loops
//   emit_expr.cpp         expressions: arithmetic, loads and stores, index
//                         checks, casts, reductions
//   emit_dot_product.cpp  dot-product stages as register tiles
//   emit_packed_gemm.cpp  outer-product stages as register tiles, and the
//                         packed GEMM (b in panels) of both products
//   emit_gpu.cpp          a GPU stage's threads together: shared-memory
//                         product tiles, vector groups, warp and block
//                         reductions, barriers
#pragma once

#include <fmt/format.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "codegen/dot_product.hpp"
#include "codegen/llvm/kernel_emitter.hpp"
#include "codegen/llvm/math.hpp"
#include "support/check.hpp"

namespace nimble::codegen::detail {

using te::BinaryOp;
using te::Expr;
using te::ExprKind;
using te::UnaryOp;

// How a dtype lives in registers: f16 and bf16 compute in f32, bool in i1.
inline llvm::Type* compute_type(llvm::LLVMContext& c, DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return llvm::Type::getFloatTy(c);
    case DType::f64: return llvm::Type::getDoubleTy(c);
    case DType::i8: return llvm::Type::getInt8Ty(c);
    case DType::i32: return llvm::Type::getInt32Ty(c);
    case DType::i64: return llvm::Type::getInt64Ty(c);
    case DType::boolean: return llvm::Type::getInt1Ty(c);
  }
  return nullptr;
}

// How a dtype lives in memory: bf16 as its 16 bits, bool as a byte.
inline llvm::Type* memory_type(llvm::LLVMContext& c, DType dtype) {
  switch (dtype) {
    case DType::f16: return llvm::Type::getHalfTy(c);
    case DType::bf16: return llvm::Type::getInt16Ty(c);
    case DType::boolean: return llvm::Type::getInt8Ty(c);
    default: return compute_type(c, dtype);
  }
}

// Whether evaluating `e` may fault or fail when its select arm is not taken:
// such an arm is computed under a branch, never speculated.
bool has_side_conditions(const Expr& e);

// Whether `e` has an op that may fail at run time (a checked binary).
bool has_checked_op(const Expr& e);

// A checked load's dim: its index is tested against the extent.
struct CheckedIndex {
  const te::LoadNode* load;
  std::size_t dim;
  bool operator==(const CheckedIndex&) const = default;
};
struct CheckedIndexHash {
  std::size_t operator()(const CheckedIndex& c) const noexcept {
    return std::hash<const void*>()(c.load) ^ (c.dim * 0x9e3779b97f4a7c15ULL);
  }
};

// Lazy selects (an arm with loads or checks, computed under a branch) whose
// arm a loop's version has fixed: true for the first arm.
using DecidedSelects = std::unordered_map<const te::SelectNode*, bool>;

// Shared by the functions of one kernel: the module, the error table, and
// one alias scope per buffer (buffers never overlap, so loads of inputs may
// move across stores to outputs and loops vectorize without runtime checks).
struct ModuleState {
  const KernelIR& kernel;
  llvm::Module& module;
  std::vector<ErrorSite>& errors;
  std::vector<llvm::MDNode*> scope;    // per buffer: its scope list
  std::vector<llvm::MDNode*> noalias;  // per buffer: every other buffer's scopes
};

// A dot-product tile: rows × cols sums, each a vector of `lanes` floats.
struct DotTile {
  unsigned lanes = 8;
  int rows = 4;
  int cols = 3;
};

// Rows of an outer-product tile: 6 × 2 vectors of sums, two of b and one
// of a broadcast fit 16 vector registers.
constexpr int kOuterRows = 6;
// Vectors of columns of a single row's outer-product tile.
constexpr int kSingleRowVectors = 4;

// Whether an outer-product stage has fewer rows than a tile in every call
// (a kernel specialized for [1, k] x [k, n]): its rows go one at a time.
bool has_few_rows(const KernelIR& kernel, const OuterProductStage& op);

// A panel of an outer-product stage's b: steps [k_begin, k_begin + k_size)
// of k, each `step` contiguous columns.
struct Panel {
  llvm::Value* data;
  llvm::Value* k_begin;
  llvm::Value* k_size;
  std::int64_t step;  ///< floats a step of k spans (the panel's columns)
  /// Where the panel's tile prefetches the next block's b from, a line
  /// every 16 steps of k (packed_gemm); none if null.
  llvm::Value* ahead = nullptr;
};

// About how many instructions `e` emits, counted up to `limit` (emit_loops.cpp).
int emitted_size(const Expr& e, int limit);
// Whether `e` computes lane by lane in a vector loop over `var` (emit_loops.cpp).
bool lane_wise(const Expr& e, const te::VarNode* var, const Expr& extent);
// The stage's loop when it is a flat element-wise stage a vector loop
// should compute, else null (emit_loops.cpp).
const Stmt* vector_loop_stage(const Stage& stage, int min_size);

class FunctionEmitter {
 public:
  // `prologue`: the function that checks the bindings' buckets (a stage
  // assumes them).
  FunctionEmitter(ModuleState& state, llvm::Function* fn, bool prologue);
  llvm::IRBuilder<>& builder() { return b_; }

  // Reductions as explicit vectors of `lanes` floats (vector_reduce), and
  // innermost loops along rows of bodies of at least `min_size` as vector
  // loops (is_vector_row).
  void vectorize_rows(unsigned lanes, int min_size) {
    row_lanes_ = lanes;
    row_min_size_ = min_size;
  }
  llvm::Value* arg(unsigned i) { return fn_->getArg(i); }

  // A GPU stage's threads: run by `gpu` (null: by the host, one after
  // another), its reductions split across `lanes` lanes of a warp
  // (lane_reduce; 1: none).
  void run_threads(const GpuOps* gpu, unsigned lanes) {
    gpu_ = gpu;
    lanes_ = lanes;
  }

  // for (iv = begin; iv < end; ++iv) body(iv)
  template <class Body>
  void loop(llvm::Value* begin, llvm::Value* end, Body&& body) {
    stepped_loop(begin, end, b_.getInt64(1), false, std::forward<Body>(body));
  }

  // What emit_prologue and emit_stage call (each defined in the file of
  // what it emits, as the private members below are).
  llvm::Value* outside(llvm::Value* value, const DimBucket& bucket);
  void assume(llvm::Value* value, const DimBucket& bucket);
  llvm::Value* dim_of(int buffer, int d);
  void fail_if(llvm::Value* failed, ErrorSite site, std::span<llvm::Value* const> info);
  void stmt(const Stmt& s, llvm::Value* begin = nullptr, llvm::Value* end = nullptr);
  void dot_product_stage(const DotProductStage& dot, const DotTile& tile, llvm::Value* begin, llvm::Value* end);
  void gpu_product_tiles(const TiledProduct& dot, llvm::Value* begin, llvm::Value* end);
  void gpu_element_groups(const Stmt& elements, unsigned group, llvm::Value* begin, llvm::Value* end);
  void outer_product_stage(const OuterProductStage& op, unsigned lanes, bool split_columns, llvm::Value* begin,
                           llvm::Value* end);
  void vector_loop(const Stmt& loop, unsigned lanes, llvm::Value* begin, llvm::Value* end);
  llvm::Value* expr(const Expr& e);

  std::string stage_name;  // for element errors

 private:
  // The largest value a dim's bucket allows (the prologue checked it).
  std::unordered_map<const llvm::Value*, std::int64_t> max_of_;

  // `v`'s value where it is a constant (a static dim, or a specialized
  // kernel's exact one).
  static std::optional<std::int64_t> constant(const llvm::Value* v) {
    if (const auto* c = llvm::dyn_cast<llvm::ConstantInt>(v)) return c->getSExtValue();
    return std::nullopt;
  }

  // Checked indices tested once before an innermost loop (innermost_loop).
  std::unordered_set<CheckedIndex, CheckedIndexHash> checked_outside_;

  // Selects whose arm the loop version being emitted fixed (innermost_loop).
  DecidedSelects decided_;

  // Reductions whose value a tile has computed (dot_tile), for their epilogue.
  std::unordered_map<const te::ReduceNode*, llvm::Value*> sums_;

  llvm::Value* call(llvm::Intrinsic::ID id, std::initializer_list<llvm::Value*> args) {
    return b_.CreateIntrinsic(id, {(*args.begin())->getType()}, args);
  }

  // The type a value of scalar type `t` has here: a vector of t in a vector loop.
  llvm::Type* value_type(llvm::Type* t) const {
    return vector_lanes_ != 0 ? llvm::FixedVectorType::get(t, vector_lanes_) : t;
  }

  int buffer_of(const te::Tensor& t) const { return s_.kernel.buffer_of.at(t.get()); }

  // The lanes of a GPU warp.
  static constexpr unsigned kWarp = 32;

  // if (cond) then() else otherwise(), in blocks named from `name`.
  template <class Then, class Otherwise>
  void if_else(llvm::Value* cond, const char* name, Then&& then, Otherwise&& otherwise) {
    llvm::BasicBlock* yes = llvm::BasicBlock::Create(c_, name, fn_);
    llvm::BasicBlock* no = llvm::BasicBlock::Create(c_, std::string(name) + ".else", fn_);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(c_, std::string(name) + ".done", fn_);
    b_.CreateCondBr(cond, yes, no);
    b_.SetInsertPoint(yes);
    then();
    b_.CreateBr(done);
    b_.SetInsertPoint(no);
    otherwise();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // for (iv = begin; iv < end; iv += step) body(iv), or with `whole`, only
  // while a whole step fits (iv + step <= end). Returns the iv it stopped at.
  template <class Body>
  llvm::Value* stepped_loop(llvm::Value* begin, llvm::Value* end, llvm::Value* step, bool whole, Body&& body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* header = llvm::BasicBlock::Create(c_, "loop", fn_);
    llvm::BasicBlock* inside = llvm::BasicBlock::Create(c_, "body", fn_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(c_, "exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(i64_, 2);
    iv->addIncoming(begin, pre);
    llvm::Value* more = whole ? b_.CreateICmpSLE(b_.CreateAdd(iv, step, "", true, true), end) : b_.CreateICmpSLT(iv, end);
    b_.CreateCondBr(more, inside, exit);
    b_.SetInsertPoint(inside);
    body(iv);
    iv->addIncoming(b_.CreateAdd(iv, step, "", true, true), b_.GetInsertBlock());
    b_.CreateBr(header);
    b_.SetInsertPoint(exit);
    return iv;
  }

  // The loops `outer` (outermost first) around inner(begin, end): [begin,
  // end) bounds the first of them, or with none is passed on to inner.
  template <class Inner>
  void around(std::span<const Stmt* const> outer, llvm::Value* begin, llvm::Value* end, Inner&& inner) {
    if (outer.empty()) {
      inner(begin, end);
      return;
    }
    const Stmt& l = *outer.front();
    loop(begin ? begin : b_.getInt64(0), end ? end : expr(l.extent), [&](llvm::Value* iv) {
      vars_[l.var.node()] = iv;
      around(outer.subspan(1), nullptr, nullptr, inner);
    });
    vars_.erase(l.var.node());
  }

  // A range of k a dot-product tile sums over: [begin, begin + size), and
  // whether it is the first (the output starts from the sum's init, else
  // from what the chunks before left there).
  struct KChunk {
    llvm::Value* begin;
    llvm::Value* size;
    llvm::Value* first;  // i1
    llvm::Value* last;   // i1: the sums are complete (an epilogue applies)
    bool whole_vectors;  // size is known to be a multiple of the lanes: no masked tail
    // Columns from a tile's to the same tile of the next column block,
    // whose rows of b the tile prefetches (dot_tile).
    llvm::Value* next_block;
  };

  // Whether a tile of mr rows from i reads b's rows in aligned vectors:
  // every tile where b's rows cross cache lines in turn (W2's leaves, [n,
  // 300] x [450, 300]^T, 7% faster so), and one of fewer rows than a whole
  // tile (a matrix-vector product, with no row loop, and a few-row one: a
  // Tree-LSTM level) wherever its rows start, as its loads of b are most
  // of what it does.
  bool reads_b_aligned(llvm::Value* i, int mr) const { return i == nullptr || mr < tile_.rows || column_step_ > 1; }

  // Rows and vectors of columns of a packed tile (choose_packed_tile).
  int packed_rows() const { return packed_.rows; }
  int packed_vectors() const { return packed_.vectors; }

  // A tile's rows of its row operand `a` (f32, along `row` and `k`), read
  // one element a row at each step of k: each row from a base worked out
  // before the k loop (the first row's element at its first step, each
  // next row's a stride on: a row's index less the row before's, a
  // constant where the dims after the row's are static), at the step's
  // offset. A constant stride makes the rows' addresses displacements from
  // the first's; a stride in a register, eight bases, an index each. Two
  // other forms cost: each row's address from its own index at each step
  // (instruction selection hoisted all eight broadcasts of a step above
  // its FMAs and an 8 × 3 tile's sums spilled: SGEMM 1008 at 126 GFLOP/s),
  // and each row's address at each step from the row before's by the
  // stride (seven LEAs a step sharing the FMAs' ports: [200, 768] x [3072,
  // 768]^T 6.07-6.23 ms, 5.72-5.92 with displacements; SGEMM 1008
  // 140-153 GFLOP/s, 141-156 with bases).
  struct RowWalk {
    const te::LoadNode* a = nullptr;
    std::vector<llvm::Value*> bases;  // each row's element at k_begin
    llvm::Value* k_begin = nullptr;
    llvm::Value* k_stride = nullptr;  // a's index's step along k

    // The rows' elements at step k (its index in a), in order.
    std::vector<llvm::Value*> step(FunctionEmitter& e, llvm::Value* at_k) const {
      const int buffer = e.buffer_of(a->tensor);
      llvm::Value* offset = e.b_.CreateMul(e.b_.CreateSub(at_k, k_begin), k_stride);
      std::vector<llvm::Value*> elements;
      for (llvm::Value* base : bases) {
        llvm::LoadInst* x = e.b_.CreateLoad(e.b_.getFloatTy(), e.b_.CreateGEP(e.b_.getFloatTy(), base, offset));
        e.annotate(x, buffer);
        elements.push_back(x);
      }
      return elements;
    }
  };

  llvm::Value* plus(llvm::Value* v, std::int64_t n) { return n == 0 ? v : b_.CreateAdd(v, b_.getInt64(n), "", true, true); }

  // emit_loops.cpp
  void innermost_loop(const Stmt& s, llvm::Value* lo, llvm::Value* hi, int depth);
  bool is_vector_row(const Stmt& s);

  // emit_expr.cpp
  void check_index(const te::LoadNode& l, std::size_t d, llvm::Value* i);
  llvm::Align element_align(DType dtype);
  void annotate(llvm::Instruction* access, int buffer);
  llvm::Value* base(int buffer);
  llvm::Value* element_ptr(int buffer, llvm::Value* index);
  void store(int buffer, llvm::Value* index, llvm::Value* value);
  llvm::Value* to_memory(llvm::Value* v, DType dtype);
  llvm::Value* from_memory(llvm::Value* v, DType dtype);
  llvm::Value* to_bf16_bits(llvm::Value* f);
  llvm::Value* round_to(llvm::Value* f, DType dtype);
  llvm::Value* load(const te::LoadNode& l);
  llvm::Value* flat_index(const te::LoadNode& l);
  llvm::Value* unary(const te::UnaryNode& u);
  llvm::Value* binary(const te::BinaryNode& n);
  llvm::Value* divide(const te::BinaryNode& n, llvm::Value* a, llvm::Value* b);
  llvm::Value* int_pow(const te::BinaryNode& n, llvm::Value* base, llvm::Value* exponent);
  llvm::Value* select(const te::SelectNode& s);
  llvm::Value* cast(llvm::Value* v, DType from, DType to);
  llvm::AllocaInst* local(llvm::Type* type);
  llvm::Value* fold(te::ReduceKind kind, DType dtype, llvm::Value* a, llvm::Value* v, bool reassociate);
  llvm::Value* identity(te::ReduceKind kind, DType dtype);
  llvm::Value* reduce(const te::ReduceNode& r);
  llvm::Value* vector_reduce(const te::ReduceNode& r);
  llvm::Value* vector_load(int buffer, llvm::Value* p, llvm::Value* mask);
  llvm::Value* lanes_below(llvm::Value* count, unsigned lanes = 0);

  // emit_dot_product.cpp
  void dot_tiles(llvm::Value* begin, llvm::Value* end);
  void dot_columns(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin, llvm::Value* cols_end);
  void dot_tile_columns(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin, llvm::Value* cols_end);
  template <class Body>
  void each_block(llvm::Value* cols_begin, llvm::Value* cols_end, llvm::Value* block, Body&& body);
  llvm::Value* calls_so_far();
  void dot_row_tile(llvm::Value* i, int mr, llvm::Value* jc, llvm::Value* jend, const KChunk& kc, bool whole_cols,
                    llvm::Value* last_row = nullptr);
  template <class Store>
  void store_if_row(llvm::Value* i, int r, llvm::Value* last_row, const Store& store);
  void store_column_groups(llvm::Value* i, int mr, llvm::Value* j0, const std::vector<std::vector<llvm::Value*>>& sums,
                           const KChunk& kc, llvm::Value* last_row);
  int aligned_column_step();
  void dot_tile(llvm::Value* i, int mr, llvm::Value* j, int nr, const KChunk& kc, llvm::Value* last_row = nullptr,
                int col_step = 1, std::vector<llvm::Value*>* sums_out = nullptr);
  std::vector<llvm::Value*> next_block_rows(llvm::Value* i, int mr, llvm::Value* j, int nr, const KChunk& kc);
  void store_tile_row(llvm::Value* row_sums, llvm::Value* j, unsigned n, const KChunk& kc, llvm::Value* mask = nullptr);
  llvm::Value* stored_value(llvm::Value* sums, llvm::Value* at, const KChunk& kc);
  std::vector<llvm::Value*> lane_sums(std::vector<llvm::Value*> vectors);

  // emit_packed_gemm.cpp
  void dot_packed(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin, llvm::Value* cols_end);
  void pack_transposed(const Panel& panel, llvm::Value* j0, llvm::Value* left);
  std::vector<llvm::Value*> transpose(std::vector<llvm::Value*> rows);
  void dot_packed_tile(llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left, const Panel& panel,
                       const KChunk& kc);
  void outer_product_tiles(llvm::Value* begin, llvm::Value* end);
  void choose_packed_tile(llvm::Value* cols);
  void packed_panels(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin, llvm::Value* cols_end);
  template <class Pack, class Tile>
  void packed_gemm(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin, llvm::Value* cols_end,
                   llvm::Value* k, bool one_step_at_least, const DotProductStage* ahead, Pack&& pack, Tile&& tile);
  std::vector<llvm::AllocaInst*> zeroed_sums(int n);
  void add_outer_products(const std::vector<llvm::AllocaInst*>& sums, const std::vector<llvm::Value*>& av,
                          const std::vector<llvm::Value*>& bv);
  RowWalk row_walk(const te::LoadNode& a, const te::VarNode* row, const te::VarNode* k, llvm::Value* i0,
                   llvm::Value* k_begin, int rows);
  llvm::Value* constant_stride(const te::LoadNode& a, const te::VarNode* var);
  Panel panel_in(llvm::Value* block, llvm::Value* jc, llvm::Value* j0, llvm::Value* pc, llvm::Value* k_size);
  template <class Each>
  void each_panel(llvm::Value* jc, llvm::Value* jc_end, std::int64_t nr, Each&& each);
  template <class Body>
  void by_vectors(llvm::Value* left, int nv, Body&& body);
  std::vector<llvm::Value*> vector_masks(llvm::Value* left, int nv);
  llvm::Value* panel_at(const Panel& panel, llvm::Value* kk, std::int64_t v);
  void outer_product_columns(llvm::Value* i0, int mr, llvm::Value* from, llvm::Value* n);
  void outer_product_tile(llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left,
                          const Panel* panel = nullptr);
  void outer_product_sums(llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left, llvm::Value* k_begin,
                          llvm::Value* k_size, const Panel* panel);

  // emit_gpu.cpp
  template <class Body>
  void each_thread(Body&& body);
  void block_barrier();
  llvm::Value* shared_array(llvm::Type* type, unsigned count, const char* name);
  llvm::Value* lane_reduce(const te::ReduceNode& r);
  llvm::Value* exchange(llvm::Value* v, unsigned mask);

  ModuleState& s_;
  llvm::LLVMContext& c_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_;
  llvm::Type* i64_ = nullptr;
  llvm::PointerType* ptr_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  llvm::Value* data_ = nullptr;
  llvm::Value* dims_ = nullptr;
  llvm::Value* info_ = nullptr;
  std::vector<llvm::Value*> base_;
  std::unordered_map<const te::VarNode*, llvm::Value*> vars_;
  const DotProductStage* dot_ = nullptr;  // while emitting a dot-product stage
  int column_step_ = 1;                   // its aligned_column_step()
  const OuterProductStage* op_ = nullptr;  // while emitting an outer-product stage
  bool split_columns_ = false;             // its threads' ranges are of columns (splits_columns)
  DotTile tile_;
  struct PackedTile {
    int rows = 8;
    int vectors = 3;
  };
  PackedTile packed_;
  llvm::FixedVectorType* vector_ = nullptr;

  // How far a dot tile's prefetch of the next block lags its steps of k
  // (next_block_rows): one line every 2^ahead_shift_ steps.
  llvm::Value* ahead_shift_ = nullptr;

  // Lanes of a float vector along a row (vectorize_rows): a reduction's
  // (vector_reduce) and an innermost loop's with a body of at least
  // row_min_size_ (is_vector_row); 0: both are scalar loops for LLVM's
  // vectorizer.
  unsigned row_lanes_ = 0;
  int row_min_size_ = 0;

  // The stage's threads and the lanes its reductions split across (run_threads).
  unsigned lanes_ = 1;
  const GpuOps* gpu_ = nullptr;

  // While emitting a vector loop's body: its lanes (0 otherwise), its iv
  // (the first element of the vector) and the mask of its lanes in range.
  unsigned vector_lanes_ = 0;
  const te::VarNode* vector_var_ = nullptr;
  llvm::Value* vector_iv_ = nullptr;
  llvm::Value* vector_mask_ = nullptr;

  // While store_tile_row stores a partial row of sums: the mask of its lanes.
  llvm::Value* tile_mask_ = nullptr;

  // While gpu_element_groups emits a group's vectors: their bytes, the
  // alignment of a load at the group's first element (0 otherwise).
  unsigned vector_align_ = 0;
};

}  // namespace nimble::codegen::detail
