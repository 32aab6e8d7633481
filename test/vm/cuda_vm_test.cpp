// Programs compiled for a GPU (compile's target = cuda:0) run through the
// CUDA runtime on the fake driver: placement puts kernels on the device,
// the VM allocates their outputs there and copies values across with the
// driver, the JIT makes GPU kernels (PTX loaded by the driver, stages
// launched) — and each launch runs on the host with the GPU's schedule of
// the same kernel (support/gpu_on_host.hpp), so the answers can be checked
// against the reference interpreter here. On a machine with a GPU, the same
// programs run on it in the "on a real GPU" case.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cuda/gpu_kernel.hpp"
#include "codegen/cuda/gpu_schedule.hpp"
#include "codegen/kernel_ir.hpp"
#include "codegen/primitive_rule.hpp"
#include "models/bert.hpp"
#include "models/lstm.hpp"
#include "models/tree_lstm.hpp"
#include "models/workloads.hpp"
#include "nimble/nimble.hpp"
#include "passes/golden.hpp"
#include "runtime/cuda/allocator.hpp"
#include "runtime/cuda/context.hpp"
#include "support/cache_scope.hpp"
#include "support/fake_cuda.hpp"
#include "support/gpu_on_host.hpp"
#include "support/model_args.hpp"
#include "support/ptxas.hpp"
#include "support/same_value.hpp"
#include "support/vm_checks.hpp"
#include "vm/executable_data.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using namespace nimble::testing;

namespace {

const Tolerance kTolerance{.rtol = 1e-4, .atol = 1e-5};
constexpr Device kGpu = Device::cuda(0);

ir::Module typed(const char* text) {
  ir::Module m = ir::parse(text);
  ir::infer_types(m);
  return m;
}

// The fake's device 0 as cuda:0, its launches run on the host.
struct FakeGpu {
  explicit FakeGpu(std::size_t memory = std::size_t{256} << 20, int compute_capability = 90)
      : fake(1, memory, compute_capability), context(cuda::Context::open(fake.open(), 0)), allocator(context), registered(allocator),
        on_host(fake) {}
  FakeDriver fake;
  std::shared_ptr<const cuda::Context> context;
  cuda::DeviceAllocator allocator;
  Registered registered;
  GpuOnHost on_host;
};

Value tree_value(const Adt& tree, const workloads::TreeShape& t) {
  if (t.leaf >= 0) return tree["Leaf"].value({Tensor::scalar(t.leaf)});
  return tree["Node"].value({tree_value(tree, *t.left), tree_value(tree, *t.right)});
}

// A workload's model, entry and arguments.
struct ModelCase {
  ir::Module module;
  std::string entry;
  std::vector<Value> args;
};

ModelCase lstm_case(std::int64_t length) {
  Builder b;
  models::build_lstm(b);
  ModelCase c{b.build(), "lstm", {workloads::w1_input(length)}};
  for (const Tensor& t : workloads::w1_weights()) c.args.emplace_back(t);
  return c;
}

ModelCase tree_lstm_case(std::int64_t leaves) {
  Builder b;
  models::build_tree_lstm(b);
  ModelCase c{b.build(), "tree_lstm", {}};
  const Adt tree(c.module.find_adt("Tree"));
  c.args = {tree_value(tree, *workloads::w2_tree(leaves)), workloads::w2_leaves(leaves)};
  for (const Tensor& t : workloads::w2_weights()) c.args.emplace_back(t);
  return c;
}

ModelCase bert_case(int layers, std::int64_t length) {
  Builder b;
  models::build_bert(b);
  ModelCase c{b.build(), "bert", {}};
  c.args = bert_args(c.module, layers, length);
  return c;
}

// `c` compiled for the GPU answers on the host what the reference
// interpreter does; on the fake, `fake`'s launches show it ran there.
void check_on_gpu(const ModelCase& c, const FakeDriver* fake = nullptr) {
  INFO(c.entry);
  vm::VirtualMachine machine(compile(c.module, {.target = kGpu}));
  const int launches = fake ? fake->launch_count() : 0;
  const Value out = machine.invoke(c.entry, c.args);
  CHECK(all_on_host(out));
  CHECK(close_value(out, evaluate(c.module, c.entry, c.args), kTolerance));
  if (fake) CHECK(fake->launch_count() - launches >= 3);
}

}  // namespace

