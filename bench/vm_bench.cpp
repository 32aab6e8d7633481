// The VM's own overheads, on hand-assembled bytecode (so it includes
// lib/vm internals, unlike the workload benches):
//   VM/dispatch       a loop of Move / If / Goto / LoadConsti / ScalarBinary on
//                     scalar registers; counter ns_per_instruction
//   VM/alloc_tensor   AllocTensor of f32[16] in a storage allocated before the
//                     loop; counter ns_per_call (the loop's own instructions
//                     subtracted, as measured on the bare loop). The register
//                     already holds that view from the last iteration, as in
//                     a loop over planned memory
//   VM/alloc_tensor_new  the same, alternating f32[16] and f32[8] in one
//                     register, so that each AllocTensor makes a new view (as
//                     with shapes that change); counter ns_per_call
//   VM/alloc_storage  AllocStorage of 64 bytes from the warm pool + AllocTensor,
//                     per iteration (what an op's output costs before memory
//                     planning); counter ns_per_call (loop subtracted)
//   VM/invoke_packed  InvokePacked of an empty kernel with 3 tensor arguments;
//                     counter ns_per_call (loop subtracted likewise)
//   VM/invoke_packed_tiered  the same kernel with two dynamic dims, so that the
//                     call goes through its primitive's bucket table (the
//                     bucket of both dims computed, its specialized kernel
//                     found); the difference is what shape buckets cost a hit
#include <benchmark/benchmark.h>

#include <memory>

#include "nimble/runtime/kernel.hpp"
#include "nimble/vm/virtual_machine.hpp"
#include "vm/executable_data.hpp"

