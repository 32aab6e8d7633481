#include "codegen/cpu/kernel_emitter.hpp"

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
#include "codegen/math.hpp"
#include "support/check.hpp"

namespace nimble::codegen {

namespace {

using te::BinaryOp;
using te::Expr;
using te::ExprKind;
using te::UnaryOp;

// How a dtype lives in registers: f16 and bf16 compute in f32, bool in i1.
llvm::Type* compute_type(llvm::LLVMContext& c, DType dtype) {
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
llvm::Type* memory_type(llvm::LLVMContext& c, DType dtype) {
  switch (dtype) {
    case DType::f16: return llvm::Type::getHalfTy(c);
    case DType::bf16: return llvm::Type::getInt16Ty(c);
    case DType::boolean: return llvm::Type::getInt8Ty(c);
    default: return compute_type(c, dtype);
  }
}

// Whether evaluating `e` may fault or fail when its select arm is not taken:
// such an arm is computed under a branch, never speculated.
bool has_side_conditions(const Expr& e) {
  // Any load, not only a checked one: an unchecked load's index is in range
  // only where its arm is taken.
  if (e.kind() == ExprKind::load || e.kind() == ExprKind::reduce) return true;
  if (const auto* b = e.as<te::BinaryNode>(); b && b->checked) return true;
  bool found = false;
  te::for_each_child(e, [&](const Expr& child) { found = found || has_side_conditions(child); });
  return found;
}

// Whether `e` has an op that may fail at run time (a checked binary).
bool has_checked_op(const Expr& e) {
  if (const auto* b = e.as<te::BinaryNode>(); b && b->checked) return true;
  bool found = false;
  te::for_each_child(e, [&](const Expr& child) { found = found || has_checked_op(child); });
  return found;
}

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

bool is_lazy(const te::SelectNode& s) { return has_side_conditions(s.a) || has_side_conditions(s.b); }

// Calls `fn` on each subexpression of `e` that every evaluation of `e`
// computes: not inside a lazy select's arm (unless `decided` fixed it: then
// inside that arm) nor inside a reduction (which has loops of its own).
template <class Fn>
void for_each_always_evaluated(const Expr& e, const DecidedSelects& decided, Fn&& fn) {
  if (e.kind() == ExprKind::reduce) return;
  fn(e);
  if (const auto* s = e.as<te::SelectNode>(); s && is_lazy(*s)) {
    for_each_always_evaluated(s->cond, decided, fn);
    if (const auto it = decided.find(s); it != decided.end())
      for_each_always_evaluated(it->second ? s->a : s->b, decided, fn);
    return;
  }
  te::for_each_child(e, [&](const Expr& child) { for_each_always_evaluated(child, decided, fn); });
}

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

// Sized so that the sums and one vector of each row fit the registers: 16
// vector registers below AVX-512 (4 × 3 sums, one vector of a and three of
// b: no spills; on W3 at L = 64, 4 × 3 ran in 185 ms, 2 × 4 in 194, 4 × 4 in
// 250, 3 × 4 in 301), 32 with it.
DotTile dot_tile(unsigned vector_bits) {
  if (vector_bits >= 512) return {16, 4, 4};
  return {std::max(4u, vector_bits / 32), 4, 3};
}

// Rows of an outer-product tile: 6 × 2 vectors of sums, two of b and one
// of a broadcast fit 16 vector registers.
constexpr int kOuterRows = 6;
// Vectors of columns of a single row's outer-product tile.
constexpr int kSingleRowVectors = 4;
// Rows up to which an outer-product stage with many columns splits them
// across threads (splits_columns): up to SGEMM 1024's 512 rows a thread.
constexpr std::int64_t kSplitColumnsMaxRows = 516;

// The value `extent` has in every call of the kernel: a constant, or a Var
// the kernel's bucket makes exact (a specialized kernel's).
std::optional<std::int64_t> fixed_value(const KernelIR& kernel, const te::Expr& extent) {
  if (const std::optional<std::int64_t> c = te::as_int(extent)) return c;
  for (const KernelIR::Binding& b : kernel.bindings)
    if (b.var.same_as(extent) && b.bucket.exact >= 0) return b.bucket.exact;
  return std::nullopt;
}

// The least value `extent` has in any call of the kernel: a constant, or
// the least of its Var's bucket (a specialized kernel's).
std::int64_t least_value(const KernelIR& kernel, const te::Expr& extent) {
  if (const std::optional<std::int64_t> c = te::as_int(extent)) return *c;
  for (const KernelIR::Binding& b : kernel.bindings)
    if (b.var.same_as(extent)) return b.bucket.exact >= 0 ? b.bucket.exact : b.bucket.min;
  return 0;
}

// Whether an outer-product stage has fewer rows than a tile in every call
// (a kernel specialized for [1, k] x [k, n]): its rows go one at a time.
bool has_few_rows(const KernelIR& kernel, const OuterProductStage& op) {
  const std::optional<std::int64_t> rows = fixed_value(kernel, op.rows->extent);
  return rows && *rows < kOuterRows;
}

// Columns from which an outer-product stage splits its columns across
// threads, not its rows: 8 ranges of whole single-row tiles at AVX-512's 16
// lanes (two threads' shares then differ by at most one in eight).
constexpr std::int64_t kSplitColumnsFrom = 512;

// The greatest value `extent` has in any call of the kernel.
std::int64_t greatest_value(const KernelIR& kernel, const te::Expr& extent) {
  if (const std::optional<std::int64_t> c = te::as_int(extent)) return *c;
  for (const KernelIR::Binding& b : kernel.bindings)
    if (b.var.same_as(extent)) return b.bucket.exact >= 0 ? b.bucket.exact : b.bucket.max;
  return std::numeric_limits<std::int64_t>::max();
}

// Whether an outer-product stage's threads split its columns: no loop
// outside its rows, and either fewer rows than a tile's (split by rows, it
// would run on one thread), or at most kSplitColumnsMaxRows rows and at
// least kSplitColumnsFrom columns in every call. Split by rows, every
// thread packs all of b into its panels for its few rows (the GEMM [128,
// 768] x [768, 768] on two threads: each packed 2.3 MB for 64 rows; 0.80
// -> 0.75 ms); by columns, each packs its share of b and reads all of a,
// which is the smaller.
bool splits_columns(const KernelIR& kernel, const OuterProductStage& op) {
  if (!op.outer.empty() || op.rows == nullptr) return false;
  return has_few_rows(kernel, op) || (greatest_value(kernel, op.rows->extent) <= kSplitColumnsMaxRows &&
                                      least_value(kernel, op.cols->extent) >= kSplitColumnsFrom);
}

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

int emitted_size(const Expr& e, int limit);
bool lane_wise(const Expr& e, const te::VarNode* var, const Expr& extent);

class FunctionEmitter {
 public:
  // `prologue`: the function that checks the bindings' buckets (a stage
  // assumes them).
  FunctionEmitter(ModuleState& state, llvm::Function* fn, bool prologue)
      : s_(state), c_(fn->getContext()), b_(c_), fn_(fn) {
    i64_ = llvm::Type::getInt64Ty(c_);
    ptr_ = llvm::PointerType::getUnqual(c_);
    entry_ = llvm::BasicBlock::Create(c_, "entry", fn);
    b_.SetInsertPoint(entry_);
    auto arg = fn->arg_begin();
    data_ = &*arg++;
    dims_ = &*arg++;
    info_ = &*arg++;
    base_.assign(s_.kernel.buffers.size(), nullptr);
    for (const KernelIR::Binding& binding : s_.kernel.bindings) {
      const DimBucket& bucket = binding.bucket;
      llvm::Value* value = bucket.exact >= 0 ? b_.getInt64(bucket.exact) : dim_of(binding.buffer, binding.dim);
      if (!prologue && bucket.exact < 0) {
        assume(value, bucket);
        if (bucket.max < std::numeric_limits<std::int64_t>::max()) max_of_[value] = bucket.max;
      }
      vars_[binding.var.as<te::VarNode>()] = value;
    }
  }

  // Whether `value` lies outside `bucket` (i1).
  llvm::Value* outside(llvm::Value* value, const DimBucket& bucket) {
    if (bucket.exact >= 0) return b_.CreateICmpNE(value, b_.getInt64(bucket.exact));
    llvm::Value* out = b_.CreateOr(b_.CreateICmpSLT(value, b_.getInt64(bucket.min)),
                                   b_.CreateICmpSGT(value, b_.getInt64(bucket.max)));
    if (bucket.multiple > 1)
      out = b_.CreateOr(out, b_.CreateICmpNE(b_.CreateAnd(value, b_.getInt64(bucket.multiple - 1)),
                                             b_.getInt64(0)));
    return out;
  }

  // Tells the optimizer what the bucket says of `value` (the prologue checked
  // it): a multiple of the vector width drops vector tails, a range bounds
  // trip counts.
  void assume(llvm::Value* value, const DimBucket& bucket) {
    if (bucket.multiple > 1)
      b_.CreateAssumption(b_.CreateICmpEQ(b_.CreateAnd(value, b_.getInt64(bucket.multiple - 1)), b_.getInt64(0)));
    if (bucket.min > 0) b_.CreateAssumption(b_.CreateICmpSGE(value, b_.getInt64(bucket.min)));
    if (bucket.max < std::numeric_limits<std::int64_t>::max())
      b_.CreateAssumption(b_.CreateICmpSLE(value, b_.getInt64(bucket.max)));
  }

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

  llvm::Value* dim_of(int buffer, int d) {
    llvm::Value* dims = b_.CreateLoad(ptr_, b_.CreateConstInBoundsGEP1_64(ptr_, dims_, static_cast<std::uint64_t>(buffer)));
    return b_.CreateLoad(i64_, b_.CreateConstInBoundsGEP1_64(i64_, dims, static_cast<std::uint64_t>(d)));
  }

  // Leaves the function with the code of `site` (and `info`) when `failed`.
  void fail_if(llvm::Value* failed, ErrorSite site, std::span<llvm::Value* const> info) {
    s_.errors.push_back(std::move(site));
    const auto code = static_cast<std::int32_t>(s_.errors.size());
    llvm::BasicBlock* error = llvm::BasicBlock::Create(c_, "error", fn_);
    llvm::BasicBlock* ok = llvm::BasicBlock::Create(c_, "ok", fn_);
    b_.CreateCondBr(failed, error, ok, llvm::MDBuilder(c_).createBranchWeights(1, 1 << 20));
    b_.SetInsertPoint(error);
    for (std::size_t k = 0; k < info.size(); ++k)
      b_.CreateStore(b_.CreateSExtOrTrunc(info[k], i64_), b_.CreateConstInBoundsGEP1_64(i64_, info_, k));
    b_.CreateRet(b_.getInt32(code));
    b_.SetInsertPoint(ok);
  }

  // for (iv = begin; iv < end; ++iv) body(iv)
  template <class Body>
  void loop(llvm::Value* begin, llvm::Value* end, Body&& body) {
    stepped_loop(begin, end, b_.getInt64(1), false, std::forward<Body>(body));
  }

  void stmt(const Stmt& s, llvm::Value* begin = nullptr, llvm::Value* end = nullptr) {
    if (s.kind == Stmt::Kind::store) {
      llvm::Value* index = expr(s.index);
      llvm::Value* value = expr(s.value);
      if (lanes_ > 1 && gpu_ != nullptr)  // every lane has the value: the first stores it
        if_else(b_.CreateICmpEQ(lanes_ > kWarp ? gpu_->thread(b_) : gpu_->lane(b_), b_.getInt64(0)), "lane0",
                [&] { store(s.buffer, index, value); }, [] {});
      else
        store(s.buffer, index, value);
      return;
    }
    llvm::Value* lo = begin ? begin : b_.getInt64(0);
    llvm::Value* hi = end ? end : expr(s.extent);
    const te::VarNode* var = s.var.node();
    if (s.body->kind != Stmt::Kind::store) {
      loop(lo, hi, [&](llvm::Value* iv) {
        vars_[var] = iv;
        stmt(*s.body);
      });
      vars_.erase(var);
      return;
    }
    llvm::BasicBlock* versions = llvm::BasicBlock::Create(c_, "versions", fn_);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(c_, "done", fn_);
    b_.CreateCondBr(b_.CreateICmpSLT(lo, hi), versions, done);
    b_.SetInsertPoint(versions);
    innermost_loop(s, lo, hi, 0);
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // An innermost loop (its body one store), made a branch-free body LLVM
  // can vectorize where its branches do not depend on the loop variable:
  //  - a lazy select whose condition does not read it (a concatenation
  //    along an outer axis: the row decides the input) becomes two
  //    versions of the loop, one per arm, chosen before it; one on
  //    `var < bound` (a concatenation along this axis) splits the loop's
  //    range at the bound, each part with its arm (at most
  //    kMaxLoopVersionDepth nested: 8 versions or parts);
  //  - index checks that do not read it (a gathered row: x[idx[i], j]! in
  //    a loop over j) are made once before it.
  // The caller has branched on the loop running at all: what runs before
  // it here, the body would have run in its first iteration.
  static constexpr int kMaxLoopVersionDepth = 3;
  void innermost_loop(const Stmt& s, llvm::Value* lo, llvm::Value* hi, int depth) {
    const te::VarNode* var = s.var.node();
    const te::SelectNode* fork = nullptr;
    const te::SelectNode* cut = nullptr;  // select(var < bound, ...)
    std::vector<CheckedIndex> checks;
    for (const Expr* root : {&s.body->index, &s.body->value})
      for_each_always_evaluated(*root, decided_, [&](const Expr& e) {
        const auto* sel = e.as<te::SelectNode>();
        if (sel && is_lazy(*sel) && !decided_.contains(sel)) {
          const auto* lt = sel->cond.as<te::BinaryNode>();
          if (!fork && !depends_on(sel->cond, var)) fork = sel;
          if (!cut && lt && lt->op == te::BinaryOp::lt && lt->a.get() == var && !depends_on(lt->b, var)) cut = sel;
        }
        if (const auto* l = e.as<te::LoadNode>(); l && l->checked)
          for (std::size_t d = 0; d < l->indices.size(); ++d)
            if (!depends_on(l->indices[d], var)) checks.push_back({l, d});
      });
    // The loop over [begin, end) with `sel` decided as `arm`, where `when` holds.
    const auto with_arm = [&](const te::SelectNode* sel, bool arm, llvm::Value* when, llvm::Value* begin,
                              llvm::Value* end) {
      llvm::BasicBlock* part = llvm::BasicBlock::Create(c_, arm ? "arm.a" : "arm.b", fn_);
      llvm::BasicBlock* after = llvm::BasicBlock::Create(c_, "arm.end", fn_);
      b_.CreateCondBr(when, part, after);
      b_.SetInsertPoint(part);
      decided_[sel] = arm;
      innermost_loop(s, begin, end, depth + 1);
      decided_.erase(sel);
      b_.CreateBr(after);
      b_.SetInsertPoint(after);
    };
    if (fork && depth < kMaxLoopVersionDepth) {
      llvm::Value* cond = expr(fork->cond);
      with_arm(fork, true, cond, lo, hi);
      with_arm(fork, false, b_.CreateNot(cond), lo, hi);
      return;
    }
    if (cut && depth < kMaxLoopVersionDepth) {
      llvm::Value* bound = expr(cut->cond.as<te::BinaryNode>()->b);
      bound = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, lo, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, bound, hi));
      with_arm(cut, true, b_.CreateICmpSLT(lo, bound), lo, bound);
      with_arm(cut, false, b_.CreateICmpSLT(bound, hi), bound, hi);
      return;
    }
    if (checks.empty() && is_vector_row(s)) {
      vector_loop(s, row_lanes_, lo, hi);
      return;
    }
    for (const CheckedIndex& c : checks) check_index(*c.load, c.dim, expr(c.load->indices[c.dim]));
    checked_outside_.insert(checks.begin(), checks.end());
    loop(lo, hi, [&](llvm::Value* iv) {
      vars_[var] = iv;
      stmt(*s.body);
    });
    vars_.erase(var);
    for (const CheckedIndex& c : checks) checked_outside_.erase(c);
  }

  // Whether the innermost loop `s` (its body a store) is a row for a vector
  // loop (with vector loops on), as a flat stage is (vector_loop_stage): its
  // store's elements consecutive along its var, its value lane by lane
  // along it (lane_wise_along), nothing in it that fails or is picked
  // lazily (a lazy select's arms would both be computed), and a body of at
  // least row_min_size_. LLVM's vectorizer took 8 lanes and left a row's
  // last elements to a scalar loop (softmax's quotients over rows of 200:
  // 8, an exp each).
  bool is_vector_row(const Stmt& s) {
    const te::VarNode* var = s.var.node();
    const Stmt& store = *s.body;
    if (row_lanes_ == 0 || vector_lanes_ != 0 || !contiguous_index(store.index, var) ||
        !lane_wise_along(store.value, var, nullptr) || has_checked_op(store.value))
      return false;
    bool lazy = false;
    for_each_always_evaluated(store.value, decided_, [&](const Expr& e) {
      const auto* sel = e.as<te::SelectNode>();
      lazy = lazy || (sel && is_lazy(*sel) && !decided_.contains(sel));
    });
    return !lazy && emitted_size(store.value, row_min_size_) >= row_min_size_;
  }

  // Fails unless index `i` of checked load `l`'s dim `d` lies in its extent.
  void check_index(const te::LoadNode& l, std::size_t d, llvm::Value* i) {
    llvm::Value* extent = expr(l.tensor.shape()[d]);
    llvm::Value* bad = b_.CreateOr(b_.CreateICmpSLT(i, b_.getInt64(0)), b_.CreateICmpSGE(i, extent));
    llvm::Value* info[] = {i, extent};
    fail_if(bad, {.form = ErrorSite::Form::index, .kind = ErrorKind::runtime_error, .text = l.tensor.name(),
                  .stage = stage_name, .buffer = buffer_of(l.tensor), .dim = static_cast<int>(d)},
            info);
  }

  // A dot-product stage (dot_product.hpp) as tiles of `tile.rows` × `tile.cols`
  // sums held in vector registers across k: each step loads one vector of
  // k from each row of a and of b in the tile and multiply-adds every pair;
  // the last partial vector of k is read with masked loads (no element past
  // a row is touched). Columns go in blocks of about kColumnBlockFloats / K,
  // so that the rows of b a block reads stay in L2 while every row tile of
  // the range passes over them. Sums are folded in vector lanes
  // (lane_sums), so an element's rounding differs from the scalar loop's
  // (within the tolerance of any reordered sum).
  void dot_product_stage(const DotProductStage& dot, const DotTile& tile, llvm::Value* begin, llvm::Value* end) {
    dot_ = &dot;
    tile_ = tile;
    vector_ = llvm::FixedVectorType::get(b_.getFloatTy(), tile.lanes);
    column_step_ = aligned_column_step();
    around(dot.outer, begin, end, [&](llvm::Value* b, llvm::Value* e) { dot_tiles(b, e); });
    for (const Stmt* loop : dot.unit) vars_.erase(loop->var.node());
    dot_ = nullptr;
  }

  // A product stage in a GPU's shared-memory tiles (Stage::product_tiles,
  // GpuProductTile); [begin, end) is of tiles, row-major over the outer
  // loops, the row tiles and the column tiles. In each tile every thread
  // zeroes its sums; then for each kDepth steps of k the block stages the
  // tile's rows of a and of b in shared memory, step-major (thread t takes
  // elements t, t + kThreads, …, neighbouring threads neighbouring elements
  // in memory: steps of a row of a, and of b in a dot product; columns of
  // b's row of a step in an outer product), waits, and every thread
  // multiply-adds its sums over those steps, and waits again; last, each
  // thread stores its elements that are in range: a dot product's through
  // the epilogue, an outer product's added to what the stage before stored.
  // A row, column or step out of range is staged as 0 from a clamped
  // element, so every load is in its buffer and no sum changes.
  void gpu_product_tiles(const TiledProduct& dot, llvm::Value* begin, llvm::Value* end) {
    using Tile = GpuProductTile;
    constexpr int kRowsEach = Tile::kRows / Tile::kSide;
    constexpr int kColsEach = Tile::kCols / Tile::kSide;
    constexpr int kSums = kRowsEach * kColsEach;
    llvm::Type* f32 = b_.getFloatTy();
    llvm::Value* rows = dot.rows ? expr(dot.rows->extent) : b_.getInt64(1);
    llvm::Value* cols = expr(dot.cols->extent);
    llvm::Value* depth = expr(*dot.k_extent);
    const te::VarNode* k_var = dot.k_var;
    const auto ceil_div = [&](llvm::Value* n, int d) {
      return b_.CreateUDiv(b_.CreateAdd(n, b_.getInt64(d - 1)), b_.getInt64(d));
    };
    llvm::Value* row_tiles = ceil_div(rows, Tile::kRows);
    llvm::Value* col_tiles = ceil_div(cols, Tile::kCols);
    std::vector<llvm::Value*> outer_extents;
    for (const Stmt* loop : dot.outer) outer_extents.push_back(expr(loop->extent));
    for (const Stmt* loop : dot.unit) vars_[loop->var.node()] = b_.getInt64(0);
    // A step's rows of a, then of b, one more than the tile apart: the 16
    // threads that stage 16 steps of one row store to 16 banks, not one.
    constexpr int kAStride = Tile::kRows + 1;
    constexpr int kBStride = Tile::kCols + 1;
    llvm::Value* a_tile = shared_array(f32, Tile::kDepth * kAStride, "a_tile");
    llvm::Value* b_tile = shared_array(f32, Tile::kDepth * kBStride, "b_tile");
    // The threads' sums: registers on a GPU, an array of every thread's on the host.
    llvm::Value* all_sums = local(llvm::ArrayType::get(f32, gpu_ ? kSums : kSums * Tile::kThreads));
    const auto sums_of = [&](llvm::Value* t) {
      return gpu_ ? all_sums : b_.CreateInBoundsGEP(f32, all_sums, b_.CreateMul(t, b_.getInt64(kSums)));
    };
    const auto sum_at = [&](llvm::Value* sums, int s) { return b_.CreateConstInBoundsGEP1_64(f32, sums, s); };
    const auto at = [&](llvm::Value* array, llvm::Value* index) { return b_.CreateInBoundsGEP(f32, array, index); };
    // Element (index, k) of `operand` (index along loop `var`, below
    // `extent`; k below depth) into `to`: 0 where either is out of range.
    const auto stage_element = [&](const te::LoadNode& operand, const Stmt* var, llvm::Value* index,
                                   llvm::Value* extent, llvm::Value* k, llvm::Value* to) {
      llvm::Value* inside = b_.CreateAnd(b_.CreateICmpULT(index, extent), b_.CreateICmpULT(k, depth));
      if (var)
        vars_[var->var.node()] =
            b_.CreateSelect(b_.CreateICmpULT(index, extent), index, b_.CreateSub(extent, b_.getInt64(1)));
      vars_[k_var] = b_.CreateSelect(b_.CreateICmpULT(k, depth), k, b_.CreateSub(depth, b_.getInt64(1)));
      b_.CreateStore(b_.CreateSelect(inside, load(operand), llvm::ConstantFP::get(f32, 0.0)), to);
    };
    loop(begin, end, [&](llvm::Value* tile) {
      llvm::Value* col_tile = b_.CreateURem(tile, col_tiles);
      llvm::Value* rest = b_.CreateUDiv(tile, col_tiles);
      llvm::Value* row_tile = b_.CreateURem(rest, row_tiles);
      rest = b_.CreateUDiv(rest, row_tiles);
      for (std::size_t d = dot.outer.size(); d-- > 0;) {
        vars_[dot.outer[d]->var.node()] = d == 0 ? rest : b_.CreateURem(rest, outer_extents[d]);
        if (d > 0) rest = b_.CreateUDiv(rest, outer_extents[d]);
      }
      llvm::Value* i0 = b_.CreateMul(row_tile, b_.getInt64(Tile::kRows));
      llvm::Value* j0 = b_.CreateMul(col_tile, b_.getInt64(Tile::kCols));
      each_thread([&](llvm::Value* t) {
        llvm::Value* sums = sums_of(t);
        for (int s = 0; s < kSums; ++s) b_.CreateStore(llvm::ConstantFP::get(f32, 0.0), sum_at(sums, s));
      });
      stepped_loop(b_.getInt64(0), depth, b_.getInt64(Tile::kDepth), false, [&](llvm::Value* k0) {
        each_thread([&](llvm::Value* t) {
          for (int q = 0; q < Tile::kRows * Tile::kDepth / Tile::kThreads; ++q) {
            llvm::Value* e = b_.CreateAdd(t, b_.getInt64(q * Tile::kThreads));
            llvm::Value* step = b_.CreateURem(e, b_.getInt64(Tile::kDepth));
            llvm::Value* row = b_.CreateUDiv(e, b_.getInt64(Tile::kDepth));
            llvm::Value* k = b_.CreateAdd(k0, step);
            stage_element(*dot.a, dot.rows, b_.CreateAdd(i0, row), rows, k,
                          at(a_tile, b_.CreateAdd(b_.CreateMul(step, b_.getInt64(kAStride)), row)));
          }
          for (int q = 0; q < Tile::kCols * Tile::kDepth / Tile::kThreads; ++q) {
            llvm::Value* e = b_.CreateAdd(t, b_.getInt64(q * Tile::kThreads));
            const int fast = dot.b_along_cols ? Tile::kCols : Tile::kDepth;
            llvm::Value* step = b_.CreateURem(e, b_.getInt64(fast));
            llvm::Value* col = b_.CreateUDiv(e, b_.getInt64(fast));
            if (dot.b_along_cols) std::swap(step, col);
            llvm::Value* k = b_.CreateAdd(k0, step);
            stage_element(*dot.b, dot.cols, b_.CreateAdd(j0, col), cols, k,
                          at(b_tile, b_.CreateAdd(b_.CreateMul(step, b_.getInt64(kBStride)), col)));
          }
        });
        block_barrier();
        each_thread([&](llvm::Value* t) {
          llvm::Value* y = b_.CreateUDiv(t, b_.getInt64(Tile::kSide));
          llvm::Value* x = b_.CreateURem(t, b_.getInt64(Tile::kSide));
          llvm::Value* sums = sums_of(t);
          // Steps past depth were staged as 0: adding them changes no sum.
          for (int step = 0; step < Tile::kDepth; ++step) {
            std::vector<llvm::Value*> av;
            std::vector<llvm::Value*> bv;
            const auto read = [&](llvm::Value* shared, llvm::Value* from, int offset) {
              return b_.CreateLoad(f32, at(shared, b_.CreateAdd(from, b_.getInt64(offset))));
            };
            for (int r = 0; r < kRowsEach; ++r) av.push_back(read(a_tile, y, step * kAStride + r * Tile::kSide));
            for (int c = 0; c < kColsEach; ++c) bv.push_back(read(b_tile, x, step * kBStride + c * Tile::kSide));
            for (int r = 0; r < kRowsEach; ++r)
              for (int c = 0; c < kColsEach; ++c) {
                llvm::Value* p = sum_at(sums, r * kColsEach + c);
                b_.CreateStore(call(llvm::Intrinsic::fmuladd, {av[r], bv[c], b_.CreateLoad(f32, p)}), p);
              }
          }
        });
        block_barrier();
      });
      each_thread([&](llvm::Value* t) {
        llvm::Value* y = b_.CreateUDiv(t, b_.getInt64(Tile::kSide));
        llvm::Value* x = b_.CreateURem(t, b_.getInt64(Tile::kSide));
        llvm::Value* sums = sums_of(t);
        for (int r = 0; r < kRowsEach; ++r)
          for (int c = 0; c < kColsEach; ++c) {
            llvm::Value* i = b_.CreateAdd(i0, b_.CreateAdd(y, b_.getInt64(r * Tile::kSide)));
            llvm::Value* j = b_.CreateAdd(j0, b_.CreateAdd(x, b_.getInt64(c * Tile::kSide)));
            if_else(b_.CreateAnd(b_.CreateICmpULT(i, rows), b_.CreateICmpULT(j, cols)), "tile.element", [&] {
              if (dot.rows) vars_[dot.rows->var.node()] = i;
              vars_[dot.cols->var.node()] = j;
              llvm::Value* index = expr(dot.store->index);
              llvm::Value* sum = b_.CreateLoad(f32, sum_at(sums, r * kColsEach + c));
              if (dot.sum == nullptr) {  // an outer product adds to the element
                llvm::LoadInst* so_far = b_.CreateLoad(f32, element_ptr(dot.store->buffer, index));
                annotate(so_far, dot.store->buffer);
                store(dot.store->buffer, index, b_.CreateFAdd(so_far, sum));
                return;
              }
              sums_[dot.sum] = b_.CreateFAdd(expr(dot.sum->init), sum);
              llvm::Value* value = expr(dot.store->value);
              sums_.erase(dot.sum);
              store(dot.store->buffer, index, value);
            }, [] {});
          }
      });
    });
    for (const Stmt* loop : dot.outer) vars_.erase(loop->var.node());
    for (const Stmt* loop : dot.unit) vars_.erase(loop->var.node());
    if (dot.rows) vars_.erase(dot.rows->var.node());
    vars_.erase(dot.cols->var.node());
    vars_.erase(k_var);
  }

  // body(thread) for each thread of the block: on a GPU, this one; on the
  // host, every one in turn (each step between two barriers a loop).
  template <class Body>
  void each_thread(Body&& body) {
    if (gpu_) {
      body(gpu_->thread(b_));
      return;
    }
    loop(b_.getInt64(0), b_.getInt64(GpuProductTile::kThreads), std::forward<Body>(body));
  }

  // A flat element-wise GPU stage in groups of `group` elements
  // (Stage::vector_elements): [begin, end) is of groups. A group whose
  // elements are all in range, of buffers aligned to a vector of them (the
  // output and every input read at the element), is one vector load an
  // input and one vector store (ld.global.v4: a quarter of the memory
  // instructions); any other — the last, or one of misaligned views — and
  // every group of a body that is not lane by lane (lane_wise), element by
  // element.
  void gpu_element_groups(const Stmt& elements, unsigned group, llvm::Value* begin, llvm::Value* end) {
    const Stmt& store = *elements.body;
    const te::VarNode* var = elements.var.node();
    const DType dtype = s_.kernel.buffers[static_cast<std::size_t>(store.buffer)].tensor.dtype();
    const unsigned bytes = group * static_cast<unsigned>(dtype_size(dtype));
    llvm::Value* n = expr(elements.extent);
    const bool lane_by_lane = lane_wise(store.value, var, elements.extent);
    // Whether the output and every buffer read at the element start at a
    // multiple of a vector's bytes.
    llvm::Value* misaligned = b_.CreatePtrToInt(base(store.buffer), i64_);
    const std::function<void(const Expr&)> read_at_element = [&](const Expr& e) {
      if (const auto* l = e.as<te::LoadNode>(); l && l->indices.size() == 1 && l->indices[0].as<te::VarNode>() == var)
        misaligned = b_.CreateOr(misaligned, b_.CreatePtrToInt(base(buffer_of(l->tensor)), i64_));
      te::for_each_child(e, read_at_element);
    };
    read_at_element(store.value);
    llvm::Value* aligned = b_.CreateICmpEQ(b_.CreateAnd(misaligned, b_.getInt64(bytes - 1)), b_.getInt64(0));
    const auto each_element = [&](llvm::Value* first, llvm::Value* last) {
      loop(first, last, [&](llvm::Value* e) {
        vars_[var] = e;
        llvm::Value* value = expr(store.value);
        this->store(store.buffer, e, value);
      });
      vars_.erase(var);
    };
    loop(begin, end, [&](llvm::Value* g) {
      llvm::Value* first = b_.CreateMul(g, b_.getInt64(group));
      llvm::Value* after = b_.CreateAdd(first, b_.getInt64(group));
      if (!lane_by_lane) {
        each_element(first, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, after, n));
        return;
      }
      if_else(b_.CreateAnd(aligned, b_.CreateICmpSLE(after, n)), "group.vector", [&] {
        vector_lanes_ = group;
        vector_var_ = var;
        vector_iv_ = first;
        vector_mask_ = llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b_.getInt1Ty(), group));
        vector_align_ = bytes;
        llvm::Value* memory = to_memory(expr(store.value), dtype);
        annotate(b_.CreateAlignedStore(memory, element_ptr(store.buffer, first), llvm::Align(bytes)), store.buffer);
        vector_lanes_ = 0;
        vector_var_ = nullptr;
        vector_iv_ = vector_mask_ = nullptr;
        vector_align_ = 0;
      }, [&] { each_element(first, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, after, n)); });
    });
  }

  // A barrier of the block's threads (the host's loops already are one).
  void block_barrier() {
    if (gpu_) gpu_->barrier(b_);
  }

  // `count` elements of `type` the block's threads share: shared memory on
  // a GPU, the stack on the host.
  llvm::Value* shared_array(llvm::Type* type, unsigned count, const char* name) {
    if (gpu_) return gpu_->shared_array(b_, type, count, name);
    return local(llvm::ArrayType::get(type, count));
  }

  // An outer-product stage (dot_product.hpp) as tiles of kOuterRows rows ×
  // two vectors of columns (a single row: four vectors, then two; then one
  // masked vector at a time for the rest), their sums in registers across
  // k, added to the output (which the stage before set to init). Each
  // element still sums over k in order.
  void outer_product_stage(const OuterProductStage& op, unsigned lanes, bool split_columns, llvm::Value* begin,
                           llvm::Value* end) {
    op_ = &op;
    split_columns_ = split_columns;
    tile_.lanes = lanes;
    vector_ = llvm::FixedVectorType::get(b_.getFloatTy(), lanes);
    around(op.outer, begin, end, [&](llvm::Value* b, llvm::Value* e) { outer_product_tiles(b, e); });
    for (const Stmt* u : op.unit) vars_.erase(u->var.node());
    op_ = nullptr;
  }

  // A flat element-wise stage (vector_loop_stage) as one loop of whole
  // vectors of `lanes` elements over [begin, end), whose last partial vector
  // runs the same body once more with only its lanes below the end in the
  // mask (masked loads read nothing past a buffer, masked stores write
  // nothing past it): one copy of the body, no scalar remainder.
  //
  //   first:  mask = lanes below min(end - begin, lanes)
  //   body:   iv, mask = phi; out[iv..] = value(in[iv..]) under mask
  //   latch:  next = iv + lanes; rest = end - next
  //           rest >= lanes: body with all lanes; rest > 0: body with the
  //           lanes below rest; else done
  //
  // The loop may be the innermost of a nest (is_vector_row): its store
  // then goes to the element of its row (the index at var = 0) plus iv.
  void vector_loop(const Stmt& loop, unsigned lanes, llvm::Value* begin, llvm::Value* end) {
    const Stmt& store = *loop.body;
    llvm::Value* row = b_.getInt64(0);
    if (store.index.get() != loop.var.get()) {
      vars_[loop.var.node()] = b_.getInt64(0);
      row = expr(store.index);
      vars_.erase(loop.var.node());
    }
    llvm::Value* step = b_.getInt64(lanes);
    llvm::Type* mask_type = llvm::FixedVectorType::get(b_.getInt1Ty(), lanes);
    llvm::Value* all = llvm::Constant::getAllOnesValue(mask_type);
    llvm::BasicBlock* first = llvm::BasicBlock::Create(c_, "vector.first", fn_);
    llvm::BasicBlock* body = llvm::BasicBlock::Create(c_, "vector.body", fn_);
    llvm::BasicBlock* more = llvm::BasicBlock::Create(c_, "vector.more", fn_);
    llvm::BasicBlock* tail = llvm::BasicBlock::Create(c_, "vector.tail", fn_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(c_, "vector.exit", fn_);
    b_.CreateCondBr(b_.CreateICmpSLT(begin, end), first, exit);
    b_.SetInsertPoint(first);
    llvm::Value* first_count =
        b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(end, begin), step);
    llvm::Value* first_mask = lanes_below(first_count, lanes);
    b_.CreateBr(body);
    b_.SetInsertPoint(body);
    llvm::PHINode* iv = b_.CreatePHI(i64_, 3);
    llvm::PHINode* mask = b_.CreatePHI(mask_type, 3);
    iv->addIncoming(begin, first);
    mask->addIncoming(first_mask, first);
    vector_lanes_ = lanes;
    vector_var_ = loop.var.node();
    vector_iv_ = iv;
    vector_mask_ = mask;
    llvm::Value* value = expr(store.value);
    const DType dtype = s_.kernel.buffers[static_cast<std::size_t>(store.buffer)].tensor.dtype();
    llvm::Value* memory = to_memory(value, dtype);
    annotate(b_.CreateMaskedStore(memory, element_ptr(store.buffer, b_.CreateAdd(row, iv, "", true, true)),
                                  element_align(dtype), mask),
             store.buffer);
    vector_lanes_ = 0;
    vector_var_ = nullptr;
    vector_iv_ = vector_mask_ = nullptr;
    llvm::Value* next = b_.CreateAdd(iv, step, "", true, true);
    llvm::Value* rest = b_.CreateSub(end, next);
    llvm::BasicBlock* latch = b_.GetInsertBlock();
    llvm::BranchInst* back = b_.CreateCondBr(b_.CreateICmpSGE(rest, step), body, more);
    // Nothing for LLVM's vectorizer to do here.
    llvm::MDNode* done = llvm::MDNode::get(
        c_, {llvm::MDString::get(c_, "llvm.loop.isvectorized"), llvm::ConstantAsMetadata::get(b_.getInt32(1))});
    llvm::MDNode* id = llvm::MDNode::getDistinct(c_, {nullptr, done});
    id->replaceOperandWith(0, id);
    back->setMetadata(llvm::LLVMContext::MD_loop, id);
    iv->addIncoming(next, latch);
    mask->addIncoming(all, latch);
    b_.SetInsertPoint(more);
    b_.CreateCondBr(b_.CreateICmpSGT(rest, b_.getInt64(0)), tail, exit);
    b_.SetInsertPoint(tail);
    llvm::Value* tail_mask = lanes_below(rest, lanes);
    b_.CreateBr(body);
    iv->addIncoming(next, tail);
    mask->addIncoming(tail_mask, tail);
    b_.SetInsertPoint(exit);
  }

  llvm::Value* expr(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::int_imm: {
        llvm::Type* t = value_type(compute_type(c_, e.dtype()));
        return llvm::ConstantInt::get(t, static_cast<std::uint64_t>(e.as<te::IntImmNode>()->value), true);
      }
      case ExprKind::float_imm:
        return llvm::ConstantFP::get(value_type(compute_type(c_, e.dtype())), e.as<te::FloatImmNode>()->value);
      case ExprKind::var: {
        const auto it = vars_.find(e.as<te::VarNode>());
        NIMBLE_ASSERT(it != vars_.end(), "kernel emitter: a Var with no value");
        // In a vector loop a Var (a dim) is the same in every lane.
        return vector_lanes_ != 0 ? b_.CreateVectorSplat(vector_lanes_, it->second) : it->second;
      }
      case ExprKind::unary:
        return unary(*e.as<te::UnaryNode>());
      case ExprKind::binary:
        return binary(*e.as<te::BinaryNode>());
      case ExprKind::select:
        return select(*e.as<te::SelectNode>());
      case ExprKind::cast: {
        const Expr& v = e.as<te::CastNode>()->value;
        return cast(expr(v), v.dtype(), e.dtype());
      }
      case ExprKind::load:
        return load(*e.as<te::LoadNode>());
      case ExprKind::reduce: {
        const auto* r = e.as<te::ReduceNode>();
        if (const auto it = sums_.find(r); it != sums_.end()) return it->second;
        return reduce(*r);
      }
    }
    return nullptr;
  }

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

  // The alignment of one element of `dtype` in memory.
  llvm::Align element_align(DType dtype) {
    return llvm::Align(std::max<std::uint64_t>(1, memory_type(c_, dtype)->getPrimitiveSizeInBits() / 8));
  }

  void annotate(llvm::Instruction* access, int buffer) {
    access->setMetadata(llvm::LLVMContext::MD_alias_scope, s_.scope[static_cast<std::size_t>(buffer)]);
    access->setMetadata(llvm::LLVMContext::MD_noalias, s_.noalias[static_cast<std::size_t>(buffer)]);
  }

  int buffer_of(const te::Tensor& t) const { return s_.kernel.buffer_of.at(t.get()); }

  // The data pointer of `buffer`, loaded at the function's entry on first
  // use: a function loads only those it reads or writes (the prologue none,
  // and it is compiled unoptimized: see emit_prologue).
  llvm::Value* base(int buffer) {
    llvm::Value*& p = base_[static_cast<std::size_t>(buffer)];
    if (p == nullptr) {
      llvm::IRBuilder<> at(entry_, entry_->getFirstInsertionPt());
      p = at.CreateLoad(ptr_, at.CreateConstInBoundsGEP1_64(ptr_, data_, static_cast<std::uint64_t>(buffer)),
                        fmt::format("{}.data", s_.kernel.buffers[static_cast<std::size_t>(buffer)].tensor.name()));
    }
    return p;
  }

  llvm::Value* element_ptr(int buffer, llvm::Value* index) {
    const DType dtype = s_.kernel.buffers[static_cast<std::size_t>(buffer)].tensor.dtype();
    return b_.CreateInBoundsGEP(memory_type(c_, dtype), base(buffer), index);
  }

  void store(int buffer, llvm::Value* index, llvm::Value* value) {
    const DType dtype = s_.kernel.buffers[static_cast<std::size_t>(buffer)].tensor.dtype();
    annotate(b_.CreateStore(to_memory(value, dtype), element_ptr(buffer, index)), buffer);
  }

  llvm::Value* to_memory(llvm::Value* v, DType dtype) {
    switch (dtype) {
      case DType::f16: return b_.CreateFPTrunc(v, value_type(llvm::Type::getHalfTy(c_)));
      case DType::bf16: return to_bf16_bits(v);
      case DType::boolean: return b_.CreateZExt(v, value_type(b_.getInt8Ty()));
      default: return v;
    }
  }

  llvm::Value* from_memory(llvm::Value* v, DType dtype) {
    switch (dtype) {
      case DType::f16: return b_.CreateFPExt(v, value_type(b_.getFloatTy()));
      case DType::bf16:
        return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, value_type(b_.getInt32Ty())), 16),
                                value_type(b_.getFloatTy()));
      case DType::boolean: return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
      default: return v;
    }
  }

  // f32 → bf16 bits, rounding to nearest even; NaN stays a (quiet) NaN.
  llvm::Value* to_bf16_bits(llvm::Value* f) {
    llvm::Type* i32 = value_type(b_.getInt32Ty());
    llvm::Value* bits = b_.CreateBitCast(f, i32);
    llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), 1);
    llvm::Value* rounded =
        b_.CreateLShr(b_.CreateAdd(bits, b_.CreateAdd(lsb, llvm::ConstantInt::get(i32, 0x7fff))), 16);
    llvm::Value* nan = b_.CreateOr(b_.CreateLShr(bits, 16), llvm::ConstantInt::get(i32, 0x40));
    llvm::Value* r = b_.CreateSelect(b_.CreateFCmpUNO(f, f), nan, rounded);
    return b_.CreateTrunc(r, value_type(b_.getInt16Ty()));
  }

  // A float computed for f16/bf16 rounded to the dtype (and back to f32).
  llvm::Value* round_to(llvm::Value* f, DType dtype) {
    if (dtype != DType::f16 && dtype != DType::bf16) return f;
    return from_memory(to_memory(f, dtype), dtype);
  }

  llvm::Value* load(const te::LoadNode& l) {
    const int buffer = buffer_of(l.tensor);
    const te::Tensor& t = s_.kernel.buffers[static_cast<std::size_t>(buffer)].tensor;
    if (vector_lanes_ != 0) {
      // A vector loop's load reads the lanes in the mask at its iv, or at
      // a constant offset from it (lane_wise checked that every lane of the
      // loop is in the buffer): the offset is the load's index at iv = 0.
      // A load that does not move with the lanes (a tile row's epilogue
      // reading along its rows: lane_wise_along) is one element for all.
      llvm::Value* at = vector_iv_;
      if (!(l.indices.size() == 1 && l.indices[0].get() == vector_var_)) {
        const unsigned lanes = std::exchange(vector_lanes_, 0);
        const bool along = std::any_of(l.indices.begin(), l.indices.end(),
                                       [&](const Expr& i) { return depends_on(i, vector_var_); });
        if (!along) {
          llvm::Value* x = load(l);
          vector_lanes_ = lanes;
          return b_.CreateVectorSplat(lanes, x);
        }
        const auto bound = vars_.find(vector_var_);
        llvm::Value* saved = bound != vars_.end() ? bound->second : nullptr;
        vars_[vector_var_] = b_.getInt64(0);
        at = b_.CreateAdd(vector_iv_, flat_index(l), "", true, true);
        if (saved) vars_[vector_var_] = saved;
        else vars_.erase(vector_var_);
        vector_lanes_ = lanes;
      }
      llvm::Type* type = value_type(memory_type(c_, t.dtype()));
      // A GPU group's vectors at its first element are aligned to their size.
      const llvm::Align align = vector_align_ > 0 && at == vector_iv_ ? llvm::Align(vector_align_)
                                                                       : element_align(t.dtype());
      llvm::Instruction* v =
          b_.CreateMaskedLoad(type, element_ptr(buffer, at), align, vector_mask_, llvm::Constant::getNullValue(type));
      annotate(v, buffer);
      return from_memory(v, t.dtype());
    }
    llvm::LoadInst* v = b_.CreateLoad(memory_type(c_, t.dtype()), element_ptr(buffer, flat_index(l)));
    annotate(v, buffer);
    return from_memory(v, t.dtype());
  }

  // The row-major element index a load reads (a checked load's indices
  // tested first).
  llvm::Value* flat_index(const te::LoadNode& l) {
    // Shapes come from the load's own tensor: a flat view has one dim.
    const std::vector<Expr>& shape = l.tensor.shape();
    llvm::Value* flat = nullptr;
    for (std::size_t d = 0; d < l.indices.size(); ++d) {
      llvm::Value* i = expr(l.indices[d]);
      llvm::Value* extent = expr(shape[d]);
      if (l.checked && !checked_outside_.contains({&l, d})) check_index(l, d, i);
      flat = flat ? b_.CreateAdd(b_.CreateMul(flat, extent), i) : i;
    }
    return flat ? flat : b_.getInt64(0);
  }

  llvm::Value* unary(const te::UnaryNode& u) {
    llvm::Value* x = expr(u.a);
    const DType dtype = u.a.dtype();
    if (!is_floating(dtype)) {
      switch (u.op) {
        case UnaryOp::neg: return b_.CreateNeg(x);
        case UnaryOp::abs: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse());
        case UnaryOp::logical_not: return b_.CreateNot(x);
        default: break;
      }
      NIMBLE_ASSERT(false, "a floating-point op on integers");
    }
    switch (u.op) {
      case UnaryOp::neg: return b_.CreateFNeg(x);
      case UnaryOp::abs: return call(llvm::Intrinsic::fabs, {x});
      case UnaryOp::exp: return emit_exp(b_, x);
      case UnaryOp::log: return emit_log(b_, x);
      case UnaryOp::sqrt: return call(llvm::Intrinsic::sqrt, {x});
      case UnaryOp::rsqrt: return emit_rsqrt(b_, x);
      case UnaryOp::tanh: return emit_tanh(b_, x);
      case UnaryOp::sigmoid: return emit_sigmoid(b_, x);
      case UnaryOp::erf: return emit_erf(b_, x);
      case UnaryOp::floor: return call(llvm::Intrinsic::floor, {x});
      case UnaryOp::ceil: return call(llvm::Intrinsic::ceil, {x});
      case UnaryOp::logical_not: break;
    }
    NIMBLE_ASSERT(false, "logical_not of a float");
    return nullptr;
  }

  llvm::Value* binary(const te::BinaryNode& n) {
    const DType dtype = n.a.dtype();
    llvm::Value* a = expr(n.a);
    llvm::Value* b = expr(n.b);
    if (is_floating(dtype)) {
      switch (n.op) {
        case BinaryOp::add: return b_.CreateFAdd(a, b);
        case BinaryOp::sub: return b_.CreateFSub(a, b);
        case BinaryOp::mul: return b_.CreateFMul(a, b);
        case BinaryOp::div: return b_.CreateFDiv(a, b);
        case BinaryOp::rem: return emit_fmod(b_, a, b);
        case BinaryOp::maximum: return call(llvm::Intrinsic::maximum, {a, b});
        case BinaryOp::minimum: return call(llvm::Intrinsic::minimum, {a, b});
        case BinaryOp::pow: return emit_pow(b_, a, b);
        case BinaryOp::eq: return b_.CreateFCmpOEQ(a, b);
        case BinaryOp::ne: return b_.CreateFCmpUNE(a, b);
        case BinaryOp::lt: return b_.CreateFCmpOLT(a, b);
        case BinaryOp::le: return b_.CreateFCmpOLE(a, b);
        case BinaryOp::gt: return b_.CreateFCmpOGT(a, b);
        case BinaryOp::ge: return b_.CreateFCmpOGE(a, b);
        default: break;
      }
      NIMBLE_ASSERT(false, "an integer op on floats");
    }
    const bool is_bool = dtype == DType::boolean;
    switch (n.op) {
      case BinaryOp::add: return b_.CreateAdd(a, b);
      case BinaryOp::sub: return b_.CreateSub(a, b);
      case BinaryOp::mul: return b_.CreateMul(a, b);
      case BinaryOp::div:
      case BinaryOp::floordiv:
      case BinaryOp::rem:
      case BinaryOp::floormod: return divide(n, a, b);
      case BinaryOp::maximum:
        return b_.CreateBinaryIntrinsic(is_bool ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, a, b);
      case BinaryOp::minimum:
        return b_.CreateBinaryIntrinsic(is_bool ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, a, b);
      case BinaryOp::pow: return int_pow(n, a, b);
      case BinaryOp::eq: return b_.CreateICmpEQ(a, b);
      case BinaryOp::ne: return b_.CreateICmpNE(a, b);
      case BinaryOp::lt: return is_bool ? b_.CreateICmpULT(a, b) : b_.CreateICmpSLT(a, b);
      case BinaryOp::le: return is_bool ? b_.CreateICmpULE(a, b) : b_.CreateICmpSLE(a, b);
      case BinaryOp::gt: return is_bool ? b_.CreateICmpUGT(a, b) : b_.CreateICmpSGT(a, b);
      case BinaryOp::ge: return is_bool ? b_.CreateICmpUGE(a, b) : b_.CreateICmpSGE(a, b);
      case BinaryOp::logical_and: return b_.CreateAnd(a, b);
      case BinaryOp::logical_or: return b_.CreateOr(a, b);
    }
    return nullptr;
  }

  // Integer division and remainder that never trap: a zero divisor or
  // INT_MIN / -1 divides by 1 instead (a checked op fails first).
  llvm::Value* divide(const te::BinaryNode& n, llvm::Value* a, llvm::Value* b) {
    auto* type = llvm::cast<llvm::IntegerType>(a->getType());
    llvm::Value* zero = b_.CreateICmpEQ(b, llvm::ConstantInt::get(type, 0));
    llvm::Value* overflow = b_.CreateAnd(
        b_.CreateICmpEQ(a, llvm::ConstantInt::get(type, llvm::APInt::getSignedMinValue(type->getBitWidth()))),
        b_.CreateICmpEQ(b, llvm::ConstantInt::getSigned(type, -1)));
    const bool quotient = n.op == BinaryOp::div || n.op == BinaryOp::floordiv;
    if (n.checked) {
      fail_if(zero, {.text = fmt::format("{}: integer division by zero", stage_name)}, {});
      if (quotient) fail_if(overflow, {.text = fmt::format("{}: integer overflow: INT_MIN / -1", stage_name)}, {});
    }
    llvm::Value* safe = b_.CreateSelect(b_.CreateOr(zero, overflow), llvm::ConstantInt::get(type, 1), b);
    llvm::Value* q = b_.CreateSDiv(a, safe);
    llvm::Value* r = b_.CreateSRem(a, safe);
    // floor variants: adjust when the remainder's sign differs from the divisor's.
    llvm::Value* adjust = b_.CreateAnd(b_.CreateICmpNE(r, llvm::ConstantInt::get(type, 0)),
                                       b_.CreateICmpSLT(b_.CreateXor(r, safe), llvm::ConstantInt::get(type, 0)));
    switch (n.op) {
      case BinaryOp::div:
        // INT_MIN / -1 wraps to INT_MIN, which is a / 1.
        return q;
      case BinaryOp::floordiv: return b_.CreateSub(q, b_.CreateZExt(adjust, type));
      case BinaryOp::rem: return r;
      default: return b_.CreateAdd(r, b_.CreateSelect(adjust, safe, llvm::ConstantInt::get(type, 0)));
    }
  }

  // base^exponent by squaring, wrapping; a checked negative exponent fails.
  llvm::Value* int_pow(const te::BinaryNode& n, llvm::Value* base, llvm::Value* exponent) {
    llvm::Type* type = base->getType();
    if (n.checked)
      fail_if(b_.CreateICmpSLT(exponent, llvm::ConstantInt::get(type, 0)),
              {.text = fmt::format("{}: negative exponent in integer power", stage_name)}, {});
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* header = llvm::BasicBlock::Create(c_, "pow", fn_);
    llvm::BasicBlock* step = llvm::BasicBlock::Create(c_, "pow.step", fn_);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(c_, "pow.done", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* result = b_.CreatePHI(type, 2);
    llvm::PHINode* x = b_.CreatePHI(type, 2);
    llvm::PHINode* e = b_.CreatePHI(type, 2);
    result->addIncoming(llvm::ConstantInt::get(type, 1), pre);
    x->addIncoming(base, pre);
    e->addIncoming(exponent, pre);
    b_.CreateCondBr(b_.CreateICmpEQ(e, llvm::ConstantInt::get(type, 0)), done, step);
    b_.SetInsertPoint(step);
    llvm::Value* odd = b_.CreateTrunc(e, b_.getInt1Ty());
    result->addIncoming(b_.CreateSelect(odd, b_.CreateMul(result, x), result), step);
    x->addIncoming(b_.CreateMul(x, x), step);
    e->addIncoming(b_.CreateLShr(e, 1), step);
    b_.CreateBr(header);
    b_.SetInsertPoint(done);
    return result;
  }

  llvm::Value* select(const te::SelectNode& s) {
    if (const auto it = decided_.find(&s); it != decided_.end()) return expr(it->second ? s.a : s.b);
    llvm::Value* cond = expr(s.cond);
    // In a vector loop both arms are safe: its loads are masked and in
    // range, and nothing in it fails (lane_wise).
    if (vector_lanes_ != 0 || (!has_side_conditions(s.a) && !has_side_conditions(s.b)))
      return b_.CreateSelect(cond, expr(s.a), expr(s.b));
    // Lazy, as C's ?: — an arm may only be safe when it is picked.
    llvm::BasicBlock* then_block = llvm::BasicBlock::Create(c_, "then", fn_);
    llvm::BasicBlock* else_block = llvm::BasicBlock::Create(c_, "else", fn_);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(c_, "join", fn_);
    b_.CreateCondBr(cond, then_block, else_block);
    b_.SetInsertPoint(then_block);
    llvm::Value* a = expr(s.a);
    llvm::BasicBlock* a_end = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(else_block);
    llvm::Value* b = expr(s.b);
    llvm::BasicBlock* b_end = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(a->getType(), 2);
    phi->addIncoming(a, a_end);
    phi->addIncoming(b, b_end);
    return phi;
  }

  // As the cast op converts (compute.hpp's CastNode).
  llvm::Value* cast(llvm::Value* v, DType from, DType to) {
    if (from == to) return v;
    llvm::Type* target = value_type(compute_type(c_, to));
    if (to == DType::boolean)
      return is_floating(from) ? b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                               : b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    if (is_floating(from) && is_floating(to))
      return round_to(b_.CreateFPCast(v, target), to);
    if (is_floating(from))  // saturating, NaN → 0
      return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {target, v->getType()}, {v});
    if (is_floating(to))
      return round_to(from == DType::boolean ? b_.CreateUIToFP(v, target) : b_.CreateSIToFP(v, target), to);
    return from == DType::boolean ? b_.CreateZExt(v, target) : b_.CreateSExtOrTrunc(v, target);
  }

  llvm::AllocaInst* local(llvm::Type* type) {
    llvm::IRBuilder<> at_entry(entry_, entry_->begin());
    return at_entry.CreateAlloca(type);
  }

  // `a` and `v` of `dtype` folded by a sum, max or min (NaN-propagating);
  // a floating sum marked reassociable where `reassociate`.
  llvm::Value* fold(te::ReduceKind kind, DType dtype, llvm::Value* a, llvm::Value* v, bool reassociate) {
    const bool floating = is_floating(dtype);
    const bool is_bool = dtype == DType::boolean;
    switch (kind) {
      case te::ReduceKind::sum: {
        if (!floating) return b_.CreateAdd(a, v);
        auto* add = llvm::cast<llvm::Instruction>(b_.CreateFAdd(a, v));
        add->setHasAllowReassoc(reassociate);
        return add;
      }
      case te::ReduceKind::max:
        return floating ? call(llvm::Intrinsic::maximum, {a, v})
                        : b_.CreateBinaryIntrinsic(is_bool ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, a, v);
      case te::ReduceKind::min:
        return floating ? call(llvm::Intrinsic::minimum, {a, v})
                        : b_.CreateBinaryIntrinsic(is_bool ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, a, v);
      case te::ReduceKind::argmax: break;
    }
    NIMBLE_ASSERT(false, "fold: an argmax has no fold of two values");
    return nullptr;
  }

  // The value `fold(kind, …)` leaves any other unchanged with (a lane's
  // start when it holds no element yet).
  llvm::Value* identity(te::ReduceKind kind, DType dtype) {
    llvm::Type* type = compute_type(c_, dtype);
    if (is_floating(dtype)) {
      if (kind == te::ReduceKind::sum) return llvm::ConstantFP::getNegativeZero(type);
      return llvm::ConstantFP::getInfinity(type, kind == te::ReduceKind::max);
    }
    const unsigned bits = type->getIntegerBitWidth();
    if (kind == te::ReduceKind::sum) return llvm::ConstantInt::get(type, 0);
    if (dtype == DType::boolean) return b_.getInt1(kind == te::ReduceKind::min);
    return llvm::ConstantInt::get(type, kind == te::ReduceKind::max ? llvm::APInt::getSignedMinValue(bits)
                                                                     : llvm::APInt::getSignedMaxValue(bits));
  }

  // A reduction of a stage of several lanes (lanes_ > 1), split across them
  // (CpuEmitOptions::gpu): every lane gets the whole reduction.
  llvm::Value* lane_reduce(const te::ReduceNode& r) {
    const DType dtype = r.source.dtype();
    llvm::Type* type = compute_type(c_, dtype);
    llvm::Value* init = expr(r.init);
    std::vector<llvm::Value*> extents;
    llvm::Value* elements = b_.getInt64(1);
    for (const te::IterVar& a : r.axes) {
      extents.push_back(expr(a.extent));
      elements = b_.CreateMul(elements, extents.back());
    }
    // Lane `lane`'s partial: the init (lane 0) or the identity folded with
    // the reduction's elements lane, lane + lanes_, … in row-major order
    // (its axes flattened: neighbouring lanes read neighbouring elements).
    const auto partial = [&](llvm::Value* lane) {
      llvm::AllocaInst* acc = local(type);
      b_.CreateStore(b_.CreateSelect(b_.CreateICmpEQ(lane, b_.getInt64(0)), init, identity(r.reduce_kind, dtype)),
                     acc);
      stepped_loop(lane, elements, b_.getInt64(lanes_), false, [&](llvm::Value* flat) {
        for (std::size_t d = r.axes.size(); d-- > 0;) {
          vars_[r.axes[d].var.node()] = d == 0 ? flat : b_.CreateURem(flat, extents[d]);
          if (d > 0) flat = b_.CreateUDiv(flat, extents[d]);
        }
        b_.CreateStore(fold(r.reduce_kind, dtype, b_.CreateLoad(type, acc), expr(r.source), false), acc);
      });
      for (const te::IterVar& a : r.axes) vars_.erase(a.var.node());
      return b_.CreateLoad(type, acc);
    };
    const unsigned warps = lanes_ / kWarp;  // 0: the lanes of one warp, fewer than 32
    if (gpu_ != nullptr) {
      llvm::Value* sum = partial(lanes_ > kWarp ? gpu_->thread(b_) : gpu_->lane(b_));
      for (unsigned mask = std::min(lanes_, kWarp) / 2; mask >= 1; mask /= 2)
        sum = fold(r.reduce_kind, dtype, sum, exchange(sum, mask), false);
      if (warps <= 1) return sum;
      // Each warp's sum (its lane 0's) to shared memory; every thread folds
      // them in order, then waits until all have read them (the next
      // iteration writes them again).
      llvm::Value* sums = shared_array(type, warps, "warp_sums");
      llvm::Value* thread = gpu_->thread(b_);
      if_else(b_.CreateICmpEQ(b_.CreateURem(thread, b_.getInt64(kWarp)), b_.getInt64(0)), "warp.sum", [&] {
        b_.CreateStore(sum, b_.CreateInBoundsGEP(type, sums, b_.CreateUDiv(thread, b_.getInt64(kWarp))));
      }, [] {});
      gpu_->barrier(b_);
      llvm::Value* total = b_.CreateLoad(type, sums);
      for (unsigned w = 1; w < warps; ++w)
        total = fold(r.reduce_kind, dtype, total, b_.CreateLoad(type, b_.CreateConstInBoundsGEP1_64(type, sums, w)),
                     false);
      gpu_->barrier(b_);
      return total;
    }
    // The host: every lane's partial into an array, then each step of the
    // warps' butterflies from one array into the other, then the warps'
    // sums in order.
    llvm::Type* lanes_type = llvm::ArrayType::get(type, lanes_);
    llvm::AllocaInst* now = local(lanes_type);
    llvm::AllocaInst* next = local(lanes_type);
    const auto at = [&](llvm::AllocaInst* a, llvm::Value* lane) {
      return b_.CreateInBoundsGEP(lanes_type, a, {b_.getInt64(0), lane});
    };
    loop(b_.getInt64(0), b_.getInt64(lanes_), [&](llvm::Value* lane) { b_.CreateStore(partial(lane), at(now, lane)); });
    for (unsigned mask = std::min(lanes_, kWarp) / 2; mask >= 1; mask /= 2) {
      loop(b_.getInt64(0), b_.getInt64(lanes_), [&](llvm::Value* lane) {
        llvm::Value* mine = b_.CreateLoad(type, at(now, lane));
        llvm::Value* theirs = b_.CreateLoad(type, at(now, b_.CreateXor(lane, b_.getInt64(mask))));
        b_.CreateStore(fold(r.reduce_kind, dtype, mine, theirs, false), at(next, lane));
      });
      std::swap(now, next);
    }
    llvm::Value* total = b_.CreateLoad(type, at(now, b_.getInt64(0)));
    for (unsigned w = 1; w < warps; ++w)
      total = fold(r.reduce_kind, dtype, total, b_.CreateLoad(type, at(now, b_.getInt64(w * kWarp))), false);
    return total;
  }

  // The lanes of a GPU warp.
  static constexpr unsigned kWarp = 32;

  // Another lane's `v` (GpuOps::exchange), in 32-bit pieces.
  llvm::Value* exchange(llvm::Value* v, unsigned mask) {
    llvm::Type* type = v->getType();
    llvm::Type* i32 = b_.getInt32Ty();
    const unsigned bits = type->getPrimitiveSizeInBits();
    if (bits == 64) {
      auto* halves = llvm::FixedVectorType::get(i32, 2);
      llvm::Value* h = b_.CreateBitCast(v, halves);
      for (unsigned k = 0; k < 2; ++k)
        h = b_.CreateInsertElement(h, gpu_->exchange(b_, b_.CreateExtractElement(h, k), mask), k);
      return b_.CreateBitCast(h, type);
    }
    if (type->isFloatTy()) return b_.CreateBitCast(gpu_->exchange(b_, b_.CreateBitCast(v, i32), mask), type);
    NIMBLE_ASSERT(type->isIntegerTy() && bits <= 32, "exchange: a value of 32 or 64 bits, or a narrower integer");
    return b_.CreateTrunc(gpu_->exchange(b_, b_.CreateZExt(v, i32), mask), type);
  }

  llvm::Value* reduce(const te::ReduceNode& r) {
    if (lanes_ > 1 && splits_across_lanes(r)) return lane_reduce(r);
    if (llvm::Value* v = vector_reduce(r)) return v;
    const DType dtype = r.source.dtype();
    const bool floating = is_floating(dtype);
    const bool is_bool = dtype == DType::boolean;
    llvm::Type* type = compute_type(c_, dtype);
    llvm::AllocaInst* acc = local(type);
    llvm::AllocaInst* best = r.reduce_kind == te::ReduceKind::argmax ? local(i64_) : nullptr;
    b_.CreateStore(expr(r.init), acc);
    if (best) b_.CreateStore(b_.getInt64(0), best);
    std::vector<llvm::Value*> extents;
    for (const te::IterVar& a : r.axes) extents.push_back(expr(a.extent));
    llvm::Value* first_axis = nullptr;
    const std::function<void(std::size_t)> nest = [&](std::size_t d) {
      if (d == r.axes.size()) {
        llvm::Value* v = expr(r.source);
        llvm::Value* a = b_.CreateLoad(type, acc);
        llvm::Value* next = nullptr;
        switch (r.reduce_kind) {
          case te::ReduceKind::sum:
          case te::ReduceKind::max:
          case te::ReduceKind::min:
            // A sum reassociates, so that the loop vectorizes with vector accumulators.
            next = fold(r.reduce_kind, dtype, a, v, true);
            break;
          case te::ReduceKind::argmax: {
            // The first maximum; the first NaN counts as the maximum.
            llvm::Value* better =
                floating ? b_.CreateAnd(b_.CreateFCmpORD(a, a), b_.CreateOr(b_.CreateFCmpUNO(v, v), b_.CreateFCmpOLT(a, v)))
                         : (is_bool ? b_.CreateICmpULT(a, v) : b_.CreateICmpSLT(a, v));
            next = b_.CreateSelect(better, v, a);
            b_.CreateStore(b_.CreateSelect(better, first_axis, b_.CreateLoad(i64_, best)), best);
            break;
          }
        }
        b_.CreateStore(next, acc);
        return;
      }
      const te::VarNode* var = r.axes[d].var.node();
      loop(b_.getInt64(0), extents[d], [&](llvm::Value* iv) {
        vars_[var] = iv;
        if (d == 0) first_axis = iv;
        nest(d + 1);
      });
      vars_.erase(var);
    };
    nest(0);
    return best ? static_cast<llvm::Value*>(b_.CreateLoad(i64_, best))
                : static_cast<llvm::Value*>(b_.CreateLoad(type, acc));
  }

  // A floating sum, max or min over one axis whose source computes lane by
  // lane along it (lane_wise_along: each load contiguous in the axis or
  // independent of it) as explicit vectors (with vector loops on): while
  // kReduceVectors whole vectors remain, one into each of as many
  // accumulators; then a vector at a time into the first, the last masked
  // (its other lanes the identity); folded across accumulators and lanes
  // at the end, with the init. LLVM's vectorizer took 8 lanes and left a
  // row's last elements to a scalar loop, an exp each in softmax's sum
  // (rows of 200: 8). A sum already reassociates (reduce's scalar loop
  // allows it for the vectorizer); a max or min is exact in any order.
  // Null where the reduction does not qualify.
  llvm::Value* vector_reduce(const te::ReduceNode& r) {
    const DType dtype = r.source.dtype();
    if (row_lanes_ == 0 || vector_lanes_ != 0 || r.axes.size() != 1 || r.reduce_kind == te::ReduceKind::argmax ||
        !is_floating(dtype))
      return nullptr;
    const te::VarNode* var = r.axes[0].var.node();
    if (!lane_wise_along(r.source, var, nullptr) || has_checked_op(r.source)) return nullptr;
    llvm::Type* scalar = compute_type(c_, dtype);
    const unsigned lanes = scalar->isDoubleTy() ? row_lanes_ / 2 : row_lanes_;
    llvm::Type* type = llvm::FixedVectorType::get(scalar, lanes);
    const double identity = r.reduce_kind == te::ReduceKind::sum   ? -0.0
                            : r.reduce_kind == te::ReduceKind::max ? -std::numeric_limits<double>::infinity()
                                                                   : std::numeric_limits<double>::infinity();
    llvm::Value* none = llvm::ConstantFP::get(type, identity);
    const auto combine = [&](llvm::Value* a, llvm::Value* v) -> llvm::Value* {
      switch (r.reduce_kind) {
        case te::ReduceKind::sum: {
          auto* add = llvm::cast<llvm::Instruction>(b_.CreateFAdd(a, v));
          add->setHasAllowReassoc(true);
          return add;
        }
        case te::ReduceKind::max: return call(llvm::Intrinsic::maximum, {a, v});
        default: return call(llvm::Intrinsic::minimum, {a, v});
      }
    };
    llvm::Value* init = expr(r.init);
    llvm::Value* extent = expr(r.axes[0].extent);
    std::vector<llvm::AllocaInst*> acc;
    for (int u = 0; u < kReduceVectors; ++u) {
      acc.push_back(local(type));
      b_.CreateStore(none, acc.back());
    }
    // The source's lanes from element iv on (only those in `mask`).
    const auto source_at = [&](llvm::Value* iv, llvm::Value* mask) {
      vector_lanes_ = lanes;
      vector_var_ = var;
      vector_iv_ = iv;
      vector_mask_ = mask;
      llvm::Value* v = expr(r.source);
      vector_lanes_ = 0;
      vector_var_ = nullptr;
      vector_iv_ = vector_mask_ = nullptr;
      return v;
    };
    const auto add_to = [&](llvm::AllocaInst* a, llvm::Value* v) { b_.CreateStore(combine(b_.CreateLoad(type, a), v), a); };
    llvm::Value* all = llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b_.getInt1Ty(), lanes));
    llvm::Value* i = stepped_loop(b_.getInt64(0), extent, b_.getInt64(kReduceVectors * lanes), true, [&](llvm::Value* iv) {
      for (int u = 0; u < kReduceVectors; ++u) add_to(acc[static_cast<std::size_t>(u)], source_at(plus(iv, u * lanes), all));
    });
    stepped_loop(i, extent, b_.getInt64(lanes), false, [&](llvm::Value* iv) {
      llvm::Value* mask = lanes_below(b_.CreateSub(extent, iv), lanes);
      add_to(acc[0], b_.CreateSelect(mask, source_at(iv, mask), none));
    });
    llvm::Value* v = b_.CreateLoad(type, acc[0]);
    for (int u = 1; u < kReduceVectors; ++u) v = combine(v, b_.CreateLoad(type, acc[static_cast<std::size_t>(u)]));
    switch (r.reduce_kind) {
      case te::ReduceKind::sum: {
        llvm::CallInst* sum = b_.CreateFAddReduce(init, v);
        sum->setHasAllowReassoc(true);
        return sum;
      }
      case te::ReduceKind::max: return call(llvm::Intrinsic::maximum, {init, b_.CreateFPMaximumReduce(v)});
      default: return call(llvm::Intrinsic::minimum, {init, b_.CreateFPMinimumReduce(v)});
    }
  }

  // A vector of floats of `buffer` at p: with `mask`, only its lanes (the
  // others zero, nothing read there).
  llvm::Value* vector_load(int buffer, llvm::Value* p, llvm::Value* mask) {
    llvm::Instruction* v = nullptr;
    if (mask)
      v = b_.CreateMaskedLoad(vector_, p, llvm::Align(4), mask, llvm::Constant::getNullValue(vector_));
    else
      v = b_.CreateAlignedLoad(vector_, p, llvm::Align(4));
    annotate(v, buffer);
    return v;
  }

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

  // The tiles, inside the loops outside the row loop. [begin, end) is the
  // range split_range gives the runtime: of the outermost outer loop, or
  // with none, of the columns in whole tiles.
  void dot_tiles(llvm::Value* begin, llvm::Value* end) {
    const DotProductStage& d = *dot_;
    // Unit loops lie inside an outer or row loop (match_dot_product).
    for (const Stmt* u : d.unit) vars_[u->var.node()] = b_.getInt64(0);
    // Reached with a range only when there are no outer loops: then it is
    // of the columns, in whole tiles (split_range).
    llvm::Value* rows_begin = d.rows ? b_.getInt64(0) : nullptr;
    llvm::Value* rows_end = d.rows ? expr(d.rows->extent) : nullptr;
    llvm::Value* n = expr(d.cols->extent);
    llvm::Value* tile = b_.getInt64(tile_.cols);
    llvm::Value* cols_begin = begin ? b_.CreateMul(begin, tile, "", true, true) : b_.getInt64(0);
    llvm::Value* cols_end =
        end ? b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateMul(end, tile, "", true, true), n) : n;
    dot_columns(rows_begin, rows_end, cols_begin, cols_end);
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

  // Column blocks over [cols_begin, cols_end); in each, k in chunks of at
  // most kDotChunk, and in each chunk every tile of rows. With a long k
  // (BERT's [L, 3072] x [768, 3072]^T), a row tile of a over all of k (48
  // KiB at 4 rows) would not stay in L1 beside the rows of b it meets, and
  // every step would read both from L2; over a chunk it does.
  void dot_columns(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin, llvm::Value* cols_end) {
    const DotProductStage& d = *dot_;
    // Many rows whose tile rows go out as vectors (or enough, with a small
    // b) run as outer products over panels of b packed transposed
    // (dot_packed); the rest as dot products.
    // Whether a stage's rows are many is known before it splits (its rows
    // are whole in every thread's range), so an element's sums are the same
    // on any number of threads.
    if (d.rows && d.row_vectors) {
      llvm::Value* rows = b_.CreateSub(rows_end, rows_begin);
      const std::int64_t m = constant(rows_end).value_or(-1);
      const auto most = max_of_.find(rows_end);
      const std::int64_t most_rows =
          m >= 0 ? m : most != max_of_.end() ? most->second : std::numeric_limits<std::int64_t>::max();
      if (m >= kPackedDotMinRows) {
        dot_packed(rows_begin, rows_end, cols_begin, cols_end);
        return;
      }
      if (most_rows >= kPackedSmallDotMinRows) {
        llvm::Value* b_floats = b_.CreateMul(expr(d.cols->extent), expr(d.sum->axes[0].extent));
        llvm::Value* pack = b_.CreateOr(
            b_.CreateICmpSGE(rows, b_.getInt64(kPackedDotMinRows)),
            b_.CreateAnd(b_.CreateICmpSGE(rows, b_.getInt64(kPackedSmallDotMinRows)),
                         b_.CreateICmpSLE(b_floats, b_.getInt64(kPackedSmallDotFloats))));
        if_else(
            pack, "dot.packed", [&] { dot_packed(rows_begin, rows_end, cols_begin, cols_end); },
            [&] { dot_tile_columns(rows_begin, rows_end, cols_begin, cols_end); });
        return;
      }
    }
    dot_tile_columns(rows_begin, rows_end, cols_begin, cols_end);
  }

  // A dot-product stage's rows [rows_begin, rows_end) (many: dot_columns)
  // over columns [cols_begin, cols_end) as a GEMM with b transposed, in
  // OpenBLAS's order as packed_panels runs an outer-product stage: for each
  // kPanelK steps of k and each block of panels of columns, b's rows for
  // the block are packed transposed (vectors of k turned into vectors of
  // columns in registers), then each tile of rows sums outer products over
  // every panel, its rows of a read in place, and adds its sums to the
  // output by rows of vectors (the init at the first steps, the epilogue
  // at the last, as dot tiles do over chunks of k). Dot tiles fold their
  // sums across lanes at every tile and read a row of b per FMA or two: on
  // this Xeon, [200, 3072] x [768, 3072]^T ran at 118 GFLOP/s as dot
  // tiles and 147 this way, [128, 3072] x [768, 3072]^T 122 -> 142, W2's
  // [100, 300] x [750, 300]^T 95 -> 138 (old and new alternated).
  void dot_packed(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin, llvm::Value* cols_end) {
    choose_packed_tile(expr(dot_->cols->extent));
    packed_gemm(rows_begin, rows_end, cols_begin, cols_end, expr(dot_->sum->axes[0].extent), true, dot_,
                [&](const Panel& panel, llvm::Value* j0, llvm::Value* left) { pack_transposed(panel, j0, left); },
                [&](llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left, const Panel& panel,
                    const KChunk& kc) { dot_packed_tile(i0, mr, j0, nv, left, panel, kc); });
  }

  // b's rows j0.. (the panel's `left` columns) over the panel's steps of k
  // into the panel, transposed: each vector of k of `lanes` rows, loaded as
  // it lies, turned into a vector of columns for each step in registers. A
  // last partial vector of k is masked, its steps past the panel's stored
  // into the room the panel has for kPanelK (never read); columns past
  // `left` are zeros.
  void pack_transposed(const Panel& panel, llvm::Value* j0, llvm::Value* left) {
    const DotProductStage& d = *dot_;
    const auto lanes = static_cast<std::int64_t>(tile_.lanes);
    const te::VarNode* kv = d.sum->axes[0].var.node();
    const te::VarNode* col = d.cols->var.node();
    const int b_buffer = buffer_of(d.b->tensor);
    // The panel's vectors in a loop and one copy of the step (a whole
    // panel's masks are all on; AVX-512's masked loads cost what plain ones
    // do): the step is 16 loads, 64 shuffles and 16 stores, and unrolled per
    // vector and per kind of panel it was most of a product's code.
    loop(b_.getInt64(0), b_.getInt64(packed_vectors()), [&](llvm::Value* v) {
      llvm::Value* first = b_.CreateMul(v, b_.getInt64(lanes));
      std::vector<llvm::Value*> rows, in_range;
      vars_[kv] = panel.k_begin;
      for (std::int64_t c = 0; c < lanes; ++c) {
        llvm::Value* offset = plus(first, c);
        // A column past `left` reads nothing (its mask is off) at row j0.
        llvm::Value* ok = b_.CreateICmpSLT(offset, left);
        vars_[col] = b_.CreateSelect(ok, b_.CreateAdd(j0, offset), j0);
        rows.push_back(element_ptr(b_buffer, flat_index(*d.b)));
        in_range.push_back(b_.CreateVectorSplat(tile_.lanes, ok));
      }
      llvm::Value* out = b_.CreateInBoundsGEP(b_.getFloatTy(), panel.data, first);
      // `whole`: every row of the vector in range, read with plain loads (a
      // load masked by a run-time mask costs a mask move each).
      bool whole = true;
      const auto step = [&](llvm::Value* kk0, llvm::Value* k_mask) {
        std::vector<llvm::Value*> x;
        for (std::size_t c = 0; c < rows.size(); ++c) {
          llvm::Value* p = b_.CreateInBoundsGEP(b_.getFloatTy(), rows[c], kk0);
          llvm::Value* mask = whole ? k_mask : k_mask ? b_.CreateAnd(k_mask, in_range[c]) : in_range[c];
          x.push_back(vector_load(b_buffer, p, mask));
        }
        x = transpose(std::move(x));
        for (std::int64_t t = 0; t < lanes; ++t)
          b_.CreateAlignedStore(
              x[static_cast<std::size_t>(t)],
              b_.CreateInBoundsGEP(b_.getFloatTy(), out, b_.CreateMul(plus(kk0, t), b_.getInt64(panel.step))),
              llvm::Align(4 * tile_.lanes));
      };
      // A k known to be whole vectors leaves no partial one.
      const std::optional<std::int64_t> known_k = constant(expr(d.sum->axes[0].extent));
      const auto steps = [&] {
        llvm::Value* kk = stepped_loop(b_.getInt64(0), panel.k_size, b_.getInt64(lanes), true,
                                       [&](llvm::Value* kk0) { step(kk0, nullptr); });
        if (!known_k || *known_k % lanes != 0)
          stepped_loop(kk, panel.k_size, b_.getInt64(lanes), false,
                       [&](llvm::Value* kk0) { step(kk0, lanes_below(b_.CreateSub(panel.k_size, kk0))); });
      };
      if_else(b_.CreateICmpSGE(left, plus(first, lanes)), "pack.whole", steps, [&] {
        whole = false;
        steps();
      });
    });
    vars_.erase(kv);
    vars_.erase(col);
  }

  // The transpose of `rows` (as many vectors as lanes): vector t of the
  // result holds lane t of every row. Each round swaps one bit of the row
  // index with the same bit of the lane index, pairing rows p and p + b
  // with two shuffles of two sources; log2(lanes) rounds.
  std::vector<llvm::Value*> transpose(std::vector<llvm::Value*> rows) {
    const auto n = static_cast<int>(rows.size());
    for (int b = 1; b < n; b *= 2) {
      std::vector<int> low, high;
      for (int l = 0; l < n; ++l) {
        low.push_back((l & b) == 0 ? l : n + (l ^ b));
        high.push_back((l & b) == 0 ? (l ^ b) : n + l);
      }
      for (int p = 0; p < n; ++p) {
        if ((p & b) != 0) continue;
        llvm::Value* x = rows[static_cast<std::size_t>(p)];
        llvm::Value* y = rows[static_cast<std::size_t>(p + b)];
        rows[static_cast<std::size_t>(p)] = b_.CreateShuffleVector(x, y, low);
        rows[static_cast<std::size_t>(p + b)] = b_.CreateShuffleVector(x, y, high);
      }
    }
    return rows;
  }

  // mr rows from i0 × the panel's columns from j0 (with `left`, only those
  // below it): outer products over the panel's steps of k, a's rows read in
  // place, each row of sums through store_tile_row.
  void dot_packed_tile(llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left, const Panel& panel,
                       const KChunk& kc) {
    const DotProductStage& d = *dot_;
    const te::VarNode* row = d.rows->var.node();
    const te::VarNode* col = d.cols->var.node();
    const te::VarNode* kv = d.sum->axes[0].var.node();
    const auto lanes = static_cast<std::int64_t>(tile_.lanes);
    const std::vector<llvm::AllocaInst*> acc = zeroed_sums(mr * nv);
    const RowWalk a_rows = row_walk(*d.a, row, kv, i0, panel.k_begin, mr);
    loop(b_.getInt64(0), panel.k_size, [&](llvm::Value* kk) {
      std::vector<llvm::Value*> bv;
      for (int v = 0; v < nv; ++v)
        bv.push_back(b_.CreateAlignedLoad(vector_, panel_at(panel, kk, v), llvm::Align(4 * tile_.lanes)));
      add_outer_products(acc, a_rows.step(*this, b_.CreateAdd(panel.k_begin, kk, "", true, true)), bv);
      if (panel.ahead)
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr_},
                           {b_.CreateGEP(b_.getFloatTy(), panel.ahead, kk), b_.getInt32(0), b_.getInt32(2), b_.getInt32(1)});
    });
    vars_.erase(kv);
    // The sums go out through one copy of a row's stores (the epilogue's
    // code: 24 copies in an 8 × 3 tile were most of a product's compile
    // time), from an array, in a loop over the tile's rows. Short products
    // pay for the loop: q · k^T at 200 tokens (k = 64) 0.46 -> 0.50 ms
    // (0.53 with a loop over the vectors too).
    llvm::AllocaInst* sums = local(llvm::ArrayType::get(vector_, static_cast<std::uint64_t>(mr * nv)));
    sums->setAlignment(llvm::Align(64));
    for (int n = 0; n < mr * nv; ++n)
      b_.CreateAlignedStore(b_.CreateLoad(vector_, acc[static_cast<std::size_t>(n)]),
                            b_.CreateConstInBoundsGEP2_64(sums->getAllocatedType(), sums, 0, static_cast<std::uint64_t>(n)),
                            llvm::Align(64));
    const std::vector<llvm::Value*> masks = vector_masks(left, nv);
    loop(b_.getInt64(0), b_.getInt64(mr), [&](llvm::Value* r) {
      for (int v = 0; v < nv; ++v) {
        llvm::Value* first = b_.getInt64(v * lanes);
        // A vector wholly past `left` stores nothing (its columns may lie
        // past b's rows and the output's).
        llvm::BasicBlock* next = nullptr;
        if (left && v > 0) {
          llvm::BasicBlock* yes = llvm::BasicBlock::Create(c_, "tile.vector", fn_);
          next = llvm::BasicBlock::Create(c_, "tile.vector.done", fn_);
          b_.CreateCondBr(b_.CreateICmpSGT(left, first), yes, next);
          b_.SetInsertPoint(yes);
        }
        vars_[row] = b_.CreateAdd(i0, r);
        vars_[col] = b_.CreateAdd(j0, first);
        llvm::Value* at = b_.CreateInBoundsGEP(sums->getAllocatedType(), sums,
                                               {b_.getInt64(0), plus(b_.CreateMul(r, b_.getInt64(nv)), v)});
        store_tile_row(b_.CreateAlignedLoad(vector_, at, llvm::Align(64)), vars_[col], tile_.lanes, kc,
                       masks[static_cast<std::size_t>(v)]);
        if (next) {
          b_.CreateBr(next);
          b_.SetInsertPoint(next);
        }
      }
    });
    vars_.erase(row);
    vars_.erase(col);
  }

  void dot_tile_columns(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin, llvm::Value* cols_end) {
    const DotProductStage& d = *dot_;
    llvm::Value* k = expr(d.sum->axes[0].extent);
    const std::int64_t nr = tile_.cols;
    llvm::Value* chunk = b_.getInt64(kDotChunk);
    llvm::Value* chunk_k = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, k, chunk);
    llvm::Value* per_block =
        b_.CreateSDiv(b_.getInt64(kColumnBlockFloats),
                      b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, chunk_k, b_.getInt64(1)));
    llvm::Value* block = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateMul(b_.CreateSDiv(per_block, b_.getInt64(nr)), b_.getInt64(nr)),
                                                  b_.getInt64(nr));
    // Tile variants a kernel's known sizes rule out are not emitted (a third
    // to a half of a product's code: BERT's N and K are static, and a
    // specialized kernel's rows): rows known to be a multiple of the tile's
    // need no single-row tiles, fewer than a tile's no whole tiles; columns
    // a multiple of the tile's (the threads' ranges and the blocks are whole
    // tiles) no single-column tiles; a k of whole vectors no masked tail.
    // The rows' count if known, else -1 (not an optional made by a ternary:
    // GCC 12 at -O1 takes its value for maybe uninitialized).
    const std::int64_t m = rows_end ? constant(rows_end).value_or(-1) : -1;
    const std::optional<std::int64_t> n = constant(expr(d.cols->extent));
    const std::optional<std::int64_t> known_k = constant(k);
    const bool whole_rows = m < 0 || m >= tile_.rows, rest_rows = m < 0 || m % tile_.rows != 0;
    const bool whole_cols = n && *n % nr == 0;
    const bool whole_vectors = known_k && *known_k % static_cast<std::int64_t>(tile_.lanes) == 0;
    const auto rows = [&](llvm::Value* jc, llvm::Value* jend, const KChunk& kc) {
      if (!d.rows) {
        dot_row_tile(nullptr, 1, jc, jend, kc, whole_cols);
        return;
      }
      llvm::Value* i = rows_begin;
      if (whole_rows)
        i = stepped_loop(rows_begin, rows_end, b_.getInt64(tile_.rows), true,
                         [&](llvm::Value* i0) { dot_row_tile(i0, tile_.rows, jc, jend, kc, whole_cols); });
      if (!rest_rows) return;
      // Rows known to leave 2 or 3 past the whole tiles (a specialized
      // kernel's: a Tree-LSTM level of 2, 3, 6 nodes) take one tile of that
      // many rows, which reads each block of b once, not once per row: b's
      // rows are what a few-row product waits for.
      if (m > 0 && m % tile_.rows > 1) {
        dot_row_tile(i, static_cast<int>(m % tile_.rows), jc, jend, kc, whole_cols);
        return;
      }
      // Rows known at run time only (a generic kernel's): the 2 or 3 past
      // the whole tiles in one tile of 3, for the same reason.
      if (m < 0 && tile_.rows == 4) {
        llvm::Value* rest = b_.CreateSub(rows_end, i);
        llvm::BasicBlock* three = llvm::BasicBlock::Create(c_, "rows.three", fn_);
        llvm::BasicBlock* single = llvm::BasicBlock::Create(c_, "rows.single", fn_);
        llvm::BasicBlock* one = llvm::BasicBlock::Create(c_, "rows.one", fn_);
        llvm::BasicBlock* done = llvm::BasicBlock::Create(c_, "rows.done", fn_);
        b_.CreateCondBr(b_.CreateICmpSGT(rest, b_.getInt64(1)), three, single);
        b_.SetInsertPoint(three);
        dot_row_tile(i, 3, jc, jend, kc, whole_cols, b_.CreateSub(rows_end, b_.getInt64(1)));
        b_.CreateBr(done);
        b_.SetInsertPoint(single);
        b_.CreateCondBr(b_.CreateICmpEQ(rest, b_.getInt64(1)), one, done);
        b_.SetInsertPoint(one);
        dot_row_tile(i, 1, jc, jend, kc, whole_cols);
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
        return;
      }
      loop(i, rows_end, [&](llvm::Value* i0) { dot_row_tile(i0, 1, jc, jend, kc, whole_cols); });
    };
    // A k known to fit one chunk (the weights' dims are static: W1's 300
    // and 512, BERT's 768) needs no loop over chunks: one loop level less
    // to compile in the kernels that need it least.
    // So does a k whose bucket bounds it (a specialized kernel's).
    const auto bounded = max_of_.find(k);
    const bool one_chunk = (known_k && *known_k <= kDotChunk) ||
                           (bounded != max_of_.end() && bounded->second <= kDotChunk);
    // Else at least one chunk: with k = 0 the output is the init.
    llvm::Value* chunks =
        one_chunk ? nullptr
                  : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax,
                                             b_.CreateSDiv(b_.CreateAdd(k, b_.getInt64(kDotChunk - 1)), chunk),
                                             b_.getInt64(1));
    each_block(cols_begin, cols_end, block, [&](llvm::Value* jc) {
      llvm::Value* jend = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(jc, block), cols_end);
      if (one_chunk) {
        rows(jc, jend,
             {.begin = b_.getInt64(0), .size = k, .first = b_.getTrue(), .last = b_.getTrue(),
              .whole_vectors = whole_vectors, .next_block = block});
        return;
      }
      loop(b_.getInt64(0), chunks, [&](llvm::Value* c) {
        llvm::Value* kb = b_.CreateMul(c, chunk);
        rows(jc, jend,
             {.begin = kb,
              .size = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, chunk, b_.CreateSub(k, kb)),
              .first = b_.CreateICmpEQ(c, b_.getInt64(0)),
              .last = b_.CreateICmpEQ(c, b_.CreateSub(chunks, b_.getInt64(1))),
              .whole_vectors = whole_vectors,
              .next_block = block});
      });
    });
  }

  // body(jc) for the column blocks [jc, jc + block) of [cols_begin,
  // cols_end): in order, or in a matrix-vector product (no rows, no outer
  // loops: a recurrent step's h·W_hhᵀ), in order on one call and in reverse
  // on the next. A b larger than L2 (W1's W_hh, 4 MiB; 2 MiB of L2 here)
  // read the same way every call finds none of it there, each block pushed
  // out before its turn comes again; read back the other way, the call
  // starts with the blocks the last one read last, still in L2 (a pass over
  // W_hh from L3 138 -> 86 us). Each output is the same sum either way.
  template <class Body>
  void each_block(llvm::Value* cols_begin, llvm::Value* cols_end, llvm::Value* block, Body&& body) {
    const DotProductStage& d = *dot_;
    if (d.rows || !d.outer.empty()) {
      stepped_loop(cols_begin, cols_end, block, false, body);
      return;
    }
    llvm::Value* span = b_.CreateSub(cols_end, cols_begin);
    llvm::Value* blocks = b_.CreateSDiv(b_.CreateAdd(span, b_.CreateSub(block, b_.getInt64(1))), block);
    llvm::Value* backward = b_.CreateTrunc(calls_so_far(), b_.getInt1Ty());
    loop(b_.getInt64(0), blocks, [&](llvm::Value* n) {
      llvm::Value* index = b_.CreateSelect(backward, b_.CreateSub(b_.CreateSub(blocks, b_.getInt64(1)), n), n);
      body(b_.CreateAdd(cols_begin, b_.CreateMul(index, block)));
    });
  }

  // How many times this stage ran before (modulo 2^64), counted in a
  // global of the kernel's module; concurrent runs (a stage split across
  // threads) each get a count of their own.
  llvm::Value* calls_so_far() {
    llvm::Module& m = s_.module;
    auto* counter = new llvm::GlobalVariable(m, i64_, false, llvm::GlobalValue::InternalLinkage,
                                             llvm::ConstantInt::get(i64_, 0), fn_->getName() + ".calls");
    return b_.CreateAtomicRMW(llvm::AtomicRMWInst::Add, counter, b_.getInt64(1), llvm::MaybeAlign(8),
                              llvm::AtomicOrdering::Monotonic);
  }

  // The tiles of rows i.. (mr of them) over columns [jc, jend); with
  // `whole_cols` that range is known to be whole tiles.
  void dot_row_tile(llvm::Value* i, int mr, llvm::Value* jc, llvm::Value* jend, const KChunk& kc, bool whole_cols,
                    llvm::Value* last_row = nullptr) {
    // A product over rows of b that cross cache lines in turn (W2's U [750,
    // 300]: a row is 1200 bytes, so row j starts 48·j mod 64 bytes into a
    // line) takes its columns in groups whose rows of b start alike (j, j +
    // s, j + 2s, ... with s rows a whole number of vectors): dot_tile then
    // reads each of them in aligned vectors (reads_b_aligned), not one load
    // split over two lines a step. A matrix-vector product waited on those
    // loads, not on L2: a pass over U took 10.6 us, now 7.0-7.5 (one thread;
    // W2 at 8 leaves 0.128 -> 0.100 ms in one sitting).
    if (const int s = column_step_; s > 1)
      jc = stepped_loop(jc, jend, b_.getInt64(s * tile_.cols), true, [&](llvm::Value* j0) {
        // Where the epilogue is lane-wise along a row, the s tiles' sums
        // leave as one vector a row over their s · nr adjacent columns,
        // not one scalar epilogue and store each (half of W2's [19, 300] x
        // [450, 300]^T went outside the tiles' loops so).
        const bool rows_as_vectors = dot_->row_vectors;
        std::vector<std::vector<llvm::Value*>> sums(static_cast<std::size_t>(s));
        for (int g = 0; g < s; ++g)
          dot_tile(i, mr, b_.CreateAdd(j0, b_.getInt64(g), "", true, true), tile_.cols, kc, last_row, s,
                   rows_as_vectors ? &sums[static_cast<std::size_t>(g)] : nullptr);
        if (rows_as_vectors) store_column_groups(i, mr, j0, sums, kc, last_row);
      });
    llvm::Value* j = stepped_loop(jc, jend, b_.getInt64(tile_.cols), true,
                                  [&](llvm::Value* j0) { dot_tile(i, mr, j0, tile_.cols, kc, last_row); });
    if (!whole_cols) loop(j, jend, [&](llvm::Value* j0) { dot_tile(i, mr, j0, 1, kc, last_row); });
  }

  // store() for row i + r of a tile, only where it is a row: r = 0 always
  // is; past it, rows up to last_row (null: every row of the tile).
  template <class Store>
  void store_if_row(llvm::Value* i, int r, llvm::Value* last_row, const Store& store) {
    if (!last_row || r == 0) {
      store();
      return;
    }
    llvm::BasicBlock* yes = llvm::BasicBlock::Create(c_, "tile.row", fn_);
    llvm::BasicBlock* next = llvm::BasicBlock::Create(c_, "tile.row.done", fn_);
    b_.CreateCondBr(b_.CreateICmpSLE(plus(i, r), last_row), yes, next);
    b_.SetInsertPoint(yes);
    store();
    b_.CreateBr(next);
    b_.SetInsertPoint(next);
  }

  // Rows i.. (mr of them) of the tiles of one column group (dot_row_tile):
  // sums[g][r · nr + c] is row i + r's sum at column j0 + g + s · c, so that
  // row's s · nr columns from j0 are adjacent — one vector through the
  // epilogue and one store (rows past last_row stored nowhere).
  void store_column_groups(llvm::Value* i, int mr, llvm::Value* j0, const std::vector<std::vector<llvm::Value*>>& sums,
                           const KChunk& kc, llvm::Value* last_row) {
    const DotProductStage& d = *dot_;
    const te::VarNode* row = d.rows ? d.rows->var.node() : nullptr;
    const te::VarNode* col = d.cols->var.node();
    const auto s = static_cast<int>(sums.size());
    const int nr = tile_.cols, n = s * nr;
    for (int r = 0; r < mr; ++r)
      store_if_row(i, r, last_row, [&] {
        if (row) vars_[row] = plus(i, r);
        vars_[col] = j0;
        llvm::Value* row_sums =
            llvm::PoisonValue::get(llvm::FixedVectorType::get(b_.getFloatTy(), static_cast<unsigned>(n)));
        for (int t = 0; t < n; ++t)
          row_sums = b_.CreateInsertElement(
              row_sums, sums[static_cast<std::size_t>(t % s)][static_cast<std::size_t>(r * nr + t / s)], t);
        store_tile_row(row_sums, j0, static_cast<unsigned>(n), kc);
      });
    if (row) vars_.erase(row);
    vars_.erase(col);
  }

  // Whether a tile of mr rows from i reads b's rows in aligned vectors:
  // every tile where b's rows cross cache lines in turn (W2's leaves, [n,
  // 300] x [450, 300]^T, 7% faster so), and one of fewer rows than a whole
  // tile (a matrix-vector product, with no row loop, and a few-row one: a
  // Tree-LSTM level) wherever its rows start, as its loads of b are most
  // of what it does.
  bool reads_b_aligned(llvm::Value* i, int mr) const { return i == nullptr || mr < tile_.rows || column_step_ > 1; }

  // How many columns apart b's rows start at the same offset in a vector:
  // the least s with s rows a whole number of vectors (4 for rows of 300
  // floats and 64-byte vectors); 1 where rows are whole vectors, or where
  // their length is not known when the kernel is compiled.
  int aligned_column_step() {
    const DotProductStage& d = *dot_;
    const std::vector<Expr>& index = d.b->indices;
    if (index.size() < 2 || index[index.size() - 2].get() != d.cols->var.node()) return 1;
    const std::optional<std::int64_t> row = constant(expr(d.b->tensor.shape().back()));
    if (!row || *row <= 0) return 1;
    const std::int64_t vector_bytes = 4 * static_cast<std::int64_t>(tile_.lanes);
    return static_cast<int>(vector_bytes / std::gcd(4 * *row, vector_bytes));
  }

  // mr × nr sums at rows i.., columns j.., over the chunk of k. With
  // `last_row`, rows past it read that row and store nothing (a tile of 3
  // for the last 2 or 3 rows of a product whose rows are known at run time
  // only). The tile's columns are j, j + col_step, ... (dot_row_tile).
  void dot_tile(llvm::Value* i, int mr, llvm::Value* j, int nr, const KChunk& kc, llvm::Value* last_row = nullptr,
                int col_step = 1, std::vector<llvm::Value*>* sums_out = nullptr) {
    llvm::Value* k = kc.size;
    const DotProductStage& d = *dot_;
    const te::VarNode* kv = d.sum->axes[0].var.node();
    const te::VarNode* row = d.rows ? d.rows->var.node() : nullptr;
    const te::VarNode* col = d.cols->var.node();
    const int a_buffer = buffer_of(d.a->tensor), b_buffer = buffer_of(d.b->tensor);
    const auto at = [&](const te::VarNode* var, llvm::Value* base, int offset) {
      if (var) vars_[var] = offset == 0 ? base : b_.CreateAdd(base, b_.getInt64(offset), "", true, true);
    };
    vars_[kv] = kc.begin;
    std::vector<llvm::Value*> a_rows, b_rows;
    at(col, j, 0);
    for (int r = 0; r < mr; ++r) {
      at(row, i, r);
      if (last_row && r > 0) vars_[row] = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, vars_[row], last_row);
      a_rows.push_back(element_ptr(a_buffer, flat_index(*d.a)));
    }
    const auto store_row = [&](int r, const auto& store) { store_if_row(i, r, last_row, store); };
    for (int c = 0; c < nr; ++c) {
      at(col, j, c * col_step);
      b_rows.push_back(element_ptr(b_buffer, flat_index(*d.b)));
    }
    // In such a tile (reads_b_aligned) the steps start where b's first row
    // meets a vector boundary: `shift` floats before the chunk, the first
    // step masked to the lanes from there, so that its loads of b are
    // aligned (every row's, with col_step).
    llvm::Value* shift = nullptr;
    if (reads_b_aligned(i, mr)) {
      shift = b_.CreateLShr(
          b_.CreateAnd(b_.CreatePtrToInt(b_rows.front(), i64_), b_.getInt64(4 * tile_.lanes - 1)), b_.getInt64(2));
      llvm::Value* back = b_.CreateNeg(shift);
      for (llvm::Value*& p : a_rows) p = b_.CreateGEP(b_.getFloatTy(), p, back);
      for (llvm::Value*& p : b_rows) p = b_.CreateGEP(b_.getFloatTy(), p, back);
    }
    const std::vector<llvm::Value*> ahead = next_block_rows(i, mr, j, nr, kc);
    const std::vector<llvm::AllocaInst*> acc = zeroed_sums(mr * nr);
    const auto step = [&](llvm::Value* kk, llvm::Value* mask) {
      const auto read = [&](llvm::Value* base, int buffer) {
        return vector_load(buffer, b_.CreateInBoundsGEP(b_.getFloatTy(), base, kk), mask);
      };
      std::vector<llvm::Value*> av, bv;
      for (llvm::Value* p : a_rows) av.push_back(read(p, a_buffer));
      for (llvm::Value* p : b_rows) bv.push_back(read(p, b_buffer));
      for (llvm::Value* p : ahead)
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr_},
                           {b_.CreateGEP(b_.getFloatTy(), p, b_.CreateLShr(kk, ahead_shift_)), b_.getInt32(0),
                            b_.getInt32(2), b_.getInt32(1)});
      for (int r = 0; r < mr; ++r)
        for (int c = 0; c < nr; ++c) {
          llvm::AllocaInst* sum = acc[static_cast<std::size_t>(r * nr + c)];
          b_.CreateStore(b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vector_},
                                            {av[static_cast<std::size_t>(r)], bv[static_cast<std::size_t>(c)],
                                             b_.CreateLoad(vector_, sum)}),
                         sum);
        }
    };
    llvm::Value* lanes = b_.getInt64(tile_.lanes);
    llvm::Value* first = b_.getInt64(0);
    if (shift) {
      k = b_.CreateAdd(k, shift, "", true, true);
      step(first, b_.CreateAnd(b_.CreateNot(lanes_below(shift)), lanes_below(k)));
      first = lanes;
    }
    llvm::Value* kend = stepped_loop(first, k, lanes, true, [&](llvm::Value* kk) { step(kk, nullptr); });
    if (shift || !kc.whole_vectors) {
      // The last partial vector, masked.
      llvm::Value* rest = b_.CreateSub(k, kend);
      llvm::BasicBlock* tail = llvm::BasicBlock::Create(c_, "tile.tail", fn_);
      llvm::BasicBlock* done = llvm::BasicBlock::Create(c_, "tile.done", fn_);
      b_.CreateCondBr(b_.CreateICmpSGT(rest, b_.getInt64(0)), tail, done);
      b_.SetInsertPoint(tail);
      step(kend, lanes_below(rest));
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    }
    std::vector<llvm::Value*> sums;
    for (llvm::AllocaInst* a : acc) sums.push_back(b_.CreateLoad(vector_, a));
    sums = lane_sums(std::move(sums));
    if (sums_out) {
      *sums_out = std::move(sums);
      vars_.erase(kv);
      if (row) vars_.erase(row);
      vars_.erase(col);
      return;
    }
    if (nr > 1 && d.row_vectors && col_step == 1) {
      for (int r = 0; r < mr; ++r)
        store_row(r, [&] {
          at(row, i, r);
          at(col, j, 0);
          llvm::Value* row_sums = llvm::PoisonValue::get(llvm::FixedVectorType::get(b_.getFloatTy(), nr));
          for (int c = 0; c < nr; ++c)
            row_sums = b_.CreateInsertElement(row_sums, sums[static_cast<std::size_t>(r * nr + c)], c);
          store_tile_row(row_sums, j, static_cast<unsigned>(nr), kc);
        });
      vars_.erase(kv);
      if (row) vars_.erase(row);
      vars_.erase(col);
      return;
    }
    for (int r = 0; r < mr; ++r)
      store_row(r, [&] {
        for (int c = 0; c < nr; ++c) {
          at(row, i, r);
          at(col, j, c * col_step);
          llvm::Value* out = element_ptr(d.store->buffer, expr(d.store->index));
          llvm::Value* total = stored_value(sums[static_cast<std::size_t>(r * nr + c)], out, kc);
          annotate(b_.CreateAlignedStore(total, out, llvm::Align(4)), d.store->buffer);
        }
      });
    vars_.erase(kv);
    if (row) vars_.erase(row);
    vars_.erase(col);
  }

  // Where the tile at rows i.., columns j.. prefetches b from (one line a
  // step): rows of the same tile in the next chunk of k, or after the last
  // chunk, in the next column block, or past the last block, in the first
  // one of the next iteration of the innermost outer loop (BERT's next
  // head). The first row tile to pass over a block would otherwise wait for
  // b's rows from memory (a model's weights are in no cache when its layer
  // runs: BERT's [64, 768] x [768, 768]^T took 17% longer with a weight it
  // had not just used); so the next block comes in while this one is
  // computed. Every row tile fetches one row of each tile, the k-th row
  // tile row k mod nr, and with many row tiles only a part of it (BERT's
  // [64, 768] x [3072, 768]^T with its weight in no cache: 2.66 -> 2.45
  // ms, W3 at 64 tokens 100 -> 92 ms). A stage without a row loop (a
  // matrix-vector product, W1's and W2's steps) fetches nothing: its
  // weights stay in L2 or L3 between calls, and the prefetches cost W2
  // 5-10%. Prefetches never fault: the indices are kept in their extents
  // only not to fetch lines nothing reads.
  static constexpr unsigned kMaxAheadShift = 2;
  std::vector<llvm::Value*> next_block_rows(llvm::Value* i, int mr, llvm::Value* j, int nr, const KChunk& kc) {
    const DotProductStage& d = *dot_;
    if (nr != tile_.cols || i == nullptr) return {};
    // Nor does one known to have no more rows than one tile (a specialized
    // kernel's few-row product: a Tree-LSTM level): it reads b as a
    // matrix-vector product does.
    if (const std::optional<std::int64_t> m = d.outer.empty() ? constant(expr(d.rows->extent)) : std::nullopt;
        m && *m <= tile_.rows)
      return {};
    const te::VarNode* col = d.cols->var.node();
    const te::VarNode* outer = d.outer.empty() ? nullptr : d.outer.back()->var.node();
    const te::VarNode* kv = d.sum->axes[0].var.node();
    llvm::Value* n = expr(d.cols->extent);
    llvm::Value* const outer_at = outer ? vars_.at(outer) : nullptr;
    // With k in chunks, the next chunk of this block comes first.
    llvm::Value* const k_at = vars_.at(kv);
    llvm::Value* const ahead = kc.last == b_.getTrue() ? kc.next_block
                                                       : b_.CreateSelect(kc.last, kc.next_block, b_.getInt64(0));
    if (kc.last != b_.getTrue()) vars_[kv] = b_.CreateSelect(kc.last, b_.getInt64(0), b_.CreateAdd(kc.begin, kc.size));
    const auto row_at = [&](llvm::Value* c) {
      llvm::Value* at = b_.CreateAdd(b_.CreateAdd(j, ahead), c);
      if (outer) {
        llvm::Value* wrap = b_.CreateICmpSGE(at, n);
        at = b_.CreateSelect(wrap, b_.CreateSub(at, n), at);
        vars_[outer] = b_.CreateBinaryIntrinsic(
            llvm::Intrinsic::smin, b_.CreateAdd(outer_at, b_.CreateZExt(wrap, i64_)),
            b_.CreateSub(expr(d.outer.back()->extent), b_.getInt64(1)));
      }
      vars_[col] = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, at, b_.CreateSub(n, b_.getInt64(1)));
      llvm::Value* p = b_.CreateGEP(b_.getFloatTy(), base(buffer_of(d.b->tensor)), flat_index(*d.b));
      vars_.erase(col);
      if (outer) vars_[outer] = outer_at;
      return p;
    };
    llvm::Value* tile = mr > 1 ? b_.CreateUDiv(i, b_.getInt64(mr)) : i;
    llvm::Value* p = row_at(b_.CreateURem(tile, b_.getInt64(nr)));
    // With 2^s nr row tiles or more (s at most kMaxAheadShift), row tiles
    // t, t + nr, ... share the row, each fetching a 2^-s part of its chunk
    // of k, one line every 2^s steps (ahead_shift_): the next block comes
    // in over the whole block's tiles, not at the rate of the first nr
    // (whose one line a step asked for more than memory gives).
    llvm::Value* tiles = b_.CreateUDiv(expr(d.rows->extent), b_.getInt64(mr));
    llvm::Value* shift = b_.getInt64(0);
    for (unsigned s = 1; s <= kMaxAheadShift; ++s)
      shift = b_.CreateSelect(b_.CreateICmpUGE(tiles, b_.getInt64(nr << s)), b_.getInt64(s), shift);
    ahead_shift_ = shift;
    llvm::Value* part = b_.CreateAnd(b_.CreateUDiv(tile, b_.getInt64(nr)),
                                     b_.CreateSub(b_.CreateShl(b_.getInt64(1), shift), b_.getInt64(1)));
    llvm::Value* span = b_.CreateLShr(b_.CreateAdd(kc.size, b_.CreateSub(b_.CreateShl(b_.getInt64(1), shift), b_.getInt64(1))), shift);
    std::vector<llvm::Value*> rows{b_.CreateGEP(b_.getFloatTy(), p, b_.CreateMul(part, span))};
    vars_[kv] = k_at;
    return rows;
  }

  // A tile's row of `n` complete sums (or a chunk's partial ones) at
  // columns j.. of the row the vars give: with its init (or what the
  // chunks before left), through the epilogue and into the output as one
  // vector each (DotProductStage::row_vectors), as a vector loop computes
  // its lanes, instead of n scalar epilogues and stores.
  void store_tile_row(llvm::Value* row_sums, llvm::Value* j, unsigned n, const KChunk& kc, llvm::Value* mask = nullptr) {
    const DotProductStage& d = *dot_;
    llvm::Value* at = element_ptr(d.store->buffer, expr(d.store->index));
    vector_lanes_ = n;
    vector_var_ = d.cols->var.node();
    vector_iv_ = j;
    vector_mask_ = mask ? mask : llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(b_.getInt1Ty(), n));
    tile_mask_ = mask;
    llvm::Value* total = stored_value(row_sums, at, kc);
    if (mask)
      annotate(b_.CreateMaskedStore(total, at, llvm::Align(4), mask), d.store->buffer);
    else
      annotate(b_.CreateAlignedStore(total, at, llvm::Align(4)), d.store->buffer);
    vector_lanes_ = 0;
    vector_var_ = nullptr;
    vector_iv_ = vector_mask_ = tile_mask_ = nullptr;
  }

  // What a tile stores at `at` for `sums` (one, or in vector mode a row's):
  // the sum's init (the first chunk of k) or what the chunks before left
  // there, plus the sums; through the epilogue at the last chunk (chunks
  // before it store the partial sum the next one starts from).
  llvm::Value* stored_value(llvm::Value* sums, llvm::Value* at, const KChunk& kc) {
    const DotProductStage& d = *dot_;
    llvm::Value* start = expr(d.sum->init);
    if (kc.first != b_.getTrue()) {
      llvm::Instruction* so_far = nullptr;
      if (tile_mask_)
        so_far = b_.CreateMaskedLoad(sums->getType(), at, llvm::Align(4), tile_mask_,
                                     llvm::Constant::getNullValue(sums->getType()));
      else
        so_far = b_.CreateAlignedLoad(sums->getType(), at, llvm::Align(4));
      annotate(so_far, d.store->buffer);
      start = b_.CreateSelect(kc.first, start, so_far);
    }
    llvm::Value* total = b_.CreateFAdd(start, sums);
    if (d.store->value.get() == d.sum) return total;
    sums_[d.sum] = total;
    llvm::Value* out = expr(d.store->value);
    sums_.erase(d.sum);
    return kc.last == b_.getTrue() ? out : b_.CreateSelect(kc.last, out, total);
  }

  // The sum of the lanes of each of `vectors` (of equal width), by a tree
  // that adds pairs of vectors before it adds within one: two shuffles and
  // an add halve the lanes of two vectors at once, so a 4 x 4 tile's 16
  // vectors of 16 lanes take 45 vector operations where a reduction of each
  // takes 128 (eight a vector) — in the tile's code, for every element and
  // every chunk of k, and in the code generator, which takes time per
  // instruction. A lane sum then reads as a vector holding groups of `width`
  // partial sums, group g belonging to vector ids[g] (-1: padding).
  //
  // The pairs interleave their groups, so the sums end in bit-reversed
  // order; with as many vectors as lanes they go in bit-reversed, and lane k
  // ends holding vector k's sum: a tile's row of sums is then a contiguous
  // subvector (a lane extract, not a permute), and the code generator
  // follows no permutation through the tree (7% less time on a dense stage).
  std::vector<llvm::Value*> lane_sums(std::vector<llvm::Value*> vectors) {
    struct Partial {
      llvm::Value* v;
      std::vector<int> ids;
    };
    const auto lanes = static_cast<int>(llvm::cast<llvm::FixedVectorType>(vectors.front()->getType())->getNumElements());
    const auto count = static_cast<int>(vectors.size());
    int bits = 0;
    while ((1 << bits) < count) ++bits;
    const bool reverse = count == lanes && (1 << bits) == count;
    const auto position = [&](int k) {
      if (!reverse) return k;
      int r = 0;
      for (int b = 0; b < bits; ++b) r |= ((k >> b) & 1) << (bits - 1 - b);
      return r;
    };
    std::vector<Partial> parts(vectors.size());
    for (int k = 0; k < count; ++k) parts[static_cast<std::size_t>(position(k))] = {vectors[static_cast<std::size_t>(k)], {k}};
    int width = lanes;
    // Pairs: [x.g0 | y.g0 | x.g1 | y.g1 ...] halves of each group, added.
    while (parts.size() > 1 && width > 1) {
      if (parts.size() % 2 != 0)
        parts.push_back({llvm::Constant::getNullValue(vectors.front()->getType()),
                         std::vector<int>(parts.front().ids.size(), -1)});
      std::vector<int> lo, hi;
      for (int g = 0; g < lanes / width; ++g)
        for (const int from : {0, lanes})
          for (int t = 0; t < width / 2; ++t) {
            lo.push_back(from + g * width + t);
            hi.push_back(from + g * width + width / 2 + t);
          }
      std::vector<Partial> next;
      for (std::size_t p = 0; p < parts.size(); p += 2) {
        const Partial &x = parts[p], &y = parts[p + 1];
        Partial z{b_.CreateFAdd(b_.CreateShuffleVector(x.v, y.v, lo), b_.CreateShuffleVector(x.v, y.v, hi)), {}};
        for (std::size_t g = 0; g < x.ids.size(); ++g) {
          z.ids.push_back(x.ids[g]);
          z.ids.push_back(y.ids[g]);
        }
        next.push_back(std::move(z));
      }
      parts = std::move(next);
      width /= 2;
    }
    // One vector left with groups wider than a lane: add within each group.
    for (Partial& p : parts)
      for (int step = width / 2; step >= 1; step /= 2) {
        std::vector<int> swap;
        for (int l = 0; l < lanes; ++l) swap.push_back(l ^ step);
        p.v = b_.CreateFAdd(p.v, b_.CreateShuffleVector(p.v, swap));
      }
    std::vector<llvm::Value*> sums(vectors.size());
    for (const Partial& p : parts)
      for (std::size_t g = 0; g < p.ids.size(); ++g)
        if (p.ids[g] >= 0)
          sums[static_cast<std::size_t>(p.ids[g])] = b_.CreateExtractElement(p.v, g * static_cast<std::uint64_t>(width));
    return sums;
  }

  // The tiles, inside the loops outside the row loop. [begin, end) is the
  // range of the stage's outermost loop.
  void outer_product_tiles(llvm::Value* begin, llvm::Value* end) {
    const OuterProductStage& op = *op_;
    for (const Stmt* u : op.unit) vars_[u->var.node()] = b_.getInt64(0);
    llvm::Value* n = expr(op.cols->extent);
    if (!op.rows) {
      outer_product_columns(nullptr, 1, b_.getInt64(0), n);
      return;
    }
    // [begin, end) is a range of rows, or with split_columns_, of single-row
    // tiles of columns (split_range), over every row.
    llvm::Value* rows_begin = b_.getInt64(0);
    llvm::Value* rows_end = expr(op.rows->extent);
    llvm::Value* cols_begin = b_.getInt64(0);
    llvm::Value* cols_end = n;
    if (split_columns_) {
      llvm::Value* unit = b_.getInt64(kSingleRowVectors * static_cast<std::int64_t>(tile_.lanes));
      if (begin) cols_begin = b_.CreateMul(begin, unit, "", true, true);
      if (end) cols_end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateMul(end, unit, "", true, true), n);
      if (has_few_rows(s_.kernel, op)) {
        loop(rows_begin, rows_end, [&](llvm::Value* i0) { outer_product_columns(i0, 1, cols_begin, cols_end); });
        return;
      }
    } else {
      if (begin) rows_begin = begin;
      if (end) rows_end = end;
    }
    // With enough rows, all the columns go through packed_panels; with few,
    // b is read in place.
    llvm::Value* packed = b_.CreateICmpSGE(b_.CreateSub(rows_end, rows_begin), b_.getInt64(kPackedMinRows));
    if_else(
        packed, "packed", [&] { packed_panels(rows_begin, rows_end, cols_begin, cols_end); },
        [&] {
          llvm::Value* i = stepped_loop(rows_begin, rows_end, b_.getInt64(kOuterRows), true, [&](llvm::Value* i0) {
            outer_product_columns(i0, kOuterRows, cols_begin, cols_end);
          });
          loop(i, rows_end, [&](llvm::Value* i0) { outer_product_columns(i0, 1, cols_begin, cols_end); });
        });
  }

  // Rows and vectors of columns of a packed tile (choose_packed_tile).
  int packed_rows() const { return packed_.rows; }
  int packed_vectors() const { return packed_.vectors; }

  // The packed tile for `cols` columns: 8 × 3 vectors with AVX-512 (24
  // sums, three vectors of b and one of a in 32 registers), kOuterRows × 2
  // below it (16 registers); but 8 × 2 with AVX-512 where the columns are
  // known to be a few whole pairs of vectors and no whole triples:
  // attention's 64 a head, two panels of 2 where panels of 3 would be one
  // and a partial one (BERT's p · v at 200 rows: 0.49-0.51 -> 0.45-0.46
  // ms; 12 × 2 tiles ran it in 0.65).
  void choose_packed_tile(llvm::Value* cols) {
    const auto lanes = static_cast<std::int64_t>(tile_.lanes);
    packed_ = lanes >= 16 ? PackedTile{8, 3} : PackedTile{kOuterRows, 2};
    const std::optional<std::int64_t> n = constant(cols);
    if (lanes >= 16 && n && *n < 12 * lanes && *n % (2 * lanes) == 0 && *n % (3 * lanes) != 0) packed_ = {8, 2};
  }

  // Columns [cols_begin, cols_end) of rows [rows_begin, rows_end) in panels
  // of packed_vectors (the last maybe partial), as OpenBLAS orders a GEMM
  // (packed_gemm): for each block of k (kPanelK steps) and each block of
  // kBlockFloats of b (a few panels of columns), b's rows are copied into
  // the block panel by panel, each panel contiguous (rows of b a power of
  // two apart would all fall in the same few cache sets); then each tile of
  // rows passes over every panel of the block, its rows of a read in place
  // and kept in L1 from one panel to the next, the block streaming from L2.
  // On SGEMM 1024 / 2048 (a C++ replica of the loop nest on this Xeon) 130
  // / 137 GFLOP/s with panels in L1 and 6 × 2 tiles over row blocks of a in
  // L2 (the order before), 152-165 / 159-167 this way, OpenBLAS's 159-166 /
  // 160; nimble's own code runs 5-7% below the replica (SGEMM 1008: 142-147
  // against 150-155 in one sitting), which an 8 × 3 or 7 × 3 tile, row
  // pointers walked or each its own, did not change.
  void packed_panels(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin, llvm::Value* cols_end) {
    const OuterProductStage& op = *op_;
    choose_packed_tile(expr(op.cols->extent));
    const auto lanes = static_cast<std::int64_t>(tile_.lanes);
    const te::VarNode* kv = op.k->var.node();
    const te::VarNode* col = op.cols->var.node();
    const int b_buffer = buffer_of(op.b->tensor);
    const auto pack = [&](const Panel& panel, llvm::Value* j0, llvm::Value* left) {
      const std::vector<llvm::Value*> masks = vector_masks(left, packed_vectors());  // all lanes in a whole panel
      loop(b_.getInt64(0), panel.k_size, [&](llvm::Value* kk) {
        vars_[kv] = b_.CreateAdd(panel.k_begin, kk, "", true, true);
        for (std::int64_t v = 0; v < packed_vectors(); ++v) {
          vars_[col] = plus(j0, v * lanes);
          llvm::Value* x =
              vector_load(b_buffer, element_ptr(b_buffer, flat_index(*op.b)), masks[static_cast<std::size_t>(v)]);
          b_.CreateAlignedStore(x, panel_at(panel, kk, v), llvm::Align(4 * tile_.lanes));
        }
      });
      vars_.erase(kv);
      vars_.erase(col);
    };
    packed_gemm(rows_begin, rows_end, cols_begin, cols_end, expr(op.k->extent), false, nullptr, pack,
                [&](llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left, const Panel& panel,
                    const KChunk&) { outer_product_tile(i0, mr, j0, nv, left, &panel); });
  }

  // The loop nest of packed_panels and dot_packed: for each kPanelK steps
  // of k (at least one with `one_step_at_least`: a dot-product stage's
  // output is its init with k = 0) and each block of panels of columns,
  // pack(panel, j0, left) for every panel of the block (`left` its columns,
  // at most a panel's), then tile(i0, rows,
  // j0, vectors, left, panel, chunk) for every whole tile of rows and then
  // every single row over every panel, a partial panel's tile only as many
  // vectors wide as its columns fill (by_vectors).
  template <class Pack, class Tile>
  void packed_gemm(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin, llvm::Value* cols_end,
                   llvm::Value* k, bool one_step_at_least, const DotProductStage* ahead, Pack&& pack, Tile&& tile) {
    const int mr = packed_rows(), nv = packed_vectors();
    const std::int64_t nr = nv * static_cast<std::int64_t>(tile_.lanes);
    // The block lives on the stack while this product runs, not in the
    // stage's frame: a stage's other paths (dot tiles) keep their spills
    // near their caller's frame, not past 768 KiB of it (W2's few-row
    // products 7.1 -> 7.8 us a call when the frame held the block).
    llvm::Value* const stack = b_.CreateStackSave();
    llvm::AllocaInst* block = b_.CreateAlloca(llvm::ArrayType::get(b_.getFloatTy(), static_cast<std::uint64_t>(kBlockFloats)));
    block->setAlignment(llvm::Align(64));
    // The whole block where a's rows over one block of k are many
    // (kLargeBlockMinA), else a quarter of it: a's rows then stay in L2
    // whatever the block, and a smaller block leaves more of L2 to what the
    // program reads next (W2's products of 32 and 50 rows, whose weights
    // are read again by the next level: 5-7% slower with the whole block).
    llvm::Value* a_floats = b_.CreateMul(b_.CreateSub(rows_end, rows_begin),
                                         b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, k, b_.getInt64(kPanelK)));
    llvm::Value* block_columns =
        b_.CreateSelect(b_.CreateICmpSGE(a_floats, b_.getInt64(kLargeBlockMinA)),
                        b_.getInt64(kBlockFloats / (kPanelK * nr) * nr), b_.getInt64(kBlockFloats / 4 / (kPanelK * nr) * nr));
    llvm::Value* steps = b_.CreateSDiv(plus(k, kPanelK - 1), b_.getInt64(kPanelK));
    if (one_step_at_least) steps = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, steps, b_.getInt64(1));
    loop(b_.getInt64(0), steps, [&](llvm::Value* c) {
      llvm::Value* pc = b_.CreateMul(c, b_.getInt64(kPanelK));
      llvm::Value* k_size = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.getInt64(kPanelK), b_.CreateSub(k, pc));
      const KChunk chunk{.begin = pc,
                         .size = k_size,
                         .first = b_.CreateICmpEQ(c, b_.getInt64(0)),
                         .last = b_.CreateICmpEQ(c, b_.CreateSub(steps, b_.getInt64(1))),
                         .whole_vectors = false,
                         .next_block = nullptr};
      stepped_loop(cols_begin, cols_end, block_columns, false, [&](llvm::Value* jc) {
        llvm::Value* jc_end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(jc, block_columns), cols_end);
        // Every panel, the last maybe partial, through one copy of the
        // pack: `left` its columns (nr for a whole one).
        stepped_loop(jc, jc_end, b_.getInt64(nr), false, [&](llvm::Value* j0) {
          llvm::Value* left = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(jc_end, j0), b_.getInt64(nr));
          pack(panel_in(block, jc, j0, pc, k_size), j0, left);
        });
        // b's next block (the next columns at these steps of k, else the
        // first at the next steps; past the last, this one): each whole
        // tile prefetches one of its columns' 512 steps of k, its index
        // among the block's tiles modulo the columns, a line every 16 of
        // its steps (`ahead`: dot_packed's stage, b's rows along k; a model's
        // weights come from memory, and the pack waited for them). One
        // column a tile covers half a block at 200 rows, a third at 128:
        // [200, 768] x [3072, 768]^T with its weight in no cache 6.45 ->
        // 6.03 ms (in cache: the same), W3 at 200 tokens 263 -> 255 ms;
        // two columns a tile (two prefetches a step) ran 15-20% slower.
        llvm::Value* ahead_col = nullptr;
        llvm::Value* ahead_cols = nullptr;
        llvm::Value* ahead_k = nullptr;
        llvm::Value* panels = nullptr;
        if (ahead) {
          panels = b_.CreateSDiv(plus(b_.CreateSub(jc_end, jc), nr - 1), b_.getInt64(nr));
          llvm::Value* next_jc = b_.CreateAdd(jc, block_columns);
          llvm::Value* same_k = b_.CreateICmpSLT(next_jc, cols_end);
          llvm::Value* more_k = b_.CreateICmpSLT(plus(pc, kPanelK), k);
          ahead_col = b_.CreateSelect(same_k, next_jc, b_.CreateSelect(more_k, cols_begin, jc));
          ahead_k = b_.CreateSelect(same_k, pc, b_.CreateSelect(more_k, plus(pc, kPanelK), pc));
          ahead_cols = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, block_columns,
                                                b_.CreateSub(cols_end, ahead_col));
        }
        const auto tiles_of = [&](llvm::Value* i0, int rows) {
          each_panel(jc, jc_end, nr, [&](llvm::Value* j0, llvm::Value* left) {
            Panel panel = panel_in(block, jc, j0, pc, k_size);
            if (ahead && rows == mr) {
              llvm::Value* g = b_.CreateAdd(b_.CreateMul(b_.CreateSDiv(b_.CreateSub(i0, rows_begin), b_.getInt64(mr)), panels),
                                            b_.CreateSDiv(b_.CreateSub(j0, jc), b_.getInt64(nr)));
              const te::VarNode* col = ahead->cols->var.node();
              const te::VarNode* kv = ahead->sum->axes[0].var.node();
              llvm::Value* const col_was = vars_.count(col) ? vars_.at(col) : nullptr;
              vars_[col] = b_.CreateAdd(ahead_col, b_.CreateSRem(g, ahead_cols));
              vars_[kv] = ahead_k;
              panel.ahead = element_ptr(buffer_of(ahead->b->tensor), flat_index(*ahead->b));
              vars_.erase(kv);
              if (col_was) vars_[col] = col_was; else vars_.erase(col);
            }
            by_vectors(left, nv, [&](int n) { tile(i0, rows, j0, n, left, panel, chunk); });
          });
        };
        llvm::Value* i = stepped_loop(rows_begin, rows_end, b_.getInt64(mr), true,
                                      [&](llvm::Value* i0) { tiles_of(i0, mr); });
        loop(i, rows_end, [&](llvm::Value* i0) { tiles_of(i0, 1); });
      });
    });
    b_.CreateStackRestore(stack);
  }

  // n vector sums, zero (promoted to registers by LLVM).
  std::vector<llvm::AllocaInst*> zeroed_sums(int n) {
    std::vector<llvm::AllocaInst*> sums;
    for (int s = 0; s < n; ++s) {
      sums.push_back(local(vector_));
      b_.CreateStore(llvm::Constant::getNullValue(vector_), sums.back());
    }
    return sums;
  }

  // One step of an outer-product tile: sums[r × |bv| + v] += av[r] (on every
  // lane) × bv[v].
  void add_outer_products(const std::vector<llvm::AllocaInst*>& sums, const std::vector<llvm::Value*>& av,
                          const std::vector<llvm::Value*>& bv) {
    for (std::size_t r = 0; r < av.size(); ++r) {
      llvm::Value* a = b_.CreateVectorSplat(tile_.lanes, av[r]);
      for (std::size_t v = 0; v < bv.size(); ++v) {
        llvm::AllocaInst* sum = sums[r * bv.size() + v];
        b_.CreateStore(b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vector_}, {a, bv[v], b_.CreateLoad(vector_, sum)}),
                       sum);
      }
    }
  }

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

  RowWalk row_walk(const te::LoadNode& a, const te::VarNode* row, const te::VarNode* k, llvm::Value* i0,
                   llvm::Value* k_begin, int rows) {
    vars_[k] = k_begin;
    vars_[row] = i0;
    llvm::Value* first = flat_index(a);
    // The steps of a's index along the rows and along k (1 where k is its
    // last dim; a transposed a's rows are its columns).
    const auto stride_along = [&](const te::VarNode* var, llvm::Value* at) {
      if (llvm::Value* c = constant_stride(a, var)) return c;
      vars_[var] = plus(at, 1);
      llvm::Value* next = flat_index(a);
      vars_[var] = at;
      return b_.CreateSub(next, first);
    };
    llvm::Value* stride = stride_along(row, i0);
    RowWalk walk{.a = &a, .bases = {}, .k_begin = k_begin, .k_stride = stride_along(k, k_begin)};
    llvm::Value* p = element_ptr(buffer_of(a.tensor), first);
    for (int r = 0; r < rows; ++r) {
      if (r > 0) p = b_.CreateGEP(b_.getFloatTy(), p, stride);
      walk.bases.push_back(p);
    }
    vars_[row] = i0;
    return walk;
  }

  // a's index's step from `var` to var + 1 where the dims after var's are
  // static (BERT's [n, 768] along its rows): the builder folds it with
  // every other var of the index at 0 (the walk takes the index as linear
  // in its rows and in k).
  llvm::Value* constant_stride(const te::LoadNode& a, const te::VarNode* var) {
    if (a.checked) return nullptr;
    std::unordered_map<const te::VarNode*, llvm::Value*> saved;
    const std::function<void(const Expr&)> zero = [&](const Expr& e) {
      if (const auto* v = e.as<te::VarNode>(); v && v != var && !saved.contains(v)) {
        const auto it = vars_.find(v);
        saved[v] = it == vars_.end() ? nullptr : it->second;
        vars_[v] = b_.getInt64(0);
      }
      te::for_each_child(e, zero);
    };
    for (const Expr& i : a.indices) zero(i);
    llvm::Value* const was = vars_.at(var);
    vars_[var] = b_.getInt64(1);
    llvm::Value* next = flat_index(a);
    vars_[var] = b_.getInt64(0);
    llvm::Value* stride = llvm::dyn_cast<llvm::ConstantInt>(b_.CreateSub(next, flat_index(a)));
    vars_[var] = was;
    for (const auto& [v, value] : saved) {
      if (value) vars_[v] = value;
      else vars_.erase(v);
    }
    return stride;
  }

  // The panel of columns from j0 in a block of packed panels (`block`,
  // kBlockFloats) whose columns start at jc, for k in [pc, pc + k_size):
  // kPanelK steps of packed_vectors apart.
  Panel panel_in(llvm::Value* block, llvm::Value* jc, llvm::Value* j0, llvm::Value* pc, llvm::Value* k_size) {
    const std::int64_t nr = packed_vectors() * static_cast<std::int64_t>(tile_.lanes);
    return Panel{.data = b_.CreateInBoundsGEP(b_.getFloatTy(), block, b_.CreateMul(b_.CreateSub(j0, jc), b_.getInt64(kPanelK))),
                 .k_begin = pc,
                 .k_size = k_size,
                 .step = nr};
  }

  // Every panel of nr columns of [jc, jc_end): each(j0, left), left null for
  // a whole panel, else the columns of the last, partial one (padded with
  // zeros when packed, masked when stored).
  template <class Each>
  void each_panel(llvm::Value* jc, llvm::Value* jc_end, std::int64_t nr, Each&& each) {
    llvm::Value* j = stepped_loop(jc, jc_end, b_.getInt64(nr), true, [&](llvm::Value* j0) { each(j0, nullptr); });
    stepped_loop(j, jc_end, b_.getInt64(nr), false, [&](llvm::Value* j0) { each(j0, b_.CreateSub(jc_end, j0)); });
  }

  // body(n) for a panel of nv vectors of columns: n = nv for a whole panel
  // (no `left`), else as many vectors as its `left` columns fill, so that
  // the tile of a partial panel computes no vector of padding (attention's
  // q · k^T at 200 rows has 4 whole panels and one of 8 columns: 0.58 ->
  // 0.48 ms; its p · v's 64 columns a panel of 3 vectors and one of 1:
  // 0.63 -> 0.49).
  template <class Body>
  void by_vectors(llvm::Value* left, int nv, Body&& body) {
    if (!left) {
      body(nv);
      return;
    }
    llvm::BasicBlock* done = llvm::BasicBlock::Create(c_, "vectors.done", fn_);
    for (int n = 1; n < nv; ++n) {
      llvm::BasicBlock* these = llvm::BasicBlock::Create(c_, "vectors", fn_);
      llvm::BasicBlock* more = llvm::BasicBlock::Create(c_, "vectors.more", fn_);
      b_.CreateCondBr(b_.CreateICmpSLE(left, b_.getInt64(n * static_cast<std::int64_t>(tile_.lanes))), these, more);
      b_.SetInsertPoint(these);
      body(n);
      b_.CreateBr(done);
      b_.SetInsertPoint(more);
    }
    body(nv);
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // With `left` (columns in range, fewer than nv vectors' lanes), the mask
  // of each of nv vectors' lanes below left - v * lanes; without, none.
  std::vector<llvm::Value*> vector_masks(llvm::Value* left, int nv) {
    const auto lanes = static_cast<std::int64_t>(tile_.lanes);
    std::vector<llvm::Value*> masks(static_cast<std::size_t>(nv), nullptr);
    if (left)
      for (int v = 0; v < nv; ++v)
        masks[static_cast<std::size_t>(v)] = lanes_below(b_.CreateBinaryIntrinsic(
            llvm::Intrinsic::smax, b_.getInt64(0),
            b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(left, b_.getInt64(v * lanes)), b_.getInt64(lanes))));
    return masks;
  }

  // Vector v of step kk of a panel.
  llvm::Value* panel_at(const Panel& panel, llvm::Value* kk, std::int64_t v) {
    const auto lanes = static_cast<std::int64_t>(tile_.lanes);
    return b_.CreateInBoundsGEP(b_.getFloatTy(), panel.data,
                                b_.CreateAdd(b_.CreateMul(kk, b_.getInt64(panel.step)), b_.getInt64(v * lanes)));
  }

  // Tiles of rows from i0 over columns [from, n), reading b in place.
  void outer_product_columns(llvm::Value* i0, int mr, llvm::Value* from, llvm::Value* n) {
    const auto lanes = static_cast<std::int64_t>(tile_.lanes);
    // A single row goes four vectors at a time first: each step of k then
    // reads 256 contiguous bytes of b's row, not 128, and a matrix-vector
    // product streams b in half as many passes ([1, 768] x [768, 768]: 33
    // -> 28 us, as fast as OpenBLAS's).
    llvm::Value* j = from;
    if (mr == 1)
      j = stepped_loop(j, n, b_.getInt64(kSingleRowVectors * lanes), true,
                       [&](llvm::Value* j0) { outer_product_tile(i0, 1, j0, kSingleRowVectors, nullptr); });
    j = stepped_loop(j, n, b_.getInt64(2 * lanes), true,
                     [&](llvm::Value* j0) { outer_product_tile(i0, mr, j0, 2, nullptr); });
    // Fewer than two vectors left: one masked vector at a time (one tile
    // variant less to compile; these columns are few).
    stepped_loop(j, n, b_.getInt64(lanes), false, [&](llvm::Value* j0) {
      llvm::Value* left = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(n, j0), b_.getInt64(lanes));
      outer_product_tile(i0, mr, j0, 1, left);
    });
  }

  // The mask of the lanes below `count` (0 <= count <= lanes) of a vector of
  // `lanes` (default: the tile's).
  llvm::Value* lanes_below(llvm::Value* count, unsigned lanes = 0) {
    if (lanes == 0) lanes = tile_.lanes;
    std::vector<llvm::Constant*> lane_index;
    for (unsigned n = 0; n < lanes; ++n) lane_index.push_back(b_.getInt32(n));
    return b_.CreateICmpULT(llvm::ConstantVector::get(lane_index),
                            b_.CreateVectorSplat(lanes, b_.CreateTrunc(count, b_.getInt32Ty())));
  }

  // mr rows from i0 × nv vectors of columns from j0 (with `left`, only the
  // first `left` of them, fewer than nv vectors), over all of k from b in place, or
  // over a panel's block of k from the panel. In place, k goes in blocks of
  // kPanelK as in a panel, each block's sums added to the output: every
  // element then rounds alike whether its columns were packed or not, so
  // that where a thread's share of columns ends does not change its bits.
  void outer_product_tile(llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left,
                          const Panel* panel = nullptr) {
    if (panel) {
      outer_product_sums(i0, mr, j0, nv, left, panel->k_begin, panel->k_size, panel);
      return;
    }
    llvm::Value* k = expr(op_->k->extent);
    stepped_loop(b_.getInt64(0), k, b_.getInt64(kPanelK), false, [&](llvm::Value* kb) {
      outer_product_sums(i0, mr, j0, nv, left, kb,
                         b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.getInt64(kPanelK), b_.CreateSub(k, kb)), nullptr);
    });
  }

  // The tile's sums over k in [k_begin, k_begin + k_size), added to the output.
  void outer_product_sums(llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left, llvm::Value* k_begin,
                          llvm::Value* k_size, const Panel* panel) {
    const OuterProductStage& op = *op_;
    const te::VarNode* row = op.rows ? op.rows->var.node() : nullptr;
    const te::VarNode* col = op.cols->var.node();
    const te::VarNode* kv = op.k->var.node();
    const int b_buffer = buffer_of(op.b->tensor), out = op.store->buffer;
    const auto lanes = static_cast<std::int64_t>(tile_.lanes);
    const std::vector<llvm::Value*> masks = vector_masks(left, nv);
    const auto vector_at = [&](int buffer, llvm::Value* p, llvm::Value* value, llvm::Value* mask) -> llvm::Value* {
      llvm::Instruction* access = nullptr;
      if (value && mask)
        access = b_.CreateMaskedStore(value, p, llvm::Align(4), mask);
      else if (value)
        access = b_.CreateAlignedStore(value, p, llvm::Align(4));
      else if (mask)
        access = b_.CreateMaskedLoad(vector_, p, llvm::Align(4), mask, llvm::Constant::getNullValue(vector_));
      else
        access = b_.CreateAlignedLoad(vector_, p, llvm::Align(4));
      annotate(access, buffer);
      return access;
    };
    const std::vector<llvm::AllocaInst*> acc = zeroed_sums(mr * nv);
    // A packed panel's tile adds to output rows that large products (SGEMM's
    // 2048: 16 MiB) keep in L3 at best: their lines are fetched while the
    // tile sums, not when it adds.
    if (panel && !left)
      for (int r = 0; r < mr; ++r) {
        if (row) vars_[row] = plus(i0, r);
        for (int v = 0; v < nv; ++v) {
          vars_[col] = plus(j0, v * lanes);
          b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ptr_},
                             {element_ptr(out, expr(op.store->index)), b_.getInt32(1), b_.getInt32(3), b_.getInt32(1)});
        }
      }
    const RowWalk a_rows = row ? row_walk(*op.a, row, kv, i0, k_begin, mr) : RowWalk{};
    loop(b_.getInt64(0), k_size, [&](llvm::Value* kk) {
      vars_[kv] = b_.CreateAdd(k_begin, kk, "", true, true);
      std::vector<llvm::Value*> bv;
      for (int v = 0; v < nv; ++v) {
        vars_[col] = plus(j0, v * lanes);
        bv.push_back(panel ? b_.CreateAlignedLoad(vector_, panel_at(*panel, kk, v), llvm::Align(4 * tile_.lanes))
                           : vector_at(b_buffer, element_ptr(b_buffer, flat_index(*op.b)), nullptr, masks[static_cast<std::size_t>(v)]));
      }
      add_outer_products(acc, row ? a_rows.step(*this, vars_[kv]) : std::vector<llvm::Value*>{load(*op.a)}, bv);
    });
    vars_.erase(kv);
    for (int r = 0; r < mr; ++r) {
      if (row) vars_[row] = plus(i0, r);
      for (int v = 0; v < nv; ++v) {
        vars_[col] = plus(j0, v * lanes);
        llvm::Value* p = element_ptr(out, expr(op.store->index));
        llvm::Value* mask = masks[static_cast<std::size_t>(v)];
        vector_at(out, p, b_.CreateFAdd(vector_at(out, p, nullptr, mask), b_.CreateLoad(vector_, acc[static_cast<std::size_t>(r * nv + v)])), mask);
      }
    }
    if (row) vars_.erase(row);
    vars_.erase(col);
  }

  llvm::Value* plus(llvm::Value* v, std::int64_t n) { return n == 0 ? v : b_.CreateAdd(v, b_.getInt64(n), "", true, true); }

  // Steps of k a packed block spans: each tile's sums go to the output once
  // per kPanelK. 512 against 256, three runs alternated: SGEMM 1024
  // 140-142 -> 148-155 GFLOP/s, 2048 142-148 -> 141-151, BERT's [200, 3072]
  // x [768, 3072]^T 144-149 -> 145-148, [128, 768] x [3072, 768]^T 135-136
  // -> 136-139 (384: between the two).
  static constexpr std::int64_t kPanelK = 512;
  // A block of packed panels of b: 768 KiB (eight panels of 48 columns with
  // AVX-512) on the stack, in L2 (2 MiB here) while the tiles of rows pass
  // over it. A tile's rows of a come from L3 where a's rows of one block of
  // k are more than L2 holds (SGEMM 1024: 2 MiB) and are then read from L1
  // for each panel of the block: the more panels, the fewer times a comes
  // from L3. On a Xeon with two 512-bit FMA ports (the replica's 8 x 3 tile
  // at 189 GFLOP/s over a in L2, 165-175 over a in L3), two panels against
  // four and eight, alternated: SGEMM 1024 13.6 -> 12.9 / 12.2 ms, 2048
  // 107-110 -> 100-104 / 98-100 ms, BERT's [128, 768] x [768, 768]^T 1.03
  // -> 0.94 / 0.97 ms; W3 alike. (Where one FMA port was the limit, three
  // panels ran as two.) A product with few rows of a takes a quarter of it
  // (kLargeBlockMinA). Within the stacks threads get by default (8 MiB,
  // oneTBB's workers 4 MiB).
  static constexpr std::int64_t kBlockFloats = 192 * 1024;
  // The floats of a's rows over one block of k from which a packed product
  // takes the whole block (256 KiB: BERT's 128 rows x 512 steps and more).
  static constexpr std::int64_t kLargeBlockMinA = 64 * 1024;
  // Rows below which copying all of b into panels costs more than it saves
  // (four tiles of six rows; measured on BERT's shapes: at 16 rows it lost,
  // at 24 and more it won).
  static constexpr std::int64_t kPackedMinRows = 4 * kOuterRows;
  // Rows from which a dot-product stage runs as dot_packed: at 64 rows the
  // packing of b, read once from memory or L3 (BERT's weights are in no
  // cache when their layer runs; dot tiles prefetch them), cost what the
  // tiles saved (W3 at 64: 97-103 ms as dot tiles, 103-110 packed).
  static constexpr std::int64_t kPackedDotMinRows = 96;
  // ... and from 24 rows (three tiles) where b is at most 1 MiB, which its
  // packing then reads from L2 or L3 (W2's products: [32, 300] x [750,
  // 300]^T 0.150 -> 0.116 ms, [50, 300] x [450, 300]^T 0.136 -> 0.110, at
  // 24 rows 0.113 -> 0.097; at 19, 0.050 -> 0.056, no better).
  static constexpr std::int64_t kPackedSmallDotMinRows = 24;
  static constexpr std::int64_t kPackedSmallDotFloats = 256 * 1024;

  // Floats of b one column block spans (its rows × K, or × kDotChunk): 192
  // KiB, within L2.
  static constexpr std::int64_t kColumnBlockFloats = 48 * 1024;
  // The longest range of k a dot-product tile sums over at once, a multiple
  // of every vector width: over it a tile's rows of a and of b (4 + 4 rows ×
  // 1024 floats with AVX-512, 32 KiB; 4 + 3 below it, 28 KiB) fit L1 (48
  // KiB on this machine, 32 KiB on the AVX2 ones).
  static constexpr std::int64_t kDotChunk = 1024;

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
  // Accumulators (vectors an iteration) of vector_reduce's main loop.
  static constexpr int kReduceVectors = 4;
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

