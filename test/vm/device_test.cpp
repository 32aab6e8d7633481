// place_devices end to end on a second device. No GPU here: the second
// device is host memory registered under a CUDA device id (a fake device),
// so the host's kernels can run on it while every allocation, copy and
// placement decision is the one a real second device would get. Each
// program must compute what the reference interpreter computes, its
// results must come back to the host, and kernels' outputs must live on
// the device.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <memory>
#include <new>

#include "models/lstm.hpp"
#include "models/tree_lstm.hpp"
#include "models/bert.hpp"
#include "models/workloads.hpp"
#include "nimble/nimble.hpp"
#include "passes/golden.hpp"
#include "support/model_args.hpp"
#include "support/same_value.hpp"
#include "support/vm_checks.hpp"

using namespace nimble;
using nimble::testing::all_on_host;
using nimble::testing::close_value;
using nimble::testing::executed;

namespace {

// Host memory that calls itself `device`.
class FakeDevice final : public Allocator {
 public:
  explicit FakeDevice(Device device, bool host_accessible = true)
      : device_(device), host_accessible_(host_accessible) {
    register_allocator(*this);
  }
  ~FakeDevice() override { unregister_allocator(device_); }
  FakeDevice(const FakeDevice&) = delete;
  FakeDevice& operator=(const FakeDevice&) = delete;

  void* allocate(std::size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    allocations_.fetch_add(1);
    live_.fetch_add(nbytes);
    return ::operator new(nbytes, std::align_val_t{kAlignment});
  }
  void deallocate(void* p, std::size_t nbytes) noexcept override {
    if (p == nullptr) return;
    live_.fetch_sub(nbytes);
    ::operator delete(p, std::align_val_t{kAlignment});
  }
  [[nodiscard]] AllocatorStats stats() const noexcept override {
    return {.live_bytes = live_.load(), .allocations = allocations_.load()};
  }
  [[nodiscard]] Device device() const noexcept override { return device_; }
  [[nodiscard]] bool host_accessible() const noexcept override { return host_accessible_; }
  // Memory the host "cannot read" still copies (it is host memory): a
  // device with copies but no code generator.
  void copy_from_host(void* dst, const void* src, std::size_t n) override { std::memcpy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, std::size_t n) override { std::memcpy(dst, src, n); }

 private:
  Device device_;
  bool host_accessible_;
  std::atomic<std::size_t> live_{0};
  std::atomic<std::uint64_t> allocations_{0};
};

const Tolerance kTolerance{.rtol = 1e-4, .atol = 1e-5};

// `entry` of `m` compiled for cuda:3 answers on the host what the CPU does.
void check_matches_cpu(const ir::Module& m, const std::string& entry, const std::vector<Value>& args) {
  vm::VirtualMachine on_device(compile(m, {.target = Device::cuda(3)}));
  vm::VirtualMachine on_cpu(compile(m));
  const Value out = on_device.invoke(entry, args);
  CHECK(all_on_host(out));
  CHECK(close_value(out, on_cpu.invoke(entry, args), kTolerance));
}

}  // namespace

TEST_CASE("devices: a program placed on a second device computes on it and answers on the host", "[vm]") {
  FakeDevice device(Device::cuda(3));
  ir::Module m = ir::parse(nimble::testing::kPlacementProgram);
  ir::infer_types(m);
  // Unfused, so that each op is one kernel with its own output.
  auto machine_owner = std::make_unique<vm::VirtualMachine>(compile(m, {.fuse_ops = false, .target = Device::cuda(3)}));
  vm::VirtualMachine& machine = *machine_owner;
  const Tensor w = Tensor::full({4, 4}, 0.25, DType::f32);
  for (double fill : {0.5, -3.0}) {
    INFO("x filled with " << fill << (fill > 0 ? " (the call)" : " (the other branch)"));
    const Tensor x = Tensor::full({5, 4}, fill, DType::f32);
    const std::vector<Value> args{x, w, Tensor::scalar<std::int64_t>(7)};
    machine.set_profiling(true);
    const std::uint64_t before = device.stats().allocations;
    const Value out = machine.invoke("f", args);
    CHECK(close_value(out, evaluate(m, "f", args), kTolerance));
    CHECK(all_on_host(out));
    // On the device: the outputs of exp, add, sum, greater, and of matmul
    // and tanh in the call; the copies of x and (for the call) w; on the
    // first call, the constant greater reads (kept by the VM). Copies of c
    // and r come back to the host.
    CHECK(device.stats().allocations - before == (fill > 0 ? 9u : 5u));
    CHECK(executed(machine.profile(), "DeviceCopy") == (fill > 0 ? 4u : 3u));
  }
  CHECK(device.stats().live_bytes == 4);  // the VM's copy of the constant
  machine_owner.reset();
  CHECK(device.stats().live_bytes == 0);  // nothing else on the device outlives a call
}

