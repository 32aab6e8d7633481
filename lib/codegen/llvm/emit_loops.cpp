// Loops: a stage's loop nest (stmt), its innermost loops made branch-free
// where their branches do not depend on the loop variable (innermost_loop:
// versions per select arm, index checks hoisted), and loops as explicit
// vectors with a masked last iteration (vector_loop, vector_loop_stage,
// lane_wise).
#include "codegen/llvm/function_emitter.hpp"

#include "codegen/expr_cost.hpp"

namespace nimble::codegen::detail {

namespace {

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

}  // namespace

void FunctionEmitter::stmt(const Stmt& s, llvm::Value* begin, llvm::Value* end) {
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
constexpr int kMaxLoopVersionDepth = 3;
void FunctionEmitter::innermost_loop(const Stmt& s, llvm::Value* lo, llvm::Value* hi, int depth) {
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
bool FunctionEmitter::is_vector_row(const Stmt& s) {
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
void FunctionEmitter::vector_loop(const Stmt& loop, unsigned lanes, llvm::Value* begin, llvm::Value* end) {
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

// Whether `e` computes lane by lane in a vector loop over `var` in [0,
// `extent`): every load reads a 1-d view as long as the loop at `var` itself
// (a flat stage's contiguous element) or a static row at var + c
// (contiguous_at_offset): in range for every lane in the mask, so a load in
// a select's arm may be speculated. `var` is read nowhere
// else, and nothing can fail or needs a loop: no reduction, no checked op,
// no integer division, remainder or power (which x86 has no vector
// instructions for either).
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

// About how many instructions `e` emits (an expanded transcendental,
// math.hpp, is a few dozen: expr_cost.hpp), counted up to `limit`: the walk
// stops there (a fused body's subexpressions may be shared, and are counted
// each time).
int emitted_size(const Expr& e, int limit) {
  int size = op_cost(e, OpCostOf::emitted);
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

}  // namespace nimble::codegen::detail