llvm::Function* declare(llvm::Module& m, const std::string& name, std::vector<llvm::Type*> params) {
  llvm::LLVMContext& c = m.getContext();
  auto* type = llvm::FunctionType::get(llvm::Type::getInt32Ty(c), params, false);
  llvm::Function* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, m);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  for (unsigned i = 0; i < 4 && i < params.size(); ++i)
    if (params[i]->isPointerTy()) f->addParamAttr(i, llvm::Attribute::NoAlias);
  return f;
}

// The range [0, extent) a stage's function takes [begin, end) of, which the
// runtime splits across threads, in steps of `unit` iterations: its
// outermost loop, but a dot-product stage with no loops outside its rows
// splits its columns, in whole column tiles: each thread then reads its
// share of b and all of a (rows would have every thread read all of b, the
// weights, for a few rows each), and with a number of columns that is a
// multiple of the tile's, no thread has a partial tile; so does an
// outer-product stage of fewer rows than a tile or of many columns
// (splits_columns), in whole single-row tiles (whole panels).
struct SplitRange {
  const Expr* extent;
  std::int64_t unit = 1;
};

SplitRange split_range(const KernelIR& kernel, const Stage& stage, const CpuEmitOptions& options) {
  if (stage.product_tiles) return {&stage.tiles};
  if (stage.vector_elements > 1) return {&stage.body->extent, stage.vector_elements};
  if (!options.register_tiles) return {&stage.body->extent};
  if (const std::optional<DotProductStage> dot = match_dot_product(kernel, stage); dot && dot->outer.empty())
    return {&dot->cols->extent, dot_tile(options.vector_bits).cols};
  if (const std::optional<OuterProductStage> op = match_outer_product(kernel, stage); op && splits_columns(kernel, *op))
    return {&op->cols->extent, kSingleRowVectors * static_cast<std::int64_t>(dot_tile(options.vector_bits).lanes)};
  return {&stage.body->extent};
}