TEST_CASE("cuda: a program compiled for a GPU launches its kernels there and answers on the host", "[cuda]") {
  {
    FakeGpu gpu;
    const ir::Module m = typed(kPlacementProgram);
    vm::VirtualMachine machine(compile(m, {.target = kGpu}));
    const Tensor w = Tensor::full({4, 4}, 0.25, DType::f32);
    for (double fill : {0.5, -3.0}) {
      INFO("x filled with " << fill << (fill > 0 ? " (the call)" : " (the other branch)"));
      const Tensor x = Tensor::full({5, 4}, fill, DType::f32);
      const std::vector<Value> args{x, w, Tensor::scalar<std::int64_t>(7)};
      machine.set_profiling(true);
      const int launches = gpu.fake.launch_count();
      const int to_device = gpu.fake.calls("cuMemcpyHtoDAsync_v2");
      const Value out = machine.invoke("f", args);
      CHECK(close_value(out, evaluate(m, "f", args), kTolerance));
      CHECK(all_on_host(out));
      CHECK(gpu.fake.launch_count() > launches);
      // x (and for the call w) went to the device through the driver.
      CHECK(gpu.fake.calls("cuMemcpyHtoDAsync_v2") > to_device);
      CHECK(executed(machine.profile(), "DeviceCopy") >= (fill > 0 ? 4u : 3u));
    }
    // The VM keeps the constant it uploaded (0f32, which greater reads on
    // the device); nothing else on the device outlives a call.
    CHECK(gpu.allocator.stats().live_bytes == 4);
    CHECK(gpu.allocator.stats().allocations > 0);
  }
}

TEST_CASE("cuda: the LSTM, the Tree-LSTM and BERT compiled for a GPU match the reference", "[cuda]") {
  FakeGpu gpu;
  check_on_gpu(lstm_case(5), &gpu.fake);
  check_on_gpu(tree_lstm_case(8), &gpu.fake);
  check_on_gpu(tree_lstm_case(19), &gpu.fake);  // by levels (models::kTreeLevelsFrom)
  // BERT's weights, a list of tuples of 16 tensors a layer, go to the device
  // at the entry: one copy each, through the driver.
  const int copies = gpu.fake.calls("cuMemcpyHtoDAsync_v2");
  check_on_gpu(bert_case(2, 7), &gpu.fake);
  CHECK(gpu.fake.calls("cuMemcpyHtoDAsync_v2") - copies >= 2 * 16);
  CHECK(gpu.allocator.stats().live_bytes == 0);
}

TEST_CASE("cuda: the fused kernels of the LSTM, the Tree-LSTM and BERT get the GPU's schedules and pass ptxas",
          "[cuda]") {
  FakeGpu gpu;
  const std::string ptxas = find_ptxas();
  if (ptxas.empty()) WARN("ptxas not run: the CUDA toolkit is not installed");
  // Which schedules the models' stages get, over all their GPU primitives.
  std::map<std::string, int> schedules;
  int primitives = 0;
  for (const ModelCase& c : {lstm_case(5), tree_lstm_case(19), bert_case(2, 7)}) {
    const vm::Executable exe = compile(c.module, {.target = kGpu});
    for (const PrimitiveInfo& prim : exe.data().primitives) {
      if (prim.device != kGpu || prim.kind != PrimitiveKind::compute) continue;
      INFO(c.entry << ": " << prim.name);
      const std::optional<codegen::PrimitiveRule> rule = codegen::primitive_rule(prim);
      REQUIRE(rule.has_value());
      ++primitives;
      const codegen::KernelIR ir = codegen::lower_to_kernel_ir(prim.name, rule->inputs, rule->outputs);
      for (const codegen::Stage& stage : codegen::schedule_for_gpu(ir).stages)
        ++schedules[stage.product_tiles          ? "tiles"
                    : stage.lanes == codegen::kBlockLanes ? "block"
                    : stage.lanes == codegen::kWarpLanes  ? "warp"
                    : stage.vector_elements > 1           ? "vectors"
                                                          : "elements"];
      if (ptxas.empty()) continue;
      for (const int sm : {80, 90}) {
        const codegen::PtxKernel kernel = codegen::gpu_kernel_ptx(prim.name, rule->inputs, rule->outputs, {sm});
        const PtxasResult result = run_ptxas(ptxas, kernel.ptx, fmt::format("sm_{}", sm));
        INFO("sm_" << sm << ":\n" << result.log);
        CHECK(result.status == 0);
      }
    }
  }
  INFO(primitives << " GPU primitives");
  CHECK(primitives >= 10);
  // BERT's products are tiles, its softmax and layer_norm rows warps; the
  // LSTM's one-row products warps; the cells' element-wise math threads.
  CHECK(schedules["tiles"] >= 4);
  CHECK(schedules["warp"] >= 4);
  CHECK(schedules["elements"] + schedules["vectors"] >= 4);
}

