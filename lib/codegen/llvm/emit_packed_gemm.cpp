// Outer-product stages (dot_product.hpp's OuterProductStage) as register
// tiles reading b in place, and the packed GEMM both products run with many
// rows: b's columns copied into panels (transposed for a dot product), each
// tile of rows summing outer products over every panel of a block.
#include "codegen/llvm/function_emitter.hpp"

namespace nimble::codegen::detail {

// Steps of k a packed block spans: each tile's sums go to the output once
// per kPanelK. 512 against 256, three runs alternated: SGEMM 1024
// 140-142 -> 148-155 GFLOP/s, 2048 142-148 -> 141-151, BERT's [200, 3072]
// x [768, 3072]^T 144-149 -> 145-148, [128, 768] x [3072, 768]^T 135-136
// -> 136-139 (384: between the two).
constexpr std::int64_t kPanelK = 512;
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
constexpr std::int64_t kBlockFloats = 192 * 1024;
// The floats of a's rows over one block of k from which a packed product
// takes the whole block (256 KiB: BERT's 128 rows x 512 steps and more).
constexpr std::int64_t kLargeBlockMinA = 64 * 1024;
// Rows below which copying all of b into panels costs more than it saves
// (four tiles of six rows; measured on BERT's shapes: at 16 rows it lost,
// at 24 and more it won).
constexpr std::int64_t kPackedMinRows = 4 * kOuterRows;

// An outer-product stage (dot_product.hpp) as tiles of kOuterRows rows ×
// two vectors of columns (a single row: four vectors, then two; then one
// masked vector at a time for the rest), their sums in registers across
// k, added to the output (which the stage before set to init). Each
// element still sums over k in order.
void FunctionEmitter::outer_product_stage(const OuterProductStage& op, unsigned lanes, bool split_columns,
                                          llvm::Value* begin, llvm::Value* end) {
  op_ = &op;
  split_columns_ = split_columns;
  tile_.lanes = lanes;
  vector_ = llvm::FixedVectorType::get(b_.getFloatTy(), lanes);
  around(op.outer, begin, end, [&](llvm::Value* b, llvm::Value* e) { outer_product_tiles(b, e); });
  for (const Stmt* u : op.unit) vars_.erase(u->var.node());
  op_ = nullptr;
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
void FunctionEmitter::dot_packed(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin,
                                 llvm::Value* cols_end) {
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
void FunctionEmitter::pack_transposed(const Panel& panel, llvm::Value* j0, llvm::Value* left) {
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
std::vector<llvm::Value*> FunctionEmitter::transpose(std::vector<llvm::Value*> rows) {
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
void FunctionEmitter::dot_packed_tile(llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left,
                                      const Panel& panel, const KChunk& kc) {
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

// The tiles, inside the loops outside the row loop. [begin, end) is the
// range of the stage's outermost loop.
void FunctionEmitter::outer_product_tiles(llvm::Value* begin, llvm::Value* end) {
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

// The packed tile for `cols` columns: 8 × 3 vectors with AVX-512 (24
// sums, three vectors of b and one of a in 32 registers), kOuterRows × 2
// below it (16 registers); but 8 × 2 with AVX-512 where the columns are
// known to be a few whole pairs of vectors and no whole triples:
// attention's 64 a head, two panels of 2 where panels of 3 would be one
// and a partial one (BERT's p · v at 200 rows: 0.49-0.51 -> 0.45-0.46
// ms; 12 × 2 tiles ran it in 0.65).
void FunctionEmitter::choose_packed_tile(llvm::Value* cols) {
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
void FunctionEmitter::packed_panels(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin,
                                    llvm::Value* cols_end) {
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
void FunctionEmitter::packed_gemm(llvm::Value* rows_begin, llvm::Value* rows_end, llvm::Value* cols_begin,
                                  llvm::Value* cols_end, llvm::Value* k, bool one_step_at_least,
                                  const DotProductStage* ahead, Pack&& pack, Tile&& tile) {
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
std::vector<llvm::AllocaInst*> FunctionEmitter::zeroed_sums(int n) {
  std::vector<llvm::AllocaInst*> sums;
  for (int s = 0; s < n; ++s) {
    sums.push_back(local(vector_));
    b_.CreateStore(llvm::Constant::getNullValue(vector_), sums.back());
  }
  return sums;
}

// One step of an outer-product tile: sums[r × |bv| + v] += av[r] (on every
// lane) × bv[v].
void FunctionEmitter::add_outer_products(const std::vector<llvm::AllocaInst*>& sums,
                                         const std::vector<llvm::Value*>& av, const std::vector<llvm::Value*>& bv) {
  for (std::size_t r = 0; r < av.size(); ++r) {
    llvm::Value* a = b_.CreateVectorSplat(tile_.lanes, av[r]);
    for (std::size_t v = 0; v < bv.size(); ++v) {
      llvm::AllocaInst* sum = sums[r * bv.size() + v];
      b_.CreateStore(b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vector_}, {a, bv[v], b_.CreateLoad(vector_, sum)}),
                     sum);
    }
  }
}

FunctionEmitter::RowWalk FunctionEmitter::row_walk(const te::LoadNode& a, const te::VarNode* row, const te::VarNode* k,
                                                   llvm::Value* i0, llvm::Value* k_begin, int rows) {
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
llvm::Value* FunctionEmitter::constant_stride(const te::LoadNode& a, const te::VarNode* var) {
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
Panel FunctionEmitter::panel_in(llvm::Value* block, llvm::Value* jc, llvm::Value* j0, llvm::Value* pc,
                                llvm::Value* k_size) {
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
void FunctionEmitter::each_panel(llvm::Value* jc, llvm::Value* jc_end, std::int64_t nr, Each&& each) {
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
void FunctionEmitter::by_vectors(llvm::Value* left, int nv, Body&& body) {
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
std::vector<llvm::Value*> FunctionEmitter::vector_masks(llvm::Value* left, int nv) {
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
llvm::Value* FunctionEmitter::panel_at(const Panel& panel, llvm::Value* kk, std::int64_t v) {
  const auto lanes = static_cast<std::int64_t>(tile_.lanes);
  return b_.CreateInBoundsGEP(b_.getFloatTy(), panel.data,
                              b_.CreateAdd(b_.CreateMul(kk, b_.getInt64(panel.step)), b_.getInt64(v * lanes)));
}

// Tiles of rows from i0 over columns [from, n), reading b in place.
void FunctionEmitter::outer_product_columns(llvm::Value* i0, int mr, llvm::Value* from, llvm::Value* n) {
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

// mr rows from i0 × nv vectors of columns from j0 (with `left`, only the
// first `left` of them, fewer than nv vectors), over all of k from b in place, or
// over a panel's block of k from the panel. In place, k goes in blocks of
// kPanelK as in a panel, each block's sums added to the output: every
// element then rounds alike whether its columns were packed or not, so
// that where a thread's share of columns ends does not change its bits.
void FunctionEmitter::outer_product_tile(llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left,
                                         const Panel* panel) {
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
void FunctionEmitter::outer_product_sums(llvm::Value* i0, int mr, llvm::Value* j0, int nv, llvm::Value* left,
                                         llvm::Value* k_begin, llvm::Value* k_size, const Panel* panel) {
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

}  // namespace nimble::codegen::detail
