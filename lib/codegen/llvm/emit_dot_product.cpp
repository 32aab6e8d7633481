// Dot-product stages (dot_product.hpp's DotProductStage) as register tiles:
// rows × cols sums held in vector registers across k, columns in blocks
// that stay in L2, k in chunks, prefetches of the next block's b, the sums
// folded across lanes and stored through the epilogue (a row of them as
// one vector where the epilogue is lane-wise).
#include "codegen/llvm/function_emitter.hpp"

namespace nimble::codegen::detail {

// Rows from which a dot-product stage runs as dot_packed: at 64 rows the
// packing of b, read once from memory or L3 (BERT's weights are in no
// cache when their layer runs; dot tiles prefetch them), cost what the
// tiles saved (W3 at 64: 97-103 ms as dot tiles, 103-110 packed).
constexpr std::int64_t kPackedDotMinRows = 96;
// ... and from 24 rows (three tiles) where b is at most 1 MiB, which its
// packing then reads from L2 or L3 (W2's products: [32, 300] x [750,
// 300]^T 0.150 -> 0.116 ms, [50, 300] x [450, 300]^T 0.136 -> 0.110, at
// 24 rows 0.113 -> 0.097; at 19, 0.050 -> 0.056, no better).
constexpr std::int64_t kPackedSmallDotMinRows = 24;
constexpr std::int64_t kPackedSmallDotFloats = 256 * 1024;

// Floats of b one column block spans (its rows × K, or × kDotChunk): 192
// KiB, within L2.
constexpr std::int64_t kColumnBlockFloats = 48 * 1024;
// The longest range of k a dot-product tile sums over at once, a multiple
// of every vector width: over it a tile's rows of a and of b (4 + 4 rows ×
// 1024 floats with AVX-512, 32 KiB; 4 + 3 below it, 28 KiB) fit L1 (48
// KiB on this machine, 32 KiB on the AVX2 ones).
constexpr std::int64_t kDotChunk = 1024;

// A dot-product stage (dot_product.hpp) as tiles of `tile.rows` × `tile.cols`
// sums held in vector registers across k: each step loads one vector of
// k from each row of a and of b in the tile and multiply-adds every pair;
// the last partial vector of k is read with masked loads (no element past
// a row is touched). Columns go in blocks of about kColumnBlockFloats / K,
// so that the rows of b a block reads stay in L2 while every row tile of
// the range passes over them. Sums are folded in vector lanes
// (lane_sums), so an element's rounding differs from the scalar loop's
// (within the tolerance of any reordered sum).
void FunctionEmitter::dot_product_stage(const DotProductStage& dot, const DotTile& tile, llvm::Value* begin,
                                        llvm::Value* end) {
  dot_ = &dot;
  tile_ = tile;
  vector_ = llvm::FixedVectorType::get(b_.getFloatTy(), tile.lanes);
  column_step_ = aligned_column_step();
  around(dot.outer, begin, end, [&](llvm::Value* b, llvm::Value* e) { dot_tiles(b, e); });
  for (const Stmt* loop : dot.unit) vars_.erase(loop->var.node());
  dot_ = nullptr;
}

// The tiles, inside the loops outside the row loop. [begin, end) is the
// range split_range gives the runtime: of the outermost outer loop, or
// with none, of the columns in whole tiles.
void FunctionEmitter::dot_tiles(llvm::Value* begin, llvm::Value* end) {
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

// Column blocks over [cols_begin, cols_end); in each, k in chunks of at
// most kDotChunk, and in each chunk every tile of rows. With a long k
// (BERT's [L, 3072] x [768, 3072]^T), a row tile of a over all of k (48
// KiB at 4 rows) would not stay in L1 beside the rows of b it meets, and
// every step would read both from L2; over a chunk it does.
void FunctionEmitter::dot_columns(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin,
                                  llvm::Value* cols_end) {
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

void FunctionEmitter::dot_tile_columns(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin,
                                       llvm::Value* cols_end) {
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
void FunctionEmitter::each_block(llvm::Value* cols_begin, llvm::Value* cols_end, llvm::Value* block, Body&& body) {
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
llvm::Value* FunctionEmitter::calls_so_far() {
  llvm::Module& m = s_.module;
  auto* counter = new llvm::GlobalVariable(m, i64_, false, llvm::GlobalValue::InternalLinkage,
                                           llvm::ConstantInt::get(i64_, 0), fn_->getName() + ".calls");
  return b_.CreateAtomicRMW(llvm::AtomicRMWInst::Add, counter, b_.getInt64(1), llvm::MaybeAlign(8),
                            llvm::AtomicOrdering::Monotonic);
}

// The tiles of rows i.. (mr of them) over columns [jc, jend); with
// `whole_cols` that range is known to be whole tiles.
void FunctionEmitter::dot_row_tile(llvm::Value* i, int mr, llvm::Value* jc, llvm::Value* jend, const KChunk& kc,
                                   bool whole_cols, llvm::Value* last_row) {
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
void FunctionEmitter::store_if_row(llvm::Value* i, int r, llvm::Value* last_row, const Store& store) {
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
void FunctionEmitter::store_column_groups(llvm::Value* i, int mr, llvm::Value* j0,
                                          const std::vector<std::vector<llvm::Value*>>& sums, const KChunk& kc,
                                          llvm::Value* last_row) {
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

// How many columns apart b's rows start at the same offset in a vector:
// the least s with s rows a whole number of vectors (4 for rows of 300
// floats and 64-byte vectors); 1 where rows are whole vectors, or where
// their length is not known when the kernel is compiled.
int FunctionEmitter::aligned_column_step() {
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
void FunctionEmitter::dot_tile(llvm::Value* i, int mr, llvm::Value* j, int nr, const KChunk& kc, llvm::Value* last_row,
                               int col_step, std::vector<llvm::Value*>* sums_out) {
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
constexpr unsigned kMaxAheadShift = 2;
std::vector<llvm::Value*> FunctionEmitter::next_block_rows(llvm::Value* i, int mr, llvm::Value* j, int nr,
                                                           const KChunk& kc) {
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
void FunctionEmitter::store_tile_row(llvm::Value* row_sums, llvm::Value* j, unsigned n, const KChunk& kc,
                                     llvm::Value* mask) {
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
llvm::Value* FunctionEmitter::stored_value(llvm::Value* sums, llvm::Value* at, const KChunk& kc) {
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
std::vector<llvm::Value*> FunctionEmitter::lane_sums(std::vector<llvm::Value*> vectors) {
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

}  // namespace nimble::codegen::detail