namespace nimble::vm {
namespace {

constexpr std::int64_t kIterations = 1'000'000;

Instruction ins(Opcode op, std::uint32_t dst = 0, std::uint32_t a = 0, std::uint32_t b = 0,
                std::uint32_t c = 0, std::uint32_t d = 0, std::uint8_t aux = 0) {
  Instruction in{.opcode = op};
  in.aux = aux;
  in.dst = dst;
  in.a = a;
  in.b = b;
  in.c = c;
  in.d = d;
  return in;
}

constexpr auto kI64 = static_cast<std::uint8_t>(DType::i64);

// @loop(%n: i64[]): i = 0; while (i < n) { <body>; i = i + 1; Move; LoadConsti }.
// The loop itself executes 6 instructions per iteration.
ExecutableData loop_with(std::vector<Instruction> body, std::uint32_t extra_registers) {
  ExecutableData d;
  const std::uint32_t base = 6;  // r0 n, r1 i, r2 one, r3 cond, r4 copy, r5 const
  std::vector<Instruction> code = {
      ins(Opcode::LoadConsti, 1, 0, 0, 0, 0, kI64),
      ins(Opcode::LoadConsti, 2, 1, 0, 0, 0, kI64),
  };
  const std::size_t head = code.size();
  code.push_back(ins(Opcode::ScalarBinary, 3, 1, 0, 0, 0, static_cast<std::uint8_t>(ScalarOp::lt)));
  const std::size_t branch = code.size();
  code.push_back(ins(Opcode::If, 0, 3, encode_jump(1), 0));
  for (Instruction in : body) code.push_back(in);
  code.push_back(ins(Opcode::ScalarBinary, 1, 1, 2, 0, 0, static_cast<std::uint8_t>(ScalarOp::add)));
  code.push_back(ins(Opcode::Move, 4, 1));
  code.push_back(ins(Opcode::LoadConsti, 5, 7, 0, 0, 0, kI64));
  code.push_back(ins(Opcode::Goto, 0, encode_jump(static_cast<std::int32_t>(head) -
                                                  static_cast<std::int32_t>(code.size()))));
  code[branch].c = encode_jump(static_cast<std::int32_t>(code.size() - branch));
  code.push_back(ins(Opcode::Ret, 0, 1));
  VMFunction f;
  f.name = "loop";
  f.param_names = {"n"};
  f.param_types = {TypeDesc{.kind = TypeDesc::Kind::tensor, .dtype = DType::i64}};
  f.result_type = f.param_types[0];
  f.num_registers = base + extra_registers;
  f.code_begin = 0;
  f.code_size = static_cast<std::uint32_t>(code.size());
  f.is_entry = true;
  d.functions.push_back(std::move(f));
  d.code = std::move(code);
  return d;
}

Executable make(ExecutableData d) {
  verify(d);
  return Executable(std::make_shared<const ExecutableData>(std::move(d)));
}

double run_loop(benchmark::State& state, VirtualMachine& machine) {
  const Value n = Tensor::scalar<std::int64_t>(kIterations);
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(machine.invoke("loop", {n}));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(s);
    seconds += s;
  }
  return seconds / static_cast<double>(state.iterations());
}

// Seconds per iteration of the bare loop (6 instructions), measured once.
double loop_seconds_per_iteration() {
  static const double seconds = [] {
    VirtualMachine machine(make(loop_with({}, 0)));
    const Value n = Tensor::scalar<std::int64_t>(kIterations);
    double best = 1e9;
    for (int k = 0; k < 5; ++k) {
      const auto start = std::chrono::steady_clock::now();
      (void)machine.invoke("loop", {n});
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return best / kIterations;
  }();
  return seconds;
}

void BM_dispatch(benchmark::State& state) {
  VirtualMachine machine(make(loop_with({}, 0)));
  const double seconds = run_loop(state, machine);
  state.counters["ns_per_instruction"] = seconds * 1e9 / (6.0 * kIterations + 4);
}

enum class AllocBody {
  tensor,          // AllocTensor f32[16]
  two_tensors,     // AllocTensor f32[16], then f32[8] into the same register
  storage_tensor,  // AllocStorage, then AllocTensor f32[16] in it
};

void alloc_bench(benchmark::State& state, AllocBody body) {
  const bool in_loop = body == AllocBody::storage_tensor;
  const Instruction alloc_storage = ins(Opcode::AllocStorage, 6, 7, 64, encode_device(Device::cpu()),
                                        0, static_cast<std::uint8_t>(DType::f32));
  const Instruction alloc_tensor =  // shape pool offset 0: [16]
      ins(Opcode::AllocTensor, 8, 6, 0, 0, 0, static_cast<std::uint8_t>(DType::f32));
  const Instruction alloc_other_tensor =  // shape pool offset 2: [8]
      ins(Opcode::AllocTensor, 8, 6, 0, 2, 0, static_cast<std::uint8_t>(DType::f32));
  std::vector<Instruction> instructions = {alloc_tensor};
  if (body == AllocBody::two_tensors) instructions.push_back(alloc_other_tensor);
  if (in_loop) instructions.insert(instructions.begin(), alloc_storage);
  const auto calls = static_cast<double>(body == AllocBody::two_tensors ? 2 : 1);
  ExecutableData d = loop_with(std::move(instructions), 4);
  // Before the loop (jumps are relative, so inserting there moves nothing):
  // r7 = 64 bytes, and the storage when it is not allocated in the loop.
  if (!in_loop) d.code.insert(d.code.begin(), alloc_storage);
  d.code.insert(d.code.begin(), ins(Opcode::LoadConsti, 7, 64, 0, 0, 0, kI64));
  d.functions[0].code_size = static_cast<std::uint32_t>(d.code.size());
  d.shape_pool = {1, 16, 1, 8};
  VirtualMachine machine(make(std::move(d)));
  const double seconds = run_loop(state, machine);
  state.counters["ns_per_call"] =
      (seconds / kIterations - loop_seconds_per_iteration()) * 1e9 / calls;
}

void BM_alloc_tensor(benchmark::State& state) { alloc_bench(state, AllocBody::tensor); }
void BM_alloc_tensor_new(benchmark::State& state) { alloc_bench(state, AllocBody::two_tensors); }
void BM_alloc_storage(benchmark::State& state) { alloc_bench(state, AllocBody::storage_tensor); }

// Does nothing; with `dynamic`, reports dim 0 of its first two arguments as
// dynamic (so that the KernelCache tiers it).
class EmptyKernel final : public Kernel {
 public:
  explicit EmptyKernel(bool dynamic) : dims_(dynamic ? 2 : 0) {}
  void run(TensorRefs, TensorRefs) const override {}
  std::span<const DynamicDim> dynamic_dims() const noexcept override {
    return std::span<const DynamicDim>(kDims).first(dims_);
  }

 private:
  static constexpr DynamicDim kDims[2] = {{0, 0}, {1, 0}};
  std::size_t dims_;
};

class EmptyProvider final : public KernelProvider {
 public:
  std::string_view name() const noexcept override { return "bench_empty"; }
  Ref<Kernel> get(const PrimitiveInfo& prim) override {
    if (prim.name != "empty" && prim.name != "empty_tiered") return {};
    return make_ref<EmptyKernel>(prim.name == "empty_tiered");
  }
  Ref<Kernel> specialize(const PrimitiveInfo&, const Bucket&) override { return make_ref<EmptyKernel>(false); }
};

void invoke_packed(benchmark::State& state, bool tiered) {
  KernelCache::global().add_provider(std::make_shared<EmptyProvider>(), 1000);
  KernelCacheOptions options = KernelCache::global().options();
  options.background = false;
  KernelCache::global().configure(options);
  ExecutableData d = loop_with({ins(Opcode::InvokePacked, 0, 0, 0, 3, 1)}, 3);
  for (std::uint32_t k = 0; k < 3; ++k) d.constants.push_back(Tensor::zeros({16}, DType::f32));
  // r6..r8 = three tensors, loaded before the loop.
  for (std::uint32_t k = 0; k < 3; ++k)
    d.code.insert(d.code.begin(), ins(Opcode::LoadConst, 6 + k, k));
  d.functions[0].code_size = static_cast<std::uint32_t>(d.code.size());
  d.arg_pool = {6, 7, 8};
  PrimitiveInfo prim{.name = tiered ? "empty_tiered" : "empty", .kind = PrimitiveKind::compute,
                     .num_inputs = 2, .num_outputs = 1,
                     .source = tiered ? "tiered empty kernel (bench)" : "empty kernel (bench)", .hash = 0};
  prim.hash = content_hash(prim.kind, prim.source);
  d.primitives.push_back(prim);
  VirtualMachine machine(make(std::move(d)));
  const double seconds = run_loop(state, machine);
  state.counters["ns_per_call"] = (seconds / kIterations - loop_seconds_per_iteration()) * 1e9;
}

BENCHMARK(BM_dispatch)->Name("VM/dispatch")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_alloc_tensor)->Name("VM/alloc_tensor")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_alloc_tensor_new)->Name("VM/alloc_tensor_new")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_alloc_storage)->Name("VM/alloc_storage")->UseManualTime()->Unit(benchmark::kMillisecond);
void BM_invoke_packed(benchmark::State& state) { invoke_packed(state, false); }
void BM_invoke_packed_tiered(benchmark::State& state) { invoke_packed(state, true); }

BENCHMARK(BM_invoke_packed)->Name("VM/invoke_packed")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_invoke_packed_tiered)->Name("VM/invoke_packed_tiered")->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace nimble::vm

BENCHMARK_MAIN();