TEST_CASE("cuda: each VirtualMachine launches on a stream of its own; VMs on two threads answer at once", "[cuda]") {
  FakeGpu gpu;
  const ModelCase c = lstm_case(3);
  const Value expected = evaluate(c.module, c.entry, c.args);
  const vm::Executable exe = compile(c.module, {.target = kGpu});
  const int streams_before = gpu.fake.live_streams();
  {
    vm::VirtualMachine first(exe);
    vm::VirtualMachine second(exe);
    // The streams one call's launches went on.
    const auto streams_of_call = [&](vm::VirtualMachine& machine) {
      const int from = gpu.fake.launch_count();
      CHECK(close_value(machine.invoke(c.entry, c.args), expected, kTolerance));
      std::set<void*> used;
      for (int i = from; i < gpu.fake.launch_count(); ++i) used.insert(gpu.fake.launch(i).stream);
      return used;
    };
    const std::set<void*> a = streams_of_call(first);
    const std::set<void*> b = streams_of_call(second);
    REQUIRE(a.size() == 1);
    REQUIRE(b.size() == 1);
    CHECK(*a.begin() != nullptr);
    CHECK(*a.begin() != *b.begin());
    CHECK(streams_of_call(first) == a);  // call after call
    // Both at once, each on its thread (Catch's checks after the joins).
    std::optional<Value> results[2];
    std::string errors[2];
    vm::VirtualMachine* machines[2] = {&first, &second};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&, t] {
        try {
          for (int call = 0; call < 3; ++call) results[t] = machines[t]->invoke(c.entry, c.args);
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < 2; ++t) {
      INFO("thread " << t << ": " << errors[t]);
      REQUIRE(results[t].has_value());
      CHECK(close_value(*results[t], expected, kTolerance));
    }
    // The VMs' two streams are all there are: neither the kernels nor the
    // allocator needed one of their own.
    CHECK(gpu.fake.live_streams() == streams_before + 2);
  }
  // A VM's streams go with it.
  CHECK(gpu.fake.live_streams() == streams_before);
}

TEST_CASE("cuda: weights the host moved to the GPU once are not copied by the calls", "[cuda]") {
  FakeGpu gpu;
  ModelCase c = bert_case(2, 7);
  const Value expected = evaluate(c.module, c.entry, c.args);
  vm::VirtualMachine machine(compile(c.module, {.target = kGpu}));
  const auto copied_per_call = [&](const std::vector<Value>& args) {
    (void)machine.invoke(c.entry, args);  // kernels compiled, constants uploaded
    const int before = gpu.fake.calls("cuMemcpyHtoDAsync_v2");
    CHECK(close_value(machine.invoke(c.entry, args), expected, kTolerance));
    return gpu.fake.calls("cuMemcpyHtoDAsync_v2") - before;
  };
  const int host_weights = copied_per_call(c.args);
  const Value layers = c.args[1].to(kGpu);
  CHECK(layers[0][0].tensor().device() == kGpu);
  const int device_weights = copied_per_call({c.args[0], layers});
  // 2 layers of 16 weights each went over on every call; now none do.
  CHECK(host_weights - device_weights >= 32);
}