// The prologue is a chain of a few dozen compares and stores, run once a
// call: its code is generated unoptimized (optnone: LLVM's fast instruction
// selector; the JIT still runs its short IR pipeline over it, which folds
// the repeated loads, so the code stays tight), which costs it a few
// instructions a call and saves 0.6-1 ms of each kernel's compilation
// (instruction selection and its DAG per block cost ~50x the fast
// selector's on such code).
void emit_prologue(ModuleState& state, llvm::Function* fn, const CpuEmitOptions& options) {
  fn->addFnAttr(llvm::Attribute::OptimizeNone);
  fn->addFnAttr(llvm::Attribute::NoInline);
  const KernelIR& k = state.kernel;
  FunctionEmitter e(state, fn, true);
  llvm::IRBuilder<>& b = e.builder();
  // A specialized kernel's bucket first: every other expression may use it.
  for (const KernelIR::Binding& binding : k.bindings) {
    if (binding.bucket == DimBucket{}) continue;
    e.fail_if(e.outside(e.dim_of(binding.buffer, binding.dim), binding.bucket),
              {.kind = ErrorKind::runtime_error,
               .text = fmt::format("{}: the kernel specialized for {} dim {} in {} was called with another "
                                   "shape",
                                   k.name,
                                   k.buffers[static_cast<std::size_t>(binding.buffer)].tensor.name(),
                                   binding.dim, Bucket{{binding.bucket}}.to_string())},
              {});
  }
  for (const auto& check : k.input_dims) {
    llvm::Value* actual = e.dim_of(check.buffer, check.dim);
    llvm::Value* expected = e.expr(check.expected);
    llvm::Value* info[] = {expected};
    e.fail_if(b.CreateICmpNE(actual, expected),
              {.form = ErrorSite::Form::input_dim, .kind = ErrorKind::invalid_argument,
               .text = te::to_string(check.expected), .buffer = check.buffer, .dim = check.dim},
              info);
  }
  // The rules' checks before the output dims, as the evaluator orders them:
  // inputs that do not fit fail with the rule's message.
  for (const KernelCheck& check : k.checks)
    e.fail_if(b.CreateNot(e.expr(check.condition)), {.kind = check.kind, .text = check.message}, {});
  for (const auto& check : k.output_dims) {
    llvm::Value* expected = e.expr(check.expected);
    llvm::Value* info[] = {expected};
    e.fail_if(b.CreateICmpNE(e.dim_of(check.buffer, check.dim), expected),
              {.form = ErrorSite::Form::output_dim, .kind = ErrorKind::runtime_error,
               .text = te::to_string(check.expected), .buffer = check.buffer, .dim = check.dim},
              info);
  }
  llvm::Value* sched = e.arg(3);
  std::uint64_t slot = 0;
  const auto put = [&](llvm::Value* v) {
    b.CreateStore(v, b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), sched, slot++));
  };
  for (const Stage& s : k.stages) {
    const SplitRange split = split_range(k, s, options);
    llvm::Value* extent = e.expr(*split.extent);
    if (split.unit > 1)  // whole steps, the last one partial
      extent = b.CreateUDiv(b.CreateAdd(extent, b.getInt64(split.unit - 1)), b.getInt64(split.unit));
    put(extent);
    put(e.expr(s.work));
  }
  for (const Buffer& buffer : k.buffers)
    if (buffer.role == Buffer::Role::temp) put(e.expr(te::product(buffer.tensor.shape())));
  b.CreateRet(b.getInt32(0));
}

