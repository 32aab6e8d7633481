// The example in README.md, kept compiling: a dynamic function built in C++,
// its inferred type, compiled to bytecode and run on the VM over host memory.
#include <nimble/nimble.hpp>

#include <vector>

int main() {
  using namespace nimble;
  Builder b;
  const Dim n{"n"};  // a sequence length known only at run time
  Function layer = b.def(
      "layer", {{"x", f32({n, 768})}, {"w", f32({3072, 768})}, {"bias", f32({3072})}},
      [](Expr x, Expr w, Expr bias) { return gelu(dense(x, w, bias)) * 0.5; });
  b.entry(layer);
  const ir::Module m = b.build();  // verified and type-checked
  fmt::print("{}\n@layer : {}\n", ir::print(m), ir::to_string(m.find_function("layer").type()));

  vm::VirtualMachine machine(compile(m));  // bytecode; kernels come on first use

  std::vector<float> host(2 * 768, 1.0f);              // memory the host owns
  Tensor x = Tensor::borrow<float>({2, 768}, host);   // a view of it, no copy
  const Tensor w = Tensor::full({3072, 768}, 0.001, DType::f32);
  const Tensor bias = Tensor::zeros({3072}, DType::f32);
  const Tensor y = machine.invoke("layer", {x, w, bias}).tensor();  // n = 2 this time
  fmt::print("y: {} {}, y[0, 0] = {:.6f}\n", y.shape(), y.dtype(), y.at<float>({0, 0}));
  try {
    (void)machine.invoke("layer", {Tensor::zeros({2, 300}, DType::f32), w, bias});
  } catch (const Error& e) {
    fmt::print("nimble::Error: {}\n", e.what());
  }
}
