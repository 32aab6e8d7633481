// The GPU's kernels (lib/codegen/cuda/gpu_kernel.hpp) without a GPU: every
// op's rule with the GPU's schedule (grid-stride stages, plain loop nests,
// failures through the status word) compiled for the host and run against
// the op's reference kernel on grids of several sizes; the same rules' PTX
// assembled by ptxas for sm_80 and sm_90 where the toolkit is installed.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "codegen/cuda/gpu_kernel.hpp"
#include "codegen/cuda/gpu_schedule.hpp"
#include "codegen/kernel_ir.hpp"
#include "ops/ops.hpp"
#include "nimble/runtime/storage.hpp"
#include "runtime/cuda/allocator.hpp"
#include "runtime/cuda/context.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/stream.hpp"
#include "support/fake_cuda.hpp"
#include "support/gpu_on_host.hpp"
#include "support/op_calls.hpp"
#include "support/ptxas.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using namespace nimble::testing;

namespace {

// A runner of check_rule: the rule with the GPU's schedule on a grid of
// `threads` threads, on the host.
RuleRunner gpu_schedule_on_host(unsigned threads) {
  return [threads](const ir::OpDef& op, std::span<const te::Tensor> outputs, std::span<const te::Tensor> placeholders,
                   std::span<const Tensor> values, std::span<const Tensor> expected) {
    const Ref<Kernel> kernel = codegen::compile_gpu_schedule_for_host(std::string(op.name), placeholders, outputs, threads);
    std::vector<Tensor> results;
    for (const Tensor& e : expected) results.push_back(Tensor::empty(e.shape(), e.dtype()));
    kernel->run(values, results);
    return results;
  };
}

TEST_CASE("cuda: every op's rule with the GPU's schedule matches its reference kernel (run on the host)", "[cuda]") {
  const std::map<const ir::OpDef*, Generator> calls = generators();
  Rng rng(20261201);
  for (const ir::OpDef* op : ir::all_ops()) {
    if (op->compute == nullptr) continue;
    INFO("op " << op->name);
    const auto it = calls.find(op);
    REQUIRE(it != calls.end());
    // One thread (each runs every iteration), a few (strides that do not
    // divide the extents), more than there are iterations.
    for (const unsigned threads : {1u, 3u, 64u}) {
      INFO("threads " << threads);
      check_rule(*op, it->second(rng), rng, gpu_schedule_on_host(threads), true);
    }
  }
}

std::vector<Tensor> run_on_gpu_schedule(const ir::OpDef& op, const std::vector<ir::Type>& types,
                                        const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  te::SymbolTable symbols;
  std::vector<te::Tensor> placeholders;
  for (std::size_t i = 0; i < types.size(); ++i)
    placeholders.push_back(
        te::placeholder_for(*types[i].as<ir::TensorTypeNode>(), std::string(op.arg_names[i]), symbols));
  const std::vector<te::Tensor> rule = op.compute(placeholders, {});
  codegen::compile_gpu_schedule_for_host(std::string(op.name), placeholders, rule, 4)->run(inputs, outputs);
  return outputs;
}

TEST_CASE("cuda: a failing iteration of a GPU stage is an Error, as on the CPU", "[cuda]") {
  const std::vector<ir::Type> take_types{ir::tensor_type({3, 2}, DType::f32), ir::tensor_type({5}, DType::i64)};
  const Tensor data = from_values({3, 2}, DType::f32, {1, 2, 3, 4, 5, 6});
  Tensor out = Tensor::empty({5, 2}, DType::f32);
  CHECK_THAT(run_on_gpu_schedule(ops::take(), take_types, {data, i64s({2, 0, 1, 1, 2})}, {out})[0],
             IsCloseTo(from_values({5, 2}, DType::f32, {5, 6, 1, 2, 3, 4, 3, 4, 5, 6})));
  // The bad index is taken by the grid's last thread, after the others ran.
  CHECK_NIMBLE_ERROR(run_on_gpu_schedule(ops::take(), take_types, {data, i64s({0, 1, 2, 0, 3})}, {out}),
                     ErrorKind::runtime_error, "take: index 3 is out of range for axis 0 of data (extent 3)");
  const std::vector<ir::Type> types{ir::tensor_type({3}, DType::i32), ir::tensor_type({3}, DType::i32)};
  const Tensor a = Tensor::from_data<std::int32_t>({3}, {7, -7, std::numeric_limits<std::int32_t>::min()});
  Tensor q = Tensor::empty({3}, DType::i32);
  CHECK_NIMBLE_ERROR(run_on_gpu_schedule(ops::div(), types, {a, Tensor::from_data<std::int32_t>({3}, {1, 0, 1})}, {q}),
                     ErrorKind::runtime_error, "div: integer division by zero");
}

// How many times `what` is in `text`.
std::size_t count_of(std::string_view what, const std::string& text) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

// ptxas (where the toolkit is installed: `ptxas` not empty) accepts `ptx` for sm_`sm`.
void check_assembles(const std::string& ptxas, const std::string& ptx, int sm) {
  if (ptxas.empty()) return;
  const PtxasResult result = run_ptxas(ptxas, ptx, fmt::format("sm_{}", sm));
  INFO("sm_" << sm << ":\n" << result.log << "\n" << ptx);
  CHECK(result.status == 0);
}

// An output whose elements hold what no kernel computes here (NaN, or -77
// for integers): an element a run leaves unwritten cannot match, nor can an
// earlier run's result in reused memory.
Tensor unwritten(const Shape& shape, DType dtype) {
  return Tensor::full(shape, is_floating(dtype) ? std::numeric_limits<double>::quiet_NaN() : -77.0, dtype);
}

// The kernel IR of `op` over placeholders of `types`, and the rule's
// placeholders and outputs.
struct Rule {
  std::vector<te::Tensor> inputs;
  std::vector<te::Tensor> outputs;
  codegen::KernelIR ir;
};

Rule rule_of(const ir::OpDef& op, const std::vector<ir::Type>& types, const ir::Attrs& attrs = {}) {
  te::SymbolTable symbols;
  Rule r;
  for (std::size_t i = 0; i < types.size(); ++i)
    r.inputs.push_back(te::placeholder_for(*types[i].as<ir::TensorTypeNode>(), std::string(op.arg_names[i]), symbols));
  r.outputs = op.compute(r.inputs, attrs);
  r.ir = codegen::lower_to_kernel_ir(std::string(op.name), r.inputs, r.outputs);
  return r;
}

// The lanes of each stage of `op`'s kernel scheduled for a GPU.
std::vector<unsigned> gpu_lanes(const ir::OpDef& op, const std::vector<ir::Type>& types, const ir::Attrs& attrs = {}) {
  std::vector<unsigned> lanes;
  for (const codegen::Stage& s : codegen::schedule_for_gpu(rule_of(op, types, attrs).ir).stages)
    lanes.push_back(s.lanes);
  return lanes;
}

TEST_CASE("cuda: the GPU's schedule: a thread an element, a warp an element where it is a reduction along a row",
          "[cuda]") {
  const ir::Dim n("n");
  const auto f32 = [](std::vector<ir::Dim> shape) { return ir::tensor_type(std::move(shape), DType::f32); };
  using Lanes = std::vector<unsigned>;
  SECTION("softmax: its max and sum a warp a row, its quotients a thread an element") {
    const codegen::KernelIR ir = codegen::schedule_for_gpu(rule_of(ops::softmax(), {f32({n, 64})}).ir);
    REQUIRE(ir.stages.size() == 3);
    CHECK(ir.stages[0].lanes == codegen::kWarpLanes);
    CHECK(ir.stages[1].lanes == codegen::kWarpLanes);
    CHECK(ir.stages[2].lanes == 1);
    // The quotients' two loops (rows, columns) are one loop over the
    // elements, whose variable is the store's index.
    const codegen::Stmt& loop = *ir.stages[2].body;
    REQUIRE(loop.kind == codegen::Stmt::Kind::loop);
    CHECK(loop.for_kind == codegen::ForKind::parallel);
    REQUIRE(loop.body->kind == codegen::Stmt::Kind::store);
    CHECK(loop.body->index.as<te::VarNode>() == loop.var.node());
    CHECK(te::to_string(loop.extent) == "(64 * n)");
  }
  SECTION("batch_matmul of few rows: its accumulation a thread an element, k inside in its order") {
    const codegen::KernelIR lowered = rule_of(ops::batch_matmul(), {f32({4, 8, 16}), f32({4, 16, n})}).ir;
    const codegen::KernelIR ir = codegen::schedule_for_gpu(lowered);
    const codegen::Stmt& loop = *ir.stages.back().body;
    INFO(codegen::to_string(ir));
    CHECK(lowered.stages.back().body->extent.as<te::IntImmNode>() != nullptr);  // lowered: a thread a batch
    CHECK_FALSE(ir.stages.back().product_tiles);
    CHECK(te::to_string(loop.extent) == "((n * 8) * 4)");
    REQUIRE(loop.body->kind == codegen::Stmt::Kind::loop);
    CHECK(loop.body->for_kind == codegen::ForKind::serial);
    CHECK(te::to_string(loop.body->extent) == "16");
    REQUIRE(loop.body->body->kind == codegen::Stmt::Kind::store);
    CHECK(loop.body->body->index.as<te::VarNode>() == loop.var.node());
    CHECK(ir.stages.back().lanes == 1);
  }
  SECTION("which reductions a warp computes") {
    const ir::Attrs along_rows{{"axes", std::vector<std::int64_t>{1}}};
    CHECK(gpu_lanes(ops::sum(), {f32({n, 40})}, along_rows) == Lanes{32});
    CHECK(gpu_lanes(ops::sum(), {f32({n, ir::Any})}, along_rows) == Lanes{32});  // a length known at run time
    CHECK(gpu_lanes(ops::sum(), {f32({n, 8})}, along_rows) == Lanes{1});         // short rows: a thread a row
    CHECK(gpu_lanes(ops::max(), {ir::tensor_type({n, 100}, DType::i8)}, along_rows) == Lanes{32});
    // Several axes flattened: a warp where they have 32 elements or more.
    const ir::Attrs two_axes{{"axes", std::vector<std::int64_t>{1, 2}}};
    CHECK(gpu_lanes(ops::sum(), {f32({n, 4, 50})}, two_axes) == Lanes{32});
    CHECK(gpu_lanes(ops::sum(), {f32({n, 50, 4})}, two_axes) == Lanes{32});
    CHECK(gpu_lanes(ops::sum(), {f32({n, 4, 5})}, two_axes) == Lanes{1});
    // A block: 4096 elements or more, or a whole tensor's sum.
    CHECK(gpu_lanes(ops::sum(), {f32({n, 4096})}, along_rows) == Lanes{256});
    CHECK(gpu_lanes(ops::sum(), {f32({n, 4095})}, along_rows) == Lanes{32});
    CHECK(gpu_lanes(ops::sum(), {f32({n, 64, 64})}, two_axes) == Lanes{256});
    CHECK(gpu_lanes(ops::sum(), {f32({n, 40})}) == Lanes{256});
    // argmax keeps the first maximum's index: a butterfly would not.
    CHECK(gpu_lanes(ops::argmax(), {f32({n, 100})}, {{"axis", std::int64_t{1}}}) == Lanes{1});
    // A row of dot products (a dense layer of one row) a warp an element;
    // layer_norm's sums.
    CHECK(gpu_lanes(ops::dense(), {f32({1, 64}), f32({48, 64}), f32({48})}) == Lanes{32});
    CHECK(gpu_lanes(ops::layer_norm(), {f32({n, 64}), f32({64}), f32({64})}) == Lanes({32, 32, 1}));
  }
  SECTION("which products are tiles: dot products of 16 rows or more, or rows known at run time") {
    const codegen::KernelIR dense =
        codegen::schedule_for_gpu(rule_of(ops::dense(), {f32({n, 64}), f32({48, 64}), f32({48})}).ir);
    REQUIRE(dense.stages.size() == 1);
    CHECK(dense.stages[0].product_tiles);
    CHECK(dense.stages[0].lanes == codegen::GpuProductTile::kThreads);
    CHECK(te::to_string(dense.stages[0].tiles) == "floordiv((n + 63), 64)");  // 48 columns: one tile
    CHECK(gpu_lanes(ops::dense(), {f32({16, 64}), f32({48, 64}), f32({48})}) == Lanes{256});
    CHECK(gpu_lanes(ops::dense(), {f32({15, 64}), f32({48, 64}), f32({48})}) == Lanes{32});
    // q · kᵀ over a batch: a tile of one batch's rows and columns.
    const ir::Dim m("m");
    const codegen::KernelIR scores = codegen::schedule_for_gpu(
        rule_of(ops::batch_matmul(), {f32({3, n, 64}), f32({3, m, 64})}, {{"transpose_b", true}}).ir);
    CHECK(scores.stages.back().product_tiles);
    CHECK(te::to_string(scores.stages.back().tiles) == "((3 * floordiv((n + 63), 64)) * floordiv((m + 63), 64))");
    // p · v and matmul's a · b (summed with k outside the columns) too.
    const codegen::KernelIR mixed =
        codegen::schedule_for_gpu(rule_of(ops::batch_matmul(), {f32({3, n, m}), f32({3, m, 64})}).ir);
    CHECK(mixed.stages.back().product_tiles);
    CHECK(gpu_lanes(ops::matmul(), {f32({n, 40}), f32({40, m})}).back() == 256);
    CHECK(gpu_lanes(ops::matmul(), {f32({8, 40}), f32({40, m})}).back() == 1);
  }
}

TEST_CASE("cuda: an element-wise stage: 4 elements a thread, as vectors where in range and aligned", "[cuda]") {
  const std::string ptxas = find_ptxas();
  if (ptxas.empty()) WARN("ptxas not run: the CUDA toolkit is not installed");
  const ir::Dim n("n");
  const auto vector_of = [&](DType dtype) { return ir::tensor_type({n}, dtype); };
  using Elements = std::vector<unsigned>;
  const auto elements = [](const ir::OpDef& op, const std::vector<ir::Type>& types) {
    Elements out;
    for (const codegen::Stage& s : codegen::schedule_for_gpu(rule_of(op, types).ir).stages)
      out.push_back(s.vector_elements);
    return out;
  };
  CHECK(elements(ops::add(), {vector_of(DType::f32), vector_of(DType::f32)}) == Elements{4});
  CHECK(elements(ops::sigmoid(), {vector_of(DType::f32)}) == Elements{4});
  CHECK(elements(ops::add(), {vector_of(DType::i32), vector_of(DType::i32)}) == Elements{4});
  CHECK(elements(ops::add(), {vector_of(DType::i64), vector_of(DType::i64)}) == Elements{1});  // 8-byte elements
  // A broadcast reads b along the rows' columns, not at the element.
  CHECK(elements(ops::add(), {ir::tensor_type({n, 64}, DType::f32), ir::tensor_type({64}, DType::f32)}) ==
        Elements{1});

  const Rule add = rule_of(ops::add(), {vector_of(DType::f32), vector_of(DType::f32)});
  Rng rng(20261207);
  // Lengths with and without a partial last group; inputs aligned (fresh
  // tensors) and one borrowed a float past an aligned address (element by
  // element).
  for (const std::int64_t length : {1, 3, 4, 37}) {
    const Tensor a = random_tensor(rng, {length}, DType::f32);
    std::vector<float> memory(static_cast<std::size_t>(length) + 4);
    float* odd = memory.data() + (reinterpret_cast<std::uintptr_t>(memory.data()) % 16 == 0 ? 1 : 0);
    std::copy_n(static_cast<const float*>(random_tensor(rng, {length}, DType::f32).raw_data()), length, odd);
    const Tensor b = Tensor::borrow({length}, std::span<float>(odd, static_cast<std::size_t>(length)));
    for (const Tensor& other : {a, b}) {
      INFO("length " << length << (other.raw_data() == odd ? ", misaligned" : ""));
      const Tensor expected =
          ops::add().reference(std::vector<Value>{Value(a), Value(other)}, {}).tensor();
      for (const unsigned grid : {1u, 3u, 64u}) {
        Tensor out = unwritten({length}, DType::f32);
        codegen::compile_gpu_schedule_for_host("add", add.inputs, add.outputs, grid)
            ->run(std::vector<Tensor>{a, other}, std::vector<Tensor>{out});
        CHECK_THAT(out, IsCloseTo(expected));
      }
    }
  }
  // The PTX: a 128-bit load an input and a 128-bit store in the vector path.
  for (const int sm : {80, 90}) {
    const codegen::PtxKernel kernel = codegen::emit_ptx(add.ir, "vector_add", {sm});
    CHECK(count_of("ld.v4.f32", kernel.ptx) == 2);
    CHECK(count_of("st.v4.f32", kernel.ptx) == 1);
    check_assembles(ptxas, kernel.ptx, sm);
  }
}

TEST_CASE("cuda: a product's shared-memory tiles: staged rows, sums a thread, the epilogue where in range",
          "[cuda]") {
  const std::string ptxas = find_ptxas();
  if (ptxas.empty()) WARN("ptxas not run: the CUDA toolkit is not installed");
  Rng rng(20261206);
  const ir::Dim n("n");
  const ir::Dim m("m");
  const auto f32 = [](std::vector<ir::Dim> shape) { return ir::tensor_type(std::move(shape), DType::f32); };
  struct Case {
    const ir::OpDef* op;
    std::vector<ir::Type> types;
    std::vector<Ints> shapes;
    ir::Attrs attrs;
  };
  // Rows, columns and k that are not multiples of the tile's (70 x 130 x
  // 37: partial tiles and a partial last step of k), exact ones, one tile
  // with one row; an epilogue (dense's bias) and a batch.
  const Case cases[] = {
      {&ops::dense(), {f32({n, 37}), f32({130, 37}), f32({130})}, {{70, 37}, {130, 37}, {130}}, {}},
      {&ops::dense(), {f32({n, 32}), f32({64, 32}), f32({64})}, {{128, 32}, {64, 32}, {64}}, {}},
      {&ops::dense(), {f32({n, 5}), f32({3, 5}), f32({3})}, {{1, 5}, {3, 5}, {3}}, {}},
      {&ops::batch_matmul(), {f32({3, n, 20}), f32({3, m, 20})}, {{3, 65, 20}, {3, 17, 20}}, {{"transpose_b", true}}},
      // Outer products: p · v, matmul's a · b.
      {&ops::batch_matmul(), {f32({2, n, m}), f32({2, m, 70})}, {{2, 33, 19}, {2, 19, 70}}, {}},
      {&ops::matmul(), {f32({n, 37}), f32({37, m})}, {{100, 37}, {37, 129}}, {}},
  };
  for (const Case& c : cases) {
    INFO(c.op->name << " of " << c.shapes[0][0] << " x " << c.shapes[0].back());
    const Rule rule = rule_of(*c.op, c.types, c.attrs);
    REQUIRE(codegen::schedule_for_gpu(rule.ir).stages.back().product_tiles);
    std::vector<Value> args;
    std::vector<Tensor> inputs;
    for (const Ints& shape : c.shapes) {
      inputs.push_back(random_tensor(rng, shape, DType::f32, {.lo = -2, .hi = 2, .specials = false}));
      args.emplace_back(inputs.back());
    }
    const Tensor expected = c.op->reference(args, c.attrs).tensor();
    // One grid-stride thread (a block) takes every tile; two; more than there are.
    for (const unsigned blocks : {1u, 2u, 64u}) {
      Tensor out = unwritten(expected.shape(), DType::f32);
      codegen::compile_gpu_schedule_for_host(std::string(c.op->name), rule.inputs, rule.outputs, blocks)
          ->run(inputs, std::vector<Tensor>{out});
      // Sums of up to 37 products of |x| <= 2, fused multiply-adds in k's
      // order: within 37 * 4 * 2^-22 of the reference's.
      CHECK_THAT(out, IsCloseTo(expected, {.rtol = 1e-5, .atol = 1e-4}));
    }
    // The PTX: shared arrays read through ld.shared, two barriers a step of
    // k; ptxas accepts it.
    for (const int sm : {80, 90}) {
      const codegen::PtxKernel kernel = codegen::emit_ptx(rule.ir, "tiles", {sm});
      CHECK(kernel.ptx.find(".shared .align 16 .b8 a_tile[4160]") != std::string::npos);
      CHECK(kernel.ptx.find(".shared .align 16 .b8 b_tile[4160]") != std::string::npos);
      CHECK(kernel.ptx.find("ld.shared.f32") != std::string::npos);
      CHECK(count_of("bar.sync", kernel.ptx) == 2);
      check_assembles(ptxas, kernel.ptx, sm);
    }
  }
}

TEST_CASE("cuda: a warp's or a block's reduction: lanes fold strided shares, shuffle in a butterfly, one stores",
          "[cuda]") {
  const std::string ptxas = find_ptxas();
  if (ptxas.empty()) WARN("ptxas not run: the CUDA toolkit is not installed");
  Rng rng(20261205);
  const ir::Dim n("n");
  constexpr unsigned kWarp = codegen::kWarpLanes;
  constexpr unsigned kBlock = codegen::kBlockLanes;
  struct Case {
    const ir::OpDef* op;
    DType dtype;
    Ints shape;
    std::vector<std::int64_t> axes;
    int words;  // 32-bit words a value is shuffled in
    unsigned lanes;
  };
  const Case cases[] = {
      {&ops::sum(), DType::f32, {5, 100}, {1}, 1, kWarp},
      {&ops::max(), DType::f32, {3, 33}, {1}, 1, kWarp},
      {&ops::sum(), DType::f64, {4, 77}, {1}, 2, kWarp},
      {&ops::min(), DType::i64, {4, 40}, {1}, 2, kWarp},
      {&ops::sum(), DType::i32, {6, 64}, {1}, 1, kWarp},
      {&ops::max(), DType::i8, {2, 50}, {1}, 1, kWarp},
      {&ops::mean(), DType::f32, {3, 45}, {1}, 1, kWarp},
      {&ops::sum(), DType::f32, {3, 3, 70}, {1, 2}, 1, kWarp},  // axes flattened
      // Long reductions and a whole tensor's: a block an element.
      {&ops::sum(), DType::f32, {3, 5000}, {1}, 1, kBlock},
      {&ops::max(), DType::f64, {2, 64, 64}, {1, 2}, 2, kBlock},
      {&ops::sum(), DType::f32, {37, 70}, {0, 1}, 1, kBlock},
  };
  for (const Case& c : cases) {
    INFO(c.op->name << " " << to_string(c.dtype) << " over " << c.shape.size() << "-d rows");
    std::vector<ir::Dim> dims{n};
    for (std::size_t d = 1; d < c.shape.size(); ++d) dims.emplace_back(c.shape[d]);
    const ir::Attrs attrs{{"axes", c.axes}};
    const Rule rule = rule_of(*c.op, {ir::tensor_type(dims, c.dtype)}, attrs);
    REQUIRE(codegen::schedule_for_gpu(rule.ir).stages.at(0).lanes == c.lanes);
    // The host's run of the lanes, against the reference kernel: within a
    // reordered sum's rounding (elements x |x| <= 50 x 2^-17).
    const Tensor x = random_tensor(rng, c.shape, c.dtype, {.lo = -50, .hi = 50, .specials = false});
    const Tensor expected = c.op->reference(std::vector<Value>{Value(x)}, attrs).tensor();
    std::int64_t elements = 1;
    for (const std::int64_t axis : c.axes) elements *= c.shape[static_cast<std::size_t>(axis)];
    const Tolerance tolerance{.rtol = 1e-5, .atol = 50.0 * static_cast<double>(elements) * 0x1p-17};
    for (const unsigned grid : {1u, 2u, 64u}) {
      Tensor out = unwritten(expected.shape(), expected.dtype());
      codegen::compile_gpu_schedule_for_host(std::string(c.op->name), rule.inputs, rule.outputs, grid)
          ->run(std::vector<Tensor>{x}, std::vector<Tensor>{out});
      CHECK_THAT(out, IsCloseTo(expected, tolerance));
    }
    // The PTX: five butterfly steps a 32-bit word; a warp's lane id, or a
    // block's warps' sums in shared memory between two barriers; ptxas
    // accepts it.
    for (const int sm : {80, 90}) {
      const codegen::PtxKernel kernel = codegen::emit_ptx(rule.ir, "lane_sum", {sm});
      CHECK(count_of("shfl.sync.bfly.b32", kernel.ptx) == 5 * static_cast<std::size_t>(c.words));
      if (c.lanes == kWarp) {
        CHECK(kernel.ptx.find("%laneid") != std::string::npos);
        CHECK(count_of("bar.sync", kernel.ptx) == 0);
      } else {
        CHECK(kernel.ptx.find("warp_sums") != std::string::npos);
        CHECK(count_of("bar.sync", kernel.ptx) == 2);
      }
      check_assembles(ptxas, kernel.ptx, sm);
    }
  }
}

TEST_CASE("cuda: every op's PTX passes ptxas for sm_80 and sm_90", "[cuda]") {
  const std::string ptxas = find_ptxas();
  if (ptxas.empty()) {
    WARN("skipped: no ptxas (the CUDA toolkit is not installed)");
    return;
  }
  const std::map<const ir::OpDef*, Generator> calls = generators();
  Rng rng(7);
  const RuleRunner on_host = gpu_schedule_on_host(2);
  // check_rule gives the rule over its placeholders (dims made dynamic at
  // random); its PTX for both SMs goes to ptxas, and the values compared are
  // the host's run of the same schedule.
  const RuleRunner assemble = [&](const ir::OpDef& op, std::span<const te::Tensor> outputs,
                                  std::span<const te::Tensor> placeholders, std::span<const Tensor> values,
                                  std::span<const Tensor> expected) {
    for (const int sm : {80, 90}) {
      const codegen::PtxKernel kernel = codegen::gpu_kernel_ptx(std::string(op.name), placeholders, outputs, {sm});
      CHECK(kernel.entries.size() >= 1);
      check_assembles(ptxas, kernel.ptx, sm);
    }
    return on_host(op, outputs, placeholders, values, expected);
  };
  for (const ir::OpDef* op : ir::all_ops()) {
    if (op->compute == nullptr) continue;
    INFO("op " << op->name);
    check_rule(*op, calls.at(op)(rng), rng, assemble, true);
  }
}

TEST_CASE("cuda: PTX is written for the SMs nimble targets, and an other SM is not_supported", "[cuda]") {
  te::SymbolTable symbols;
  const ir::Type t = ir::tensor_type({ir::Any}, DType::f32);
  const std::vector<te::Tensor> in{te::placeholder_for(*t.as<ir::TensorTypeNode>(), "x", symbols)};
  const std::vector<te::Tensor> out = ops::sigmoid().compute(in, {});
  const codegen::PtxKernel k90 = codegen::gpu_kernel_ptx("sigmoid", in, out, {90});
  CHECK_THAT(k90.ptx, Catch::Contains(".target sm_90") && Catch::Contains(".version 7.8") &&
                          Catch::Contains(".entry " + k90.entries.at(0)));
  // The transcendental is the kernel IR's own expansion: no call in the PTX.
  CHECK_THAT(k90.ptx, !Catch::Contains("call."));
  const codegen::PtxKernel k80 = codegen::gpu_kernel_ptx("sigmoid", in, out, {80});
  CHECK_THAT(k80.ptx, Catch::Contains(".target sm_80") && Catch::Contains(".version 7.0"));
  CHECK_NIMBLE_ERROR(codegen::gpu_kernel_ptx("sigmoid", in, out, {75}), ErrorKind::not_supported,
                     "not supported: code for sm_75 (nimble targets sm_80, 86, 87, 89, 90)");
}

}  // namespace