// Whether `e` computes lane by lane in a vector loop over `var` in [0,
// `extent`): every load reads a 1-d view as long as the loop at `var` itself
// (a flat stage's contiguous element) or a static row at var + c
// (contiguous_at_offset): in range for every lane in the mask, so a load in
// a select's arm may be speculated. `var` is read nowhere
// else, and nothing can fail or needs a loop: no reduction, no checked op,
// no integer division, remainder or power (which x86 has no vector
// instructions for either).
bool contiguous_at_offset(const te::LoadNode& l, const te::VarNode* var, const Expr& extent);

bool lane_wise(const Expr& e, const te::VarNode* var, const Expr& extent) {
  switch (e.kind()) {
    case ExprKind::load: {
      const auto* l = e.as<te::LoadNode>();
      if (l->checked) return false;
      if (l->indices.size() == 1 && l->indices[0].as<te::VarNode>() == var && l->tensor.ndim() == 1 &&
          te::provably_equal(l->tensor.shape()[0], extent))
        return true;
      return contiguous_at_offset(*l, var, extent);
    }
    case ExprKind::reduce: return false;
    case ExprKind::var: return e.as<te::VarNode>() != var;
    case ExprKind::binary: {
      if (!has_vector_instructions(*e.as<te::BinaryNode>())) return false;
      break;
    }
    default: break;
  }
  bool ok = true;
  te::for_each_child(e, [&](const Expr& child) { ok = ok && lane_wise(child, var, extent); });
  return ok;
}