TEST_CASE("cuda: an entry's tuple goes to the GPU with its integer scalars left on the CPU", "[cuda]") {
  FakeGpu gpu;
  const ir::Module m = typed(R"(
entry def @h(%p: (f32[4], i64[])) -> f32[4] {
  let %a = %p.0;
  let %n = %p.1;
  let %c = greater(%n, 0i64);
  let %r = if (%c) {
    let %e = exp(%a);
    %e
  } else {
    %a
  };
  %r
}
)");
  vm::VirtualMachine machine(compile(m, {.target = kGpu}));
  for (std::int64_t n : {3, -3}) {
    const std::vector<Value> args{Value::tuple({Tensor::from_data<float>({4}, {1, 2, 3, 4}), Tensor::scalar(n)})};
    const Value out = machine.invoke("h", args);
    CHECK(all_on_host(out));
    CHECK(close_value(out, evaluate(m, "h", args), kTolerance));
  }
}

TEST_CASE("cuda: results asked on the GPU stay there, a list of them too", "[cuda]") {
  FakeGpu gpu;
  const ir::Module m = typed(R"(
type List<T> { Nil, Cons(T, List<T>) }

entry def @f(%x: f32[3], %k: i64[]) -> (f32[3], List<f32[3]>, i64[]) {
  let %e = exp(%x);
  let %t = tanh(%e);
  let %j = add(%k, 1i64);
  let %l = Cons(%e, Cons(%t, Nil));
  (%t, %l, %j)
}
)");
  const std::vector<Value> args{Tensor::from_data<float>({3}, {-1, 0, 2}), Tensor::scalar<std::int64_t>(4)};
  const Value expected = evaluate(m, "f", args);
  // By default results come back to the host, which a list of GPU tensors
  // cannot do yet.
  CHECK_THROWS_WITH(compile(m, {.target = kGpu}),
                    Catch::Contains("not supported") && Catch::Contains("would hold tensors on cuda:0"));
  vm::VirtualMachine machine(compile(m, {.target = kGpu, .result_device = kGpu}));
  (void)machine.invoke("f", args);  // kernels compiled
  machine.set_profiling(true);
  const int to_host = gpu.fake.calls("cuMemcpyDtoHAsync_v2");
  const Value out = machine.invoke("f", args);
  // Nothing came back to the host but the kernels' status words (one read
  // per kernel call), and no DeviceCopy ran but x's to the GPU.
  CHECK(gpu.fake.calls("cuMemcpyDtoHAsync_v2") - to_host <=
        static_cast<int>(executed(machine.profile(), "InvokePacked")));
  CHECK(executed(machine.profile(), "DeviceCopy") == 1);
  CHECK(out[0].tensor().device() == kGpu);
  CHECK(out[1][0].tensor().device() == kGpu);
  CHECK(out[1][1][0].tensor().device() == kGpu);
  CHECK(out[2].tensor().device() == Device::cpu());  // the VM's scalar
  CHECK(close_value(out.to(Device::cpu()), expected, kTolerance));
  // The results held the GPU's memory; gone with them.
  const std::size_t live = gpu.allocator.stats().live_bytes;
  { const Value dropped = machine.invoke("f", args); CHECK(gpu.allocator.stats().live_bytes > live); }
  CHECK(gpu.allocator.stats().live_bytes == live);
  // Only the CPU or the target.
  CHECK_THROWS_WITH(compile(m, {.target = kGpu, .result_device = Device::cuda(1)}),
                    "compile: result_device must be the CPU or the target (cuda:0), got cuda:1");
  CHECK_THROWS_WITH(compile(m, {.result_device = kGpu}),
                    "compile: result_device must be the CPU or the target (cpu), got cuda:0");
}