TEST_CASE("devices: the LSTM, the Tree-LSTM and BERT on a second device match the CPU", "[vm]") {
  FakeDevice device(Device::cuda(3));
  {
    Builder b;
    models::build_lstm(b);
    const ir::Module m = b.build();
    std::vector<Value> args{workloads::w1_input(3)};
    for (const Tensor& t : workloads::w1_weights()) args.emplace_back(t);
    check_matches_cpu(m, "lstm", args);
  }
  {
    Builder b;
    models::build_tree_lstm(b);
    const ir::Module m = b.build();
    const Adt tree(m.find_adt("Tree"));
    const auto shape = workloads::w2_tree(8);
    const std::function<Value(const workloads::TreeShape&)> tree_value = [&](const workloads::TreeShape& t) {
      if (t.leaf >= 0) return tree["Leaf"].value({Tensor::scalar(t.leaf)});
      return tree["Node"].value({tree_value(*t.left), tree_value(*t.right)});
    };
    std::vector<Value> args{tree_value(*shape), workloads::w2_leaves(8)};
    for (const Tensor& t : workloads::w2_weights()) args.emplace_back(t);
    check_matches_cpu(m, "tree_lstm", args);
  }
  {
    // BERT takes its layers' weights as a List of tuples from the host: the
    // list goes to the device once, at the entry.
    Builder b;
    models::build_bert(b);
    const ir::Module m = b.build();
    check_matches_cpu(m, "bert", nimble::testing::bert_args(m, 2, 7));
  }
  CHECK(device.stats().allocations > 0);
  CHECK(device.stats().live_bytes == 0);
}

TEST_CASE("devices: what cannot run on a second device says so", "[vm]") {
  ir::Module m = ir::parse(nimble::testing::kPlacementProgram);
  ir::infer_types(m);
  const std::vector<Value> args{Tensor::full({5, 4}, 0.5, DType::f32), Tensor::full({4, 4}, 0.25, DType::f32),
                                Tensor::scalar<std::int64_t>(7)};
  // No allocator for the device (no driver here; on a GPU machine, not
  // that many GPUs): compiling needs none, running does.
  {
    vm::VirtualMachine machine(compile(m, {.target = Device::cuda(99)}));
    CHECK_THROWS_WITH(machine.invoke("f", args), Catch::Contains("not supported") && Catch::Contains("cuda:99"));
  }
  // Memory the host cannot read, and not a GPU's: nothing can run there.
  {
    KernelCache::global().clear();  // kernels for cuda:5 made while another test registered it
    FakeDevice opaque(Device::cuda(5), /*host_accessible=*/false);
    vm::VirtualMachine machine(compile(m, {.target = Device::cuda(5)}));
    CHECK_THROWS_WITH(machine.invoke("f", args), Catch::Contains("not supported: ") &&
                                                     Catch::Contains("on cuda:5: no code generator for its memory"));
    KernelCache::global().clear();
  }
}

TEST_CASE("devices: a copy from a device the tensor is not on is an error, not a misread", "[vm]") {
  FakeDevice device(Device::cuda(3));
  ir::Module m = ir::parse(R"(
entry def @g(%x: f32[4]) -> f32[4] {
  let %y = device_copy(%x, src="cuda:3", dst="cpu");
  %y
}
)");
  ir::infer_types(m);
  vm::VirtualMachine machine(compile(m));
  const Tensor x = Tensor::full({4}, 1.0, DType::f32);
  // A tensor already where the copy goes is itself (a host may pass tensors
  // that live on the device already); one on a third device is an error.
  CHECK(machine.invoke("g", {x}).tensor().storage() == x.storage());
  FakeDevice other(Device::cuda(4));
  CHECK_THROWS_WITH(machine.invoke("g", {x.to(Device::cuda(4))}),
                    Catch::Contains("device_copy: expected a tensor on cuda:3, got one on cuda:4"));
  // The VM is usable afterwards, and a copy from where the tensor is works.
  ir::Module ok = ir::parse(R"(
entry def @g(%x: f32[4]) -> f32[4] {
  let %y = device_copy(%x, src="cpu", dst="cuda:3");
  let %z = device_copy(%y, src="cuda:3", dst="cpu");
  %z
}
)");
  ir::infer_types(ok);
  vm::VirtualMachine round_trip(compile(ok));
  const Value back = round_trip.invoke("g", {x});
  CHECK(back.tensor().device() == Device::cpu());
  CHECK(close_value(back, Value(x), kTolerance));
  CHECK(back.tensor().raw_data() != x.raw_data());
}