// Whether `l` reads element var + c of a row of a static buffer (split's
// parts, a slice): every index but the last a constant, the last var or
// var + c, with the dims, c and the loop's extent constants that keep every
// iteration's element in its row.
bool contiguous_at_offset(const te::LoadNode& l, const te::VarNode* var, const Expr& extent) {
  const std::vector<Expr>& shape = l.tensor.shape();
  const std::optional<std::int64_t> n = te::as_int(extent);
  if (l.indices.empty() || !n) return false;
  for (std::size_t d = 0; d + 1 < l.indices.size(); ++d) {
    const std::optional<std::int64_t> i = te::as_int(l.indices[d]);
    const std::optional<std::int64_t> dim = te::as_int(shape[d]);
    if (!i || !dim || *i < 0 || *i >= *dim) return false;
  }
  const Expr& last = l.indices.back();
  std::optional<std::int64_t> offset = last.as<te::VarNode>() == var ? std::optional<std::int64_t>(0) : std::nullopt;
  if (const auto* add = last.as<te::BinaryNode>(); add && add->op == BinaryOp::add) {
    if (add->a.as<te::VarNode>() == var) offset = te::as_int(add->b);
    if (add->b.as<te::VarNode>() == var) offset = te::as_int(add->a);
  }
  const std::optional<std::int64_t> row = te::as_int(shape.back());
  return offset && row && *offset >= 0 && *offset + *n <= *row;
}

