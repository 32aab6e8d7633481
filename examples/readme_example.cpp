// The example in README.md, kept compiling: a dynamic function built in C++,
// its inferred type, and tensors over host memory.
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

  std::vector<float> host(2 * 768, 1.0f);              // memory the host owns
  Tensor x = Tensor::borrow<float>({2, 768}, host);   // a view of it, no copy
  fmt::print("x: {} {}, borrowed: {}\n", x.shape(), x.dtype(), x.is_borrowed());
  try {
    (void)x.at<float>({2, 0});  // row 2 of 2: out of range
  } catch (const Error& e) {
    fmt::print("nimble::Error: {}\n", e.what());
  }
}
