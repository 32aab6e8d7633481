// Links nimble::nimble: the compiler library (with LLVM inside) plus the runtime.
#include <nimble/nimble.hpp>

#include <cstdio>

int main() {
  const nimble::HostTarget& target = nimble::host_target();
  if (target.triple.empty()) return 1;
  const nimble::Tensor t = nimble::Tensor::zeros({3}, nimble::DType::i32);
  std::printf("compiler consumer: nimble %s with LLVM %s on %s (%s); %s\n", nimble::kVersion,
              nimble::llvm_version().c_str(), target.triple.c_str(), target.cpu.c_str(),
              fmt::format("{}", t.shape()).c_str());
  return 0;
}
