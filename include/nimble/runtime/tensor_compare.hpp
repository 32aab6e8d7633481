// Comparing tensors within a tolerance: how every test checks a result.
#pragma once

#include <optional>
#include <string>

#include "nimble/runtime/tensor.hpp"

namespace nimble {

/// Elements match when |actual - expected| <= atol + rtol * |expected|
/// (numpy.allclose). NaN matches NaN only with equal_nan; an infinity matches
/// only the same infinity.
struct Tolerance {
  double rtol = 1e-5;
  double atol = 1e-6;
  bool equal_nan = false;
};

/// nullopt when `actual` matches `expected` (same dtype, same shape, every
/// element within `tol`); otherwise a message saying what differs: the dtypes,
/// the shapes, or the number of mismatching elements and the worst one with
/// its multi-index and both values.
[[nodiscard]] std::optional<std::string> describe_mismatch(const Tensor& actual,
                                                           const Tensor& expected,
                                                           const Tolerance& tol = {});

[[nodiscard]] inline bool allclose(const Tensor& actual, const Tensor& expected,
                                   const Tolerance& tol = {}) {
  return !describe_mismatch(actual, expected, tol).has_value();
}

}  // namespace nimble
