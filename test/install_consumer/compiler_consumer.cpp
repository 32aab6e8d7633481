// Links nimble::nimble: the compiler library (with LLVM inside) plus the runtime.
#include <nimble/nimble.hpp>

#include <cstdio>

int main() {
  // Builder operators are found without a using-directive.
  nimble::Builder b;
  b.def("f", {{"x", nimble::f32({nimble::Dim("n"), 4})}},
        [](nimble::Expr x) { return nimble::relu(x) * 2.0 + x; });
  const nimble::ir::Module m = b.build();
  std::printf("%s", nimble::ir::print(m).c_str());
  const nimble::HostTarget& target = nimble::host_target();
  if (target.triple.empty()) return 1;
  const nimble::Tensor t = nimble::Tensor::zeros({3}, nimble::DType::i32);
  std::printf("compiler consumer: nimble %s with LLVM %s on %s (%s); %s\n", nimble::kVersion,
              nimble::llvm_version().c_str(), target.triple.c_str(), target.cpu.c_str(),
              fmt::format("{}", t.shape()).c_str());
  return 0;
}
