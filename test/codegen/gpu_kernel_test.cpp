// The GPU's kernels (lib/codegen/cuda/gpu_kernel.hpp) without a GPU: every
// op's rule with the GPU's schedule (grid-stride stages, plain loop nests,
// failures through the status word) compiled for the host and run against
// the op's reference kernel on grids of several sizes; the same rules' PTX
// assembled by ptxas for sm_80 and sm_90 where the toolkit is installed.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <limits>
#include <map>
#include <string>

#include "codegen/cuda/gpu_kernel.hpp"
#include "codegen/kernel_ir.hpp"
#include "ops/ops.hpp"
#include "nimble/runtime/storage.hpp"
#include "runtime/cuda/allocator.hpp"
#include "runtime/cuda/context.hpp"
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
      const PtxasResult result = run_ptxas(ptxas, kernel.ptx, fmt::format("sm_{}", sm));
      INFO("sm_" << sm << ":\n" << result.log << "\n" << kernel.ptx);
      CHECK(result.status == 0);
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
    // for the extent (37 rows: one block).
    REQUIRE(fake.launch_count() - launches_before == static_cast<int>(ir.stages.size()));
    for (int i = launches_before; i < fake.launch_count(); ++i) {
      const FakeLaunch l = fake.launch(i);
      CHECK(l.block[0] == 256);
      CHECK(l.grid[0] == 1);
      CHECK(l.num_params == 6);
      CHECK(l.params[4] == 0);   // begin
      CHECK(l.params[5] == 37);  // end: the rows
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

}  // namespace