// About how many instructions `e` emits (an expanded transcendental,
// math.hpp, is a few dozen), counted up to `limit`: the walk stops there (a
// fused body's subexpressions may be shared, and are counted each time).
int emitted_size(const Expr& e, int limit) {
  int size = 1;
  if (const auto* u = e.as<te::UnaryNode>()) {
    switch (u->op) {
      case UnaryOp::exp:
      case UnaryOp::log:
      case UnaryOp::tanh:
      case UnaryOp::sigmoid:
      case UnaryOp::erf: size = 30; break;
      case UnaryOp::rsqrt: size = 2; break;  // 1 / sqrt(x)
      default: break;
    }
  } else if (const auto* b = e.as<te::BinaryNode>(); b && (b->op == BinaryOp::pow || b->op == BinaryOp::rem)) {
    size = is_floating(b->a.dtype()) ? 60 : 1;
  }
  te::for_each_child(e, [&](const Expr& child) {
    if (size < limit) size += emitted_size(child, limit - size);
  });
  return size;
}

constexpr std::int64_t kShortVectorLoop = 4096;

// The stage's loop when it is a flat element-wise stage a vector loop
// should compute: one loop whose body stores element `var` of its buffer
// from a lane-wise value of at least `min_size` (CpuEmitOptions), or of any
// size when the loop is short.
const Stmt* vector_loop_stage(const Stage& stage, int min_size) {
  const Stmt& loop = *stage.body;
  if (loop.kind != Stmt::Kind::loop || loop.body->kind != Stmt::Kind::store) return nullptr;
  const te::VarNode* var = loop.var.node();
  const Stmt& store = *loop.body;
  if (store.index.as<te::VarNode>() != var || !lane_wise(store.value, var, loop.extent)) return nullptr;
  // A short loop of known length (split's parts, a slice of a few hundred
  // floats) runs a few hundred cycles either way, and as one vector body
  // its kernel compiles in a quarter to a third less time than as LLVM's
  // three loops (W1's and W2's splits).
  const std::optional<std::int64_t> n = te::as_int(loop.extent);
  if (!(n && *n <= kShortVectorLoop) && emitted_size(store.value, min_size) < min_size) return nullptr;
  return &loop;
}

