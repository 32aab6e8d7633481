// nimble's demo (script/demo): one model, compiled once, run on sentences of
// different lengths. The LSTM of ../shared/workloads.md is written with the
// builder (examples/models/lstm.hpp); nimble infers that it maps f32[?, 1, 300]
// to f32[?, 1, 512], compiles it to bytecode once, and runs it on the VM for
// any length, checking each input against the declared type.
#include <nimble/nimble.hpp>

#include "models/lstm.hpp"
#include "models/workloads.hpp"

int main() {
  using namespace nimble;
  const HostTarget& target = host_target();
  fmt::print("nimble {} (LLVM {}) on {}, cpu {}\n\n", kVersion, llvm_version(), target.triple,
             target.cpu);
  try {
    Builder b;
    const Function lstm = models::build_lstm(b);
    const ir::Module module = b.build();
    fmt::print("@lstm : {}\n", ir::to_string(module.find_function(lstm.name()).type()));
    vm::VirtualMachine machine(compile(module));
    fmt::print("compiled to bytecode once; entry points: {}\n\n",
               fmt::join(machine.executable().entry_points(), ", "));

    const std::vector<Tensor> weights = workloads::w1_weights();
    for (std::int64_t length : {3, 17, 64}) {
      std::vector<Value> args{workloads::w1_input(length)};
      args.insert(args.end(), weights.begin(), weights.end());
      const Tensor out = machine.invoke(lstm.name(), args).tensor();
      workloads::Checksum c;
      c.add(out);
      fmt::print("sentence of {:>2} words -> output {}   {}\n", length, out.shape(),
                 workloads::checksum_line("W1", length, c));
    }

    // A sentence of the wrong width is reported, not computed.
    std::vector<Value> bad{Tensor::zeros({5, 1, 200}, DType::f32)};
    bad.insert(bad.end(), weights.begin(), weights.end());
    (void)machine.invoke(lstm.name(), bad);
  } catch (const Error& e) {
    fmt::print("\nnimble::Error ({}): {}\n", to_string(e.kind()), e.what());
  }
  return 0;
}
