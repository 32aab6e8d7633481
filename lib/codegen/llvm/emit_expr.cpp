// Expressions: constants, vars, arithmetic (integer division and powers
// that never trap), selects (lazy where an arm may fail), casts, loads and
// stores (with their alias scopes, and as masked vectors in a vector loop),
// index checks, and reductions as loops or as explicit vectors.
#include "codegen/llvm/function_emitter.hpp"

namespace nimble::codegen::detail {

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

// Accumulators (vectors an iteration) of vector_reduce's main loop.
constexpr int kReduceVectors = 4;

// Fails unless index `i` of checked load `l`'s dim `d` lies in its extent.
void FunctionEmitter::check_index(const te::LoadNode& l, std::size_t d, llvm::Value* i) {
  llvm::Value* extent = expr(l.tensor.shape()[d]);
  llvm::Value* bad = b_.CreateOr(b_.CreateICmpSLT(i, b_.getInt64(0)), b_.CreateICmpSGE(i, extent));
  llvm::Value* info[] = {i, extent};
  fail_if(bad, {.form = ErrorSite::Form::index, .kind = ErrorKind::runtime_error, .text = l.tensor.name(),
                .stage = stage_name, .buffer = buffer_of(l.tensor), .dim = static_cast<int>(d)},
          info);
}

llvm::Value* FunctionEmitter::expr(const Expr& e) {
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

// The alignment of one element of `dtype` in memory.
llvm::Align FunctionEmitter::element_align(DType dtype) {
  return llvm::Align(std::max<std::uint64_t>(1, memory_type(c_, dtype)->getPrimitiveSizeInBits() / 8));
}

void FunctionEmitter::annotate(llvm::Instruction* access, int buffer) {
  access->setMetadata(llvm::LLVMContext::MD_alias_scope, s_.scope[static_cast<std::size_t>(buffer)]);
  access->setMetadata(llvm::LLVMContext::MD_noalias, s_.noalias[static_cast<std::size_t>(buffer)]);
}

// The data pointer of `buffer`, loaded at the function's entry on first
// use: a function loads only those it reads or writes (the prologue none,
// and it is compiled unoptimized: see emit_prologue).
llvm::Value* FunctionEmitter::base(int buffer) {
  llvm::Value*& p = base_[static_cast<std::size_t>(buffer)];
  if (p == nullptr) {
    llvm::IRBuilder<> at(entry_, entry_->getFirstInsertionPt());
    p = at.CreateLoad(ptr_, at.CreateConstInBoundsGEP1_64(ptr_, data_, static_cast<std::uint64_t>(buffer)),
                      fmt::format("{}.data", s_.kernel.buffers[static_cast<std::size_t>(buffer)].tensor.name()));
  }
  return p;
}

llvm::Value* FunctionEmitter::element_ptr(int buffer, llvm::Value* index) {
  const DType dtype = s_.kernel.buffers[static_cast<std::size_t>(buffer)].tensor.dtype();
  return b_.CreateInBoundsGEP(memory_type(c_, dtype), base(buffer), index);
}

void FunctionEmitter::store(int buffer, llvm::Value* index, llvm::Value* value) {
  const DType dtype = s_.kernel.buffers[static_cast<std::size_t>(buffer)].tensor.dtype();
  annotate(b_.CreateStore(to_memory(value, dtype), element_ptr(buffer, index)), buffer);
}

llvm::Value* FunctionEmitter::to_memory(llvm::Value* v, DType dtype) {
  switch (dtype) {
    case DType::f16: return b_.CreateFPTrunc(v, value_type(llvm::Type::getHalfTy(c_)));
    case DType::bf16: return to_bf16_bits(v);
    case DType::boolean: return b_.CreateZExt(v, value_type(b_.getInt8Ty()));
    default: return v;
  }
}

llvm::Value* FunctionEmitter::from_memory(llvm::Value* v, DType dtype) {
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
llvm::Value* FunctionEmitter::to_bf16_bits(llvm::Value* f) {
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
llvm::Value* FunctionEmitter::round_to(llvm::Value* f, DType dtype) {
  if (dtype != DType::f16 && dtype != DType::bf16) return f;
  return from_memory(to_memory(f, dtype), dtype);
}

llvm::Value* FunctionEmitter::load(const te::LoadNode& l) {
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
llvm::Value* FunctionEmitter::flat_index(const te::LoadNode& l) {
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

llvm::Value* FunctionEmitter::unary(const te::UnaryNode& u) {
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
  // Every floating-point unary primitive X of ops/unary_ops.def is
  // emitted by math.hpp's emit_X; logical_not takes bool only.
  switch (u.op) {
#define NIMBLE_UNARY(name, operands, cost, value) NIMBLE_EMIT_UNARY_##operands(name)
#define NIMBLE_EMIT_UNARY_numeric(name) \
  case UnaryOp::name:                   \
    return emit_##name(b_, x);
#define NIMBLE_EMIT_UNARY_floating(name) NIMBLE_EMIT_UNARY_numeric(name)
#define NIMBLE_EMIT_UNARY_boolean(name) \
  case UnaryOp::name:                   \
    break;
#include "ops/unary_ops.def"
#undef NIMBLE_EMIT_UNARY_boolean
#undef NIMBLE_EMIT_UNARY_floating
#undef NIMBLE_EMIT_UNARY_numeric
#undef NIMBLE_UNARY
  }
  NIMBLE_ASSERT(false, "logical_not of a float");
  return nullptr;
}

llvm::Value* FunctionEmitter::binary(const te::BinaryNode& n) {
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
llvm::Value* FunctionEmitter::divide(const te::BinaryNode& n, llvm::Value* a, llvm::Value* b) {
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
llvm::Value* FunctionEmitter::int_pow(const te::BinaryNode& n, llvm::Value* base, llvm::Value* exponent) {
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

llvm::Value* FunctionEmitter::select(const te::SelectNode& s) {
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
llvm::Value* FunctionEmitter::cast(llvm::Value* v, DType from, DType to) {
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

llvm::AllocaInst* FunctionEmitter::local(llvm::Type* type) {
  llvm::IRBuilder<> at_entry(entry_, entry_->begin());
  return at_entry.CreateAlloca(type);
}

// `a` and `v` of `dtype` folded by a sum, max or min (NaN-propagating);
// a floating sum marked reassociable where `reassociate`.
llvm::Value* FunctionEmitter::fold(te::ReduceKind kind, DType dtype, llvm::Value* a, llvm::Value* v, bool reassociate) {
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
llvm::Value* FunctionEmitter::identity(te::ReduceKind kind, DType dtype) {
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

llvm::Value* FunctionEmitter::reduce(const te::ReduceNode& r) {
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
llvm::Value* FunctionEmitter::vector_reduce(const te::ReduceNode& r) {
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
llvm::Value* FunctionEmitter::vector_load(int buffer, llvm::Value* p, llvm::Value* mask) {
  llvm::Instruction* v = nullptr;
  if (mask)
    v = b_.CreateMaskedLoad(vector_, p, llvm::Align(4), mask, llvm::Constant::getNullValue(vector_));
  else
    v = b_.CreateAlignedLoad(vector_, p, llvm::Align(4));
  annotate(v, buffer);
  return v;
}

// The mask of the lanes below `count` (0 <= count <= lanes) of a vector of
// `lanes` (default: the tile's).
llvm::Value* FunctionEmitter::lanes_below(llvm::Value* count, unsigned lanes) {
  if (lanes == 0) lanes = tile_.lanes;
  std::vector<llvm::Constant*> lane_index;
  for (unsigned n = 0; n < lanes; ++n) lane_index.push_back(b_.getInt32(n));
  return b_.CreateICmpULT(llvm::ConstantVector::get(lane_index),
                          b_.CreateVectorSplat(lanes, b_.CreateTrunc(count, b_.getInt32Ty())));
}

}  // namespace nimble::codegen::detail