void emit_stage(ModuleState& state, llvm::Function* fn, const Stage& stage, const CpuEmitOptions& options) {
  FunctionEmitter e(state, fn, false);
  e.stage_name = stage.name;
  const std::optional<DotProductStage> dot =
      options.register_tiles ? match_dot_product(state.kernel, stage) : std::nullopt;
  const std::optional<OuterProductStage> op =
      options.register_tiles && !dot ? match_outer_product(state.kernel, stage) : std::nullopt;
  const Stmt* vector = options.vector_loops && !dot && !op
                           ? vector_loop_stage(stage, options.vector_loop_min_size)
                           : nullptr;
  if (options.vector_loops) e.vectorize_rows(options.vector_bits / 32, options.vector_loop_min_size);
  // A tile's threads share no reduction: its sums are the tile's own.
  if (stage.lanes > 1) e.run_threads(options.gpu, stage.product_tiles ? 1 : stage.lanes);
  if (vector || dot || op) fn->addFnAttr(kExplicitVectorsAttribute);
  // A stage left to LLVM's loop vectorizer (no tiles, no vector loop of its
  // own: a cell's math over slices of its gates) gets the width the tiles
  // use: on an AVX-512 host LLVM would pick 256-bit vectors, half the lanes
  // of the products beside it (W2's leaf cells 4.4 -> 2.9 us, its level
  // cells 2.1 -> 1.7; W2 at 19 leaves 3% faster in one sitting, W1 and W3
  // within noise).
  if (!(vector || dot || op) && options.vector_bits >= 512)
    fn->addFnAttr("prefer-vector-width", std::to_string(options.vector_bits));
  if (stage.product_tiles) {
    const std::optional<TiledProduct> tiled = match_tiled_product(state.kernel, stage);
    NIMBLE_ASSERT(tiled.has_value(), "a stage of product tiles is a dot or an outer product");
    e.gpu_product_tiles(*tiled, e.arg(3), e.arg(4));
  } else if (stage.vector_elements > 1) {
    e.gpu_element_groups(*stage.body, stage.vector_elements, e.arg(3), e.arg(4));
  } else if (vector)
    e.vector_loop(*vector, options.vector_bits / 32, e.arg(3), e.arg(4));
  else if (dot)
    e.dot_product_stage(*dot, dot_tile(options.vector_bits), e.arg(3), e.arg(4));
  else if (op)
    e.outer_product_stage(*op, dot_tile(options.vector_bits).lanes, splits_columns(state.kernel, *op), e.arg(3),
                          e.arg(4));
  else
    e.stmt(*stage.body, e.arg(3), e.arg(4));
  e.builder().CreateRet(e.builder().getInt32(0));
}

}  // namespace