// --- through the CUDA runtime, on the fake driver ------------------------------------------

namespace {

// A tensor's copy on the device of `stream`, and back.
Tensor to_device(const Tensor& t, cuda::Stream& stream, Device device) {
  Tensor d = Tensor::view_of(Storage::allocate(t.nbytes(), device), t.shape(), t.dtype());
  stream.copy_to_device(d.storage()->data(), t.raw_data(), t.nbytes());
  return d;
}
Tensor to_host(const Tensor& d, cuda::Stream& stream) {
  Tensor t = Tensor::empty(d.shape(), d.dtype());
  stream.copy_to_host(t.raw_data(), d.storage()->data(), d.nbytes());
  return t;
}

TEST_CASE("cuda: a GPU kernel runs through the driver: shapes to the device, every stage launched, failures back",
          "[cuda]") {
  const FakeDriver fake(1, std::size_t{64} << 20);
  {
    const auto context = cuda::Context::open(fake.open(), 0);
    cuda::DeviceAllocator allocator(context);
    const Registered registered(allocator);
    cuda::Stream stream(context);
    const Device gpu = Device::cuda(0);

    // softmax: a fused kernel of several stages, with temporaries.
    te::SymbolTable symbols;
    const ir::Dim rows("rows");
    const ir::Type t = ir::tensor_type({rows, ir::Any}, DType::f32);
    const std::vector<te::Tensor> in{te::placeholder_for(*t.as<ir::TensorTypeNode>(), "x", symbols)};
    const std::vector<te::Tensor> out = ops::softmax().compute(in, {});
    const codegen::KernelIR ir = codegen::lower_to_kernel_ir("softmax", in, out);
    REQUIRE(ir.stages.size() >= 2);
    add_host_stages("test_softmax", codegen::gpu_schedule_host_code(ir, 3));
    fake.set_launch_hook(&run_launch_on_host);
    const Ref<Kernel> kernel = codegen::compile_cuda_kernel("softmax", in, out, context, "test_softmax");

    Rng rng(3);
    const Tensor x = random_tensor(rng, {37, 300}, DType::f32, Range{.lo = -5, .hi = 5, .specials = false});
    const Tensor expected = ops::softmax().reference(std::vector<Value>{Value(x)}, {}).tensor();
    const Tensor x_gpu = to_device(x, stream, gpu);
    const Tensor y_gpu = Tensor::view_of(Storage::allocate(expected.nbytes(), gpu), expected.shape(), DType::f32);
    const int launches_before = fake.launch_count();
    kernel->run(std::vector<Tensor>{x_gpu}, std::vector<Tensor>{y_gpu});
    CHECK_THAT(to_host(y_gpu, stream), IsCloseTo(expected));
    // One launch per stage with work, 256 threads a block, enough blocks
    // for the threads: the row's max and sum a warp a row (37 rows of 32
    // lanes: 5 blocks), the quotients a thread an element (37 x 300: 44).
    REQUIRE(ir.stages.size() == 3);
    REQUIRE(fake.launch_count() - launches_before == 3);
    const unsigned blocks[] = {5, 5, 44};
    const std::uint64_t iterations[] = {37, 37, 37 * 300};
    for (int i = 0; i < 3; ++i) {
      const FakeLaunch l = fake.launch(launches_before + i);
      INFO("stage " << i);
      CHECK(l.block[0] == 256);
      CHECK(l.grid[0] == blocks[i]);
      CHECK(l.num_params == 6);
      CHECK(l.params[4] == 0);              // begin
      CHECK(l.params[5] == iterations[i]);  // end: the rows, or the elements
    }

    // Host tensors are refused, naming where they are.
    Tensor y_host = Tensor::empty(expected.shape(), DType::f32);
    CHECK_NIMBLE_ERROR(kernel->run(std::vector<Tensor>{x}, std::vector<Tensor>{y_host}), ErrorKind::invalid_argument,
                       "softmax: input x is on cpu, not on cuda:0");
  }
  {
    // A failing iteration on the device: its code comes back as the Error.
    const auto context = cuda::Context::open(fake.open(), 0);
    cuda::DeviceAllocator allocator(context);
    const Registered registered(allocator);
    cuda::Stream stream(context);
    te::SymbolTable symbols;
    const ir::Type data_type = ir::tensor_type({3, 2}, DType::f32);
    const ir::Type index_type = ir::tensor_type({ir::Any}, DType::i64);
    const std::vector<te::Tensor> in{te::placeholder_for(*data_type.as<ir::TensorTypeNode>(), "data", symbols),
                                     te::placeholder_for(*index_type.as<ir::TensorTypeNode>(), "indices", symbols)};
    const std::vector<te::Tensor> out = ops::take().compute(in, {});
    const codegen::KernelIR ir = codegen::lower_to_kernel_ir("take", in, out);
    add_host_stages("test_take", codegen::gpu_schedule_host_code(ir, 2));
    const Ref<Kernel> kernel = codegen::compile_cuda_kernel("take", in, out, context, "test_take");
    const Tensor data = to_device(from_values({3, 2}, DType::f32, {1, 2, 3, 4, 5, 6}), stream, Device::cuda(0));
    const Tensor good = to_device(i64s({2, 0, 1}), stream, Device::cuda(0));
    const Tensor bad = to_device(i64s({2, 7, 1}), stream, Device::cuda(0));
    Tensor y = Tensor::view_of(Storage::allocate(3 * 2 * 4, Device::cuda(0)), {3, 2}, DType::f32);
    kernel->run(std::vector<Tensor>{data, good}, std::vector<Tensor>{y});
    CHECK_THAT(to_host(y, stream), IsCloseTo(from_values({3, 2}, DType::f32, {5, 6, 1, 2, 3, 4})));
    CHECK_NIMBLE_ERROR(kernel->run(std::vector<Tensor>{data, bad}, std::vector<Tensor>{y}), ErrorKind::runtime_error,
                       "take: index 7 is out of range for axis 0 of data (extent 3)");
  }
  {
    // zeros(shape): the prologue would read the shape's elements on the host.
    const auto context = cuda::Context::open(fake.open(), 0);
    te::SymbolTable symbols;
    const ir::Type shape_type = ir::tensor_type({2}, DType::i64);
    const std::vector<te::Tensor> in{te::placeholder_for(*shape_type.as<ir::TensorTypeNode>(), "shape", symbols)};
    const std::vector<te::Tensor> out = ops::zeros().compute(in, {{"dtype", DType::f32}});
    CHECK_NIMBLE_ERROR(codegen::compile_cuda_kernel("zeros", in, out, context), ErrorKind::not_supported,
                       "not supported: zeros on a GPU: its shapes or checks read the elements of shape, which would "
                       "be on the device (the host computes them)");
  }
  fake.check_nothing_live();
}

// A runner of check_rule: the rule as a GPU kernel on `stream`'s GPU
// (compile_cuda_kernel: PTX loaded by the driver, the prologue on the host,
// the stages launched by CudaStages), its inputs copied there and its
// results back. On the fake driver (`fake`), each kernel's launches run its
// stages on the host (gpu_on_host). An op a GPU does not run (not_supported:
// its prologue would read a tensor's elements) goes into `unsupported`, its
// expected results standing in for its own.
RuleRunner on_gpu(const std::shared_ptr<const cuda::Context>& context, cuda::Stream& stream, bool fake,
                  std::set<std::string>& unsupported, int& ran) {
  return [context, &stream, fake, &unsupported, &ran](const ir::OpDef& op, std::span<const te::Tensor> outputs,
                                       std::span<const te::Tensor> placeholders, std::span<const Tensor> values,
                                       std::span<const Tensor> expected) {
    static int kernels = 0;
    const std::string name(op.name);
    const std::string prefix = fmt::format("every_op_{}", kernels++);
    const Device gpu = Device::cuda(stream.context().ordinal());
    Ref<Kernel> kernel;
    try {
      kernel = codegen::compile_cuda_kernel(name, placeholders, outputs, context, prefix);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::not_supported) throw;
      unsupported.insert(name);
      return std::vector<Tensor>(expected.begin(), expected.end());
    }
    if (fake)
      add_host_stages(prefix, codegen::gpu_schedule_host_code(
                                  codegen::lower_to_kernel_ir(name, placeholders, outputs), 3));
    std::vector<Tensor> inputs;
    std::vector<Tensor> results;
    for (const Tensor& v : values) inputs.push_back(to_device(v, stream, gpu));
    for (const Tensor& e : expected)
      results.push_back(Tensor::view_of(Storage::allocate(e.nbytes(), gpu), e.shape(), e.dtype()));
    kernel->run(inputs, results);
    ++ran;
    for (Tensor& r : results) r = to_host(r, stream);
    return results;
  };
}