TEST_CASE("cuda: a tuple an entry returns to another function reaches its kernels on the GPU", "[cuda]") {
  FakeGpu gpu;
  const ir::Module m = typed(kEntryCallsEntry);
  const std::vector<Value> args{Tensor::from_data<float>({2}, {0.5f, -1.0f})};
  for (const Device results : {Device::cpu(), kGpu}) {
    INFO("results on " << to_string(results));
    vm::VirtualMachine machine(compile(m, {.target = kGpu, .result_device = results}));
    const Value out = machine.invoke("main", args);
    CHECK(close_value(out.to(Device::cpu()), evaluate(m, "main", args), kTolerance));
  }
}

TEST_CASE("cuda: a saved executable keeps its kernels' devices", "[cuda]") {
  FakeGpu gpu;
  const ir::Module m = typed(kPlacementProgram);
  const vm::Executable loaded = vm::Executable::load(compile(m, {.target = kGpu}).save());
  vm::VirtualMachine machine(loaded);
  const std::vector<Value> args{Tensor::full({5, 4}, 0.5, DType::f32), Tensor::full({4, 4}, 0.25, DType::f32),
                                Tensor::scalar<std::int64_t>(7)};
  const int launches = gpu.fake.launch_count();
  CHECK(close_value(machine.invoke("f", args), evaluate(m, "f", args), kTolerance));
  CHECK(gpu.fake.launch_count() > launches);
  // The listing says where each primitive runs (the CPU's say nothing).
  CHECK_THAT(loaded.disassemble(), Catch::Contains("inputs 2, outputs 1  on cuda:0"));
}

TEST_CASE("cuda: tensors move between the host and a GPU through the driver", "[cuda]") {
  FakeGpu gpu;
  const Tensor x = Tensor::from_data<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor on_gpu = x.to(kGpu);
  CHECK(on_gpu.device() == kGpu);
  CHECK(on_gpu.to(kGpu).storage() == on_gpu.storage());  // already there: no copy
  CHECK_NIMBLE_ERROR((void)on_gpu.raw_data(), ErrorKind::invalid_argument,
                     "Tensor::raw_data: elements of a tensor on cuda:0 cannot be read on the host");
  const Tensor copy = on_gpu.clone();  // device to device
  CHECK(copy.storage() != on_gpu.storage());
  CHECK_THAT(copy.to(Device::cpu()), IsCloseTo(x));
  CHECK_THAT(Tensor::zeros({3}, DType::i32, kGpu).to(Device::cpu()),
             IsCloseTo(Tensor::from_data<std::int32_t>({3}, {0, 0, 0})));
  CHECK(gpu.fake.calls("cuMemcpyDtoDAsync_v2") == 1);
  // A failing copy is an Error naming the call.
  gpu.fake.fail_next("cuMemcpyDtoHAsync_v2", 1 /* CUDA_ERROR_INVALID_VALUE */);
  CHECK_THROWS_WITH(on_gpu.to(Device::cpu()), Catch::Contains("CUDA: cuMemcpyDtoHAsync_v2 failed"));
}

TEST_CASE("cuda: what a GPU cannot run, or run out of, is an Error and leaks nothing", "[cuda]") {
  const ir::Module m = typed(kPlacementProgram);
  const Tensor w = Tensor::full({4, 4}, 0.25, DType::f32);
  const std::vector<Value> args{Tensor::full({5, 4}, 0.5, DType::f32), w, Tensor::scalar<std::int64_t>(7)};
  {
    // A device of the process that does not exist (no driver here; on a GPU
    // machine, not that many GPUs): compiling needs no device, running does.
    vm::VirtualMachine machine(compile(m, {.target = Device::cuda(99)}));
    CHECK_NIMBLE_ERROR_CONTAINS(machine.invoke("f", args), ErrorKind::not_supported, "memory on cuda:99: not supported");
  }
  {
    // Out of device memory in the middle of a program.
    FakeGpu gpu(256);
    vm::VirtualMachine machine(compile(m, {.target = kGpu}));
    CHECK_THROWS_WITH(machine.invoke("f", args), Catch::Contains("out of device memory on cuda:0"));
    CHECK(gpu.allocator.stats().live_bytes == 0);
  }
  {
    // The driver rejects the PTX: its log is in the Error.
    FakeGpu gpu;
    gpu.fake.fail_next("cuModuleLoadDataEx", 218 /* CUDA_ERROR_INVALID_PTX */);
    vm::VirtualMachine machine(compile(m, {.target = kGpu}));
    CHECK_THROWS_WITH(machine.invoke("f", args), Catch::Contains("cuModuleLoadDataEx"));
  }
}

