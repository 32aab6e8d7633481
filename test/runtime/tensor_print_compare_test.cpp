#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <vector>

#include "nimble/runtime/tensor_format.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;

TEST_CASE("tensors print as nested lists", "[runtime]") {
  CHECK(to_string(Tensor::from_data<float>({2, 3}, {1, 2.5f, 3, 4, 5, -6})) ==
        "Tensor<f32>[2, 3] cpu\n[[1, 2.5, 3],\n [4, 5, -6]]");
  CHECK(to_string(Tensor::scalar<std::int32_t>(7)) == "Tensor<i32>[] cpu\n7");
  CHECK(to_string(Tensor::from_data<bool>({2}, {true, false})) ==
        "Tensor<bool>[2] cpu\n[true, false]");
  CHECK(to_string(Tensor::zeros({2, 0}, DType::i8)) == "Tensor<i8>[2, 0] cpu\n[[],\n []]");
  CHECK(to_string(Tensor()) == "Tensor<undefined>");
  CHECK(fmt::format("{}", Tensor::from_data<std::int64_t>({1, 1, 2}, {1, 2})) ==
        "Tensor<i64>[1, 1, 2] cpu\n[[[1, 2]]]");
  CHECK(fmt::format("{} {} {}", Shape{3, 4}, DType::bf16, Device::cuda(2)) ==
        "[3, 4] bf16 cuda:2");
}

TEST_CASE("large tensors print truncated", "[runtime]") {
  std::vector<std::int32_t> values(100 * 20);
  std::iota(values.begin(), values.end(), 0);
  const Tensor t = Tensor::from_data<std::int32_t>({100, 20}, values);
  CHECK(to_string(t) ==
        "Tensor<i32>[100, 20] cpu\n"
        "[[0, 1, 2, ..., 17, 18, 19],\n"
        " [20, 21, 22, ..., 37, 38, 39],\n"
        " [40, 41, 42, ..., 57, 58, 59],\n"
        " ...,\n"
        " [1940, 1941, 1942, ..., 1957, 1958, 1959],\n"
        " [1960, 1961, 1962, ..., 1977, 1978, 1979],\n"
        " [1980, 1981, 1982, ..., 1997, 1998, 1999]]");
  TensorPrintOptions small;
  small.threshold = 2;
  small.edge_items = 1;
  small.precision = 3;
  CHECK(to_string(Tensor::from_data<double>({4}, {3.14159, 2, 3, 2.71828}), small) ==
        "Tensor<f64>[4] cpu\n[3.14, ..., 2.72]");
}

TEST_CASE("tensors compare within a tolerance", "[runtime]") {
  const Tensor e = Tensor::from_data<float>({2, 2}, {1, 2, 3, 4});
  CHECK(allclose(e, e));
  CHECK(allclose(Tensor::from_data<float>({2, 2}, {1, 2, 3, 4.00001f}), e));
  CHECK(describe_mismatch(Tensor::from_data<float>({2, 2}, {1, 2.5f, 3, 4.1f}), e) ==
        "2 of 4 elements differ (rtol 1e-05, atol 1e-06); worst at [0, 1]: expected 2, got 2.5 "
        "(difference 0.5)");
  CHECK(describe_mismatch(Tensor::zeros({2, 2}, DType::f64), e) == "expected dtype f32, got f64");
  CHECK(describe_mismatch(Tensor::zeros({4}, DType::f32), e) ==
        "expected shape [2, 2], got [4]");
  CHECK(describe_mismatch(Tensor(), e) == "expected a defined tensor, got a undefined tensor");
  CHECK(allclose(Tensor(), Tensor()));

  const float nan = std::nanf("");
  const float inf = INFINITY;
  const Tensor special = Tensor::from_data<float>({3}, {nan, inf, -inf});
  CHECK_FALSE(allclose(special, special));  // NaN != NaN by default
  CHECK(allclose(special, special, {.equal_nan = true}));
  CHECK_FALSE(allclose(Tensor::from_data<float>({3}, {nan, inf, inf}), special,
                       {.equal_nan = true}));
  CHECK(allclose(Tensor::from_data<float>({1}, {1.5f}), Tensor::from_data<float>({1}, {1.0f}),
                 {.rtol = 0.0, .atol = 0.5}));
  CHECK_FALSE(allclose(Tensor::from_data<float>({1}, {1.6f}), Tensor::from_data<float>({1}, {1.0f}),
                       {.rtol = 0.0, .atol = 0.5}));
}