EmittedKernel emit_cpu_kernel(const KernelIR& kernel, llvm::LLVMContext& context,
                              const std::string& symbol_prefix, const CpuEmitOptions& options) {
  EmittedKernel out;
  out.module = std::make_unique<llvm::Module>(symbol_prefix, context);
  llvm::Module& m = *out.module;
  ModuleState state{kernel, m, out.errors, {}, {}};
  llvm::MDBuilder md(context);
  llvm::MDNode* domain = md.createAnonymousAliasScopeDomain(kernel.name);
  std::vector<llvm::Metadata*> scopes;
  for (std::size_t k = 0; k < kernel.buffers.size(); ++k) {
    llvm::MDNode* scope = md.createAnonymousAliasScope(domain, kernel.buffers[k].tensor.name());
    scopes.push_back(scope);
    state.scope.push_back(llvm::MDNode::get(context, {scope}));
  }
  for (std::size_t k = 0; k < kernel.buffers.size(); ++k) {
    std::vector<llvm::Metadata*> others;
    for (std::size_t j = 0; j < scopes.size(); ++j)
      if (j != k) others.push_back(scopes[j]);
    state.noalias.push_back(llvm::MDNode::get(context, others));
  }
  if (options.x86_avx512) m.addModuleFlag(llvm::Module::Warning, kX86Avx512Flag, 1);
  llvm::Type* ptr = llvm::PointerType::getUnqual(context);
  llvm::Type* i64 = llvm::Type::getInt64Ty(context);
  out.prologue = symbol_prefix + "_prologue";
  emit_prologue(state, declare(m, out.prologue, {ptr, ptr, ptr, ptr}), options);
  for (std::size_t s = 0; s < kernel.stages.size(); ++s) {
    out.stages.push_back(fmt::format("{}_stage{}", symbol_prefix, s));
    emit_stage(state, declare(m, out.stages.back(), {ptr, ptr, ptr, i64, i64}), kernel.stages[s], options);
  }
  return out;
}

}  // namespace nimble::codegen