TEST_CASE("cuda: GPU kernels are specialized per shape bucket, each launched under its own entries", "[cuda]") {
  const ir::Module m = typed(kPlacementProgram);
  KernelCacheOptions options = KernelCache::global().options();
  options.background = false;  // each new bucket specialized before its call
  const ScopedCacheOptions scope(options);
  FakeGpu gpu;
  vm::VirtualMachine machine(compile(m, {.target = kGpu}));
  const Tensor w = Tensor::full({4, 4}, 0.25, DType::f32);
  for (std::int64_t rows : {4, 70, 4}) {
    INFO(rows << " rows");
    const std::vector<Value> args{Tensor::full({rows, 4}, 0.5, DType::f32), w, Tensor::scalar<std::int64_t>(7)};
    const int launches = gpu.fake.launch_count();
    CHECK(close_value(machine.invoke("f", args), evaluate(m, "f", args), kTolerance));
    REQUIRE(gpu.fake.launch_count() > launches);
    // Every launch of the call is a specialized kernel's, but greater's on
    // a scalar (no dynamic dim: nothing to specialize).
    for (int i = launches; i < gpu.fake.launch_count(); ++i) {
      const std::string entry = gpu.fake.launch(i).entry;
      INFO(entry);
      CHECK((entry.find("_b") != std::string::npos || entry.starts_with("greater_")));
    }
  }
  // Two buckets ([=4] and [70's range]) of each GPU primitive, compiled once each.
  std::map<std::string, std::set<std::string>> buckets;
  for (const KernelCompileRecord& r : kernel_compile_log()) {
    if (!r.bucket.empty()) CHECK(buckets[r.name].insert(r.bucket).second);
    // PTX through NVPTX, the prologue through the host JIT, the PTX loaded.
    CHECK(r.optimize_ms > 0);
    CHECK(r.codegen_ms > 0);
    CHECK(r.link_ms > 0);
    CHECK(r.optimize_ms + r.codegen_ms + r.link_ms <= r.ms);
  }
  CHECK(buckets.size() >= 2);
  for (const auto& [name, seen] : buckets) CHECK(seen.size() == 2);

  // An export takes the buckets seen, with their PTX; the runtime launches them.
  const TempDir dir;
  std::filesystem::create_directories(dir.str());
  const ExportReport report = export_executable(machine.executable(), dir.str() + "/f.nimble");
  CHECK(report.specialized >= 2 * buckets.size());
  CHECK(report.gpu_kernels > report.specialized);
  KernelCache::global().clear();
  reset_engine_stats();
  vm::VirtualMachine aot(load_artifact(dir.str() + "/f.nimble"));
  aot.set_kernel_provider("aot");
  const std::vector<Value> args{Tensor::full({70, 4}, -0.5, DType::f32), w, Tensor::scalar<std::int64_t>(7)};
  const int launches = gpu.fake.launch_count();
  CHECK(close_value(aot.invoke("f", args), evaluate(m, "f", args), kTolerance));
  int specialized = 0;
  for (int i = launches; i < gpu.fake.launch_count(); ++i)
    specialized += std::string(gpu.fake.launch(i).entry).find("_b") != std::string::npos ? 1 : 0;
  CHECK(specialized >= 1);
  CHECK(engine_stats().kernels_compiled == 0);
}

