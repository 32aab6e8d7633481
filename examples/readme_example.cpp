// The example in README.md, kept compiling: tensors, borrowed host memory,
// errors that say what went wrong.
#include <nimble/nimble.hpp>

#include <vector>

int main() {
  using namespace nimble;
  std::vector<float> host(2 * 3, 1.5f);  // memory the host owns
  Tensor x = Tensor::borrow<float>({2, 3}, host);  // a view, no copy
  x.at<float>({1, 2}) = 4.0f;                      // writes into `host`
  Tensor w = Tensor::full({3}, 2.0, DType::f32);   // owned, pooled, 64-byte aligned
  fmt::print("{}\n{}\n", x, w);
  try {
    (void)x.at<float>({2, 0});  // row 2 of 2: out of range
  } catch (const Error& e) {
    fmt::print("nimble::Error: {}\n", e.what());
  }
  return allclose(x.reshape({6}), Tensor::from_data<float>({6}, {1.5, 1.5, 1.5, 1.5, 1.5, 4}))
             ? 0 : 1;
}