// Every op with a rule, through the CUDA runtime on `context`'s GPU,
// against its reference kernel; the ops a GPU does not run are exactly the
// ones whose prologue reads a tensor's elements.
void check_every_op_on(const std::shared_ptr<const cuda::Context>& context, bool fake) {
  cuda::Stream stream(context);
  std::set<std::string> unsupported;
  int ran = 0;
  const RuleRunner runner = on_gpu(context, stream, fake, unsupported, ran);
  const std::map<const ir::OpDef*, Generator> calls = generators();
  Rng rng(20261208);
  int ops = 0;
  // Their prologues read a tensor's elements: shapes given as tensors
  // (full, ones, arange's bounds), dynamic_update_slice's checked start, and
  // dynamic_strided_slice's bounds where it slices an axis (the draw decides).
  std::set<std::string> expected = {"arange", "dynamic_update_slice", "full", "ones"};
  for (const ir::OpDef* op : ir::all_ops()) {
    if (op->compute == nullptr) continue;
    INFO("op " << op->name);
    const Call call = calls.at(op)(rng);
    if (op == &ops::dynamic_strided_slice() && call.args[1].tensor().numel() > 0) expected.insert(std::string(op->name));
    check_rule(*op, call, rng, runner, true);
    ++ops;
  }
  CHECK(ran + static_cast<int>(unsupported.size()) == ops);
  CHECK(unsupported == expected);
}

}  // namespace

TEST_CASE("cuda: every op's rule through the CUDA runtime on the fake driver matches its reference kernel",
          "[cuda]") {
  const FakeDriver fake(1, std::size_t{256} << 20);
  {
    const auto context = cuda::Context::open(fake.open(), 0);
    cuda::DeviceAllocator allocator(context);
    const Registered registered(allocator);
    const GpuOnHost on_host(fake);
    check_every_op_on(context, true);
  }
  fake.check_nothing_live();
}

TEST_CASE("cuda: on a real GPU, every op's rule matches its reference kernel", "[cuda]") {
  std::shared_ptr<const cuda::Context> context;
  try {
    (void)cuda::process_device_allocator(0);
    context = cuda::Context::open(cuda::process_driver(), 0);
  } catch (const Error& e) {
    WARN("skipped, no GPU: " << e.message());
    return;
  }
  check_every_op_on(context, false);
}