TEST_CASE("cuda: GPU kernels are kept in the disk cache and loaded from it by a fresh cache", "[cuda]") {
  const TempDir dir;
  const ir::Module m = typed(kPlacementProgram);
  const std::vector<Value> args{Tensor::full({5, 4}, 0.5, DType::f32), Tensor::full({4, 4}, 0.25, DType::f32),
                                Tensor::scalar<std::int64_t>(7)};
  const Value expected = evaluate(m, "f", args);
  KernelCacheOptions options = KernelCache::global().options();
  options.disk_cache_dir = dir.str();
  options.background = false;
  const ScopedCacheOptions scope(options);
  FakeGpu gpu;
  const auto run = [&] {
    vm::VirtualMachine machine(compile(m, {.target = kGpu}));
    const int launches = gpu.fake.launch_count();
    CHECK(close_value(machine.invoke("f", args), expected, kTolerance));
    CHECK(gpu.fake.launch_count() > launches);
  };
  const auto fresh_cache = [] {
    KernelCache::global().clear();
    reset_engine_stats();
  };
  const auto read = [](const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };

  run();
  const std::uint64_t compiled = engine_stats().kernels_compiled;
  CHECK(compiled > 0);
  CHECK(engine_stats().disk_hits == 0);
  // Every kernel is stored; a GPU kernel's entry holds its PTX.
  const std::vector<std::filesystem::path> files = dir.files();
  CHECK(files.size() == compiled);
  const auto gpu_kernels = static_cast<int>(std::count_if(
      files.begin(), files.end(), [&](const std::filesystem::path& f) { return read(f).find(".entry ") != std::string::npos; }));
  CHECK(gpu_kernels >= 1);

  SECTION("a fresh cache loads every kernel: the PTX into the driver, nothing compiled") {
    fresh_cache();
    const int modules = gpu.fake.calls("cuModuleLoadDataEx");
    run();
    CHECK(engine_stats().kernels_compiled == 0);
    CHECK(engine_stats().disk_hits == compiled);
    CHECK(gpu.fake.calls("cuModuleLoadDataEx") - modules == gpu_kernels);
  }
  SECTION("corrupt entries are rejected, compiled and stored again") {
    for (const std::filesystem::path& f : files) {
      std::string bytes = read(f);
      bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
      std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
    }
    fresh_cache();
    run();
    CHECK(engine_stats().disk_rejected == compiled);
    CHECK(engine_stats().kernels_compiled == compiled);
    fresh_cache();
    run();
    CHECK(engine_stats().disk_hits == compiled);
  }
  SECTION("a stored PTX the driver rejects is replaced") {
    fresh_cache();
    gpu.fake.fail_next("cuModuleLoadDataEx", 218 /* CUDA_ERROR_INVALID_PTX */);
    run();
    CHECK(engine_stats().disk_rejected == 1);
    CHECK(engine_stats().kernels_compiled == 1);
  }
}

