// The kernel's entry: a function's entry block and arguments, the
// assumptions a stage makes of the buckets and the exits a failed check
// takes (FunctionEmitter's constructor, outside, assume, dim_of, fail_if);
// the prologue; which schedule each stage is emitted with and the range its
// threads split (split_range, splits_columns); and emit_cpu_kernel, which
// emits a whole kernel's module.
#include "codegen/llvm/function_emitter.hpp"

namespace nimble::codegen {

namespace detail {

namespace {

// The value `extent` has in every call of the kernel: a constant, or a Var
// the kernel's bucket makes exact (a specialized kernel's).
std::optional<std::int64_t> fixed_value(const KernelIR& kernel, const te::Expr& extent) {
  if (const std::optional<std::int64_t> c = te::as_int(extent)) return c;
  for (const KernelIR::Binding& b : kernel.bindings)
    if (b.var.same_as(extent) && b.bucket.exact >= 0) return b.bucket.exact;
  return std::nullopt;
}

}  // namespace

// Whether an outer-product stage has fewer rows than a tile in every call
// (a kernel specialized for [1, k] x [k, n]): its rows go one at a time.
bool has_few_rows(const KernelIR& kernel, const OuterProductStage& op) {
  const std::optional<std::int64_t> rows = fixed_value(kernel, op.rows->extent);
  return rows && *rows < kOuterRows;
}

FunctionEmitter::FunctionEmitter(ModuleState& state, llvm::Function* fn, bool prologue)
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
llvm::Value* FunctionEmitter::outside(llvm::Value* value, const DimBucket& bucket) {
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
void FunctionEmitter::assume(llvm::Value* value, const DimBucket& bucket) {
  if (bucket.multiple > 1)
    b_.CreateAssumption(b_.CreateICmpEQ(b_.CreateAnd(value, b_.getInt64(bucket.multiple - 1)), b_.getInt64(0)));
  if (bucket.min > 0) b_.CreateAssumption(b_.CreateICmpSGE(value, b_.getInt64(bucket.min)));
  if (bucket.max < std::numeric_limits<std::int64_t>::max())
    b_.CreateAssumption(b_.CreateICmpSLE(value, b_.getInt64(bucket.max)));
}

llvm::Value* FunctionEmitter::dim_of(int buffer, int d) {
  llvm::Value* dims = b_.CreateLoad(ptr_, b_.CreateConstInBoundsGEP1_64(ptr_, dims_, static_cast<std::uint64_t>(buffer)));
  return b_.CreateLoad(i64_, b_.CreateConstInBoundsGEP1_64(i64_, dims, static_cast<std::uint64_t>(d)));
}

// Leaves the function with the code of `site` (and `info`) when `failed`.
void FunctionEmitter::fail_if(llvm::Value* failed, ErrorSite site, std::span<llvm::Value* const> info) {
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

namespace {

// Sized so that the sums and one vector of each row fit the registers: 16
// vector registers below AVX-512 (4 × 3 sums, one vector of a and three of
// b: no spills; on W3 at L = 64, 4 × 3 ran in 185 ms, 2 × 4 in 194, 4 × 4 in
// 250, 3 × 4 in 301), 32 with it.
DotTile dot_tile(unsigned vector_bits) {
  if (vector_bits >= 512) return {16, 4, 4};
  return {std::max(4u, vector_bits / 32), 4, 3};
}

// Rows up to which an outer-product stage with many columns splits them
// across threads (splits_columns): up to SGEMM 1024's 512 rows a thread.
constexpr std::int64_t kSplitColumnsMaxRows = 516;

// The least value `extent` has in any call of the kernel: a constant, or
// the least of its Var's bucket (a specialized kernel's).
std::int64_t least_value(const KernelIR& kernel, const te::Expr& extent) {
  if (const std::optional<std::int64_t> c = te::as_int(extent)) return *c;
  for (const KernelIR::Binding& b : kernel.bindings)
    if (b.var.same_as(extent)) return b.bucket.exact >= 0 ? b.bucket.exact : b.bucket.min;
  return 0;
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

}  // namespace detail

EmittedKernel emit_cpu_kernel(const KernelIR& kernel, llvm::LLVMContext& context,
                              const std::string& symbol_prefix, const CpuEmitOptions& options) {
  EmittedKernel out;
  out.module = std::make_unique<llvm::Module>(symbol_prefix, context);
  llvm::Module& m = *out.module;
  detail::ModuleState state{kernel, m, out.errors, {}, {}};
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
  detail::emit_prologue(state, detail::declare(m, out.prologue, {ptr, ptr, ptr, ptr}), options);
  for (std::size_t s = 0; s < kernel.stages.size(); ++s) {
    out.stages.push_back(fmt::format("{}_stage{}", symbol_prefix, s));
    detail::emit_stage(state, detail::declare(m, out.stages.back(), {ptr, ptr, ptr, i64, i64}), kernel.stages[s], options);
  }
  return out;
}

}  // namespace nimble::codegen
