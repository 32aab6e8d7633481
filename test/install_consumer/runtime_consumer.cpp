// Links only nimble::runtime: tensors without the compiler or LLVM.
#include <nimble/runtime.hpp>

#include <cstdio>

int main() {
  const nimble::Tensor t = nimble::Tensor::from_data<float>({2, 2}, {1, 2, 3, 4});
  if (t.at<float>({1, 1}) != 4.0f) return 1;
  try {
    (void)t.data<double>();
    return 1;
  } catch (const nimble::Error& e) {
    std::printf("runtime consumer: nimble %s, caught: %s\n", nimble::kVersion, e.what());
  }
  std::printf("%s\n", nimble::to_string(t).c_str());
  return 0;
}
