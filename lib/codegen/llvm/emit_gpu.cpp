// A GPU stage's threads working together (CpuEmitOptions::gpu, or the host
// running every thread itself): products in shared-memory tiles between
// barriers, flat element-wise stages in vector groups, and reductions split
// across a warp's lanes (shuffles) and a block's warps.
#include "codegen/llvm/function_emitter.hpp"

namespace nimble::codegen::detail {

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
void FunctionEmitter::gpu_product_tiles(const TiledProduct& dot, llvm::Value* begin, llvm::Value* end) {
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
void FunctionEmitter::each_thread(Body&& body) {
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
void FunctionEmitter::gpu_element_groups(const Stmt& elements, unsigned group, llvm::Value* begin, llvm::Value* end) {
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
void FunctionEmitter::block_barrier() {
  if (gpu_) gpu_->barrier(b_);
}

// `count` elements of `type` the block's threads share: shared memory on
// a GPU, the stack on the host.
llvm::Value* FunctionEmitter::shared_array(llvm::Type* type, unsigned count, const char* name) {
  if (gpu_) return gpu_->shared_array(b_, type, count, name);
  return local(llvm::ArrayType::get(type, count));
}

// A reduction of a stage of several lanes (lanes_ > 1), split across them
// (CpuEmitOptions::gpu): every lane gets the whole reduction.
llvm::Value* FunctionEmitter::lane_reduce(const te::ReduceNode& r) {
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

// Another lane's `v` (GpuOps::exchange), in 32-bit pieces.
llvm::Value* FunctionEmitter::exchange(llvm::Value* v, unsigned mask) {
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

}  // namespace nimble::codegen::detail