TEST_CASE("cuda: an export of a program compiled for a GPU runs from the runtime, its PTX loaded there", "[cuda]") {
  const TempDir dir;
  std::filesystem::create_directories(dir.str());
  const std::string path = dir.str() + "/placement.nimble";
  const ir::Module m = typed(kPlacementProgram);
  const std::vector<Value> args{Tensor::full({5, 4}, 0.5, DType::f32), Tensor::full({4, 4}, 0.25, DType::f32),
                                Tensor::scalar<std::int64_t>(7)};
  const Value expected = evaluate(m, "f", args);
  const vm::Executable exe = compile(m, {.target = kGpu});
  // Exporting needs no GPU.
  const ExportReport report = export_executable(exe, path);
  CHECK(report.gpu_kernels >= 1);
  {
    FakeGpu gpu;
    // The JIT's run registers the fake's host stages under the entries'
    // names, which the export's PTX shares.
    vm::VirtualMachine jit(exe);
    CHECK(close_value(jit.invoke("f", args), expected, kTolerance));
    KernelCache::global().clear();
    reset_engine_stats();
    vm::VirtualMachine aot(load_artifact(path));
    aot.set_kernel_provider("aot");
    const int modules = gpu.fake.calls("cuModuleLoadDataEx");
    const int launches = gpu.fake.launch_count();
    CHECK(close_value(aot.invoke("f", args), expected, kTolerance));
    CHECK(gpu.fake.launch_count() > launches);
    CHECK(gpu.fake.calls("cuModuleLoadDataEx") - modules == static_cast<int>(report.gpu_kernels));
    CHECK(engine_stats().kernels_compiled == 0);
  }
  {
    // The runtime loads the highest PTX the device has: an sm_80 GPU runs
    // the sm_80 PTX of an export for sm_80 and sm_90; one for sm_90 only
    // is refused there, naming both.
    FakeGpu gpu(std::size_t{256} << 20, 80);
    vm::VirtualMachine jit(exe);
    CHECK(close_value(jit.invoke("f", args), expected, kTolerance));
    KernelCache::global().clear();
    vm::VirtualMachine aot(load_artifact(path));
    aot.set_kernel_provider("aot");
    CHECK(close_value(aot.invoke("f", args), expected, kTolerance));
    (void)export_executable(exe, path, {.cuda_targets = {"sm_90"}});
    KernelCache::global().clear();
    vm::VirtualMachine newer(load_artifact(path));
    newer.set_kernel_provider("aot");
    CHECK_NIMBLE_ERROR_CONTAINS(newer.invoke("f", args), ErrorKind::not_supported,
                                "has PTX for sm_90 and later; cuda:0 is sm_80");
  }
  // Targets nimble does not know are refused.
  CHECK_NIMBLE_ERROR_CONTAINS(export_executable(exe, path, {.cuda_targets = {"sm_75"}}), ErrorKind::invalid_argument,
                              "CUDA target \"sm_75\"");
  CHECK_NIMBLE_ERROR_CONTAINS(export_executable(exe, path, {.cuda_targets = {"hopper"}}), ErrorKind::invalid_argument,
                              "not of the form sm_NN");
  CHECK_NIMBLE_ERROR_CONTAINS(export_executable(exe, path, {.cuda_targets = {}}), ErrorKind::invalid_argument,
                              "cuda_targets is empty");
}

TEST_CASE("cuda: on a real GPU, programs compiled for it match the reference", "[cuda]") {
  try {
    (void)cuda::process_device_allocator(0);
  } catch (const Error& e) {
    WARN("skipped, no GPU: " << e.message());
    return;
  }
  KernelCache::global().clear();
  {
    const ir::Module m = typed(kPlacementProgram);
    vm::VirtualMachine machine(compile(m, {.target = kGpu}));
    for (double fill : {0.5, -3.0}) {
      const std::vector<Value> args{Tensor::full({37, 4}, fill, DType::f32), Tensor::full({4, 4}, 0.25, DType::f32),
                                    Tensor::scalar<std::int64_t>(7)};
      const Value out = machine.invoke("f", args);
      CHECK(all_on_host(out));
      CHECK(close_value(out, evaluate(m, "f", args), kTolerance));
    }
  }
  check_on_gpu(lstm_case(37));
  check_on_gpu(tree_lstm_case(8));
  check_on_gpu(tree_lstm_case(19));
  check_on_gpu(bert_case(12, 37));
  {
    // Results left on the GPU, read back by the host.
    const ModelCase c = lstm_case(37);
    vm::VirtualMachine machine(compile(c.module, {.target = kGpu, .result_device = kGpu}));
    const Value out = machine.invoke(c.entry, c.args);
    CHECK_FALSE(all_on_host(out));
    CHECK(close_value(out.to(Device::cpu()), evaluate(c.module, c.entry, c.args), kTolerance));
  }
  {
    // Exported (PTX for sm_80 and sm_90), loaded and run by the runtime.
    const TempDir dir;
    std::filesystem::create_directories(dir.str());
    const ir::Module m = typed(kPlacementProgram);
    (void)export_executable(compile(m, {.target = kGpu}), dir.str() + "/f.nimble");
    KernelCache::global().clear();
    vm::VirtualMachine aot(load_artifact(dir.str() + "/f.nimble"));
    aot.set_kernel_provider("aot");
    const std::vector<Value> args{Tensor::full({37, 4}, 0.5, DType::f32), Tensor::full({4, 4}, 0.25, DType::f32),
                                  Tensor::scalar<std::int64_t>(7)};
    CHECK(close_value(aot.invoke("f", args), evaluate(m, "f", args), kTolerance));
  }
  KernelCache::global().clear();
}
