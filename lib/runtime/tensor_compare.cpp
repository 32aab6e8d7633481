#include "nimble/runtime/tensor_compare.hpp"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "runtime/element.hpp"

namespace nimble {
namespace {

// Row-major multi-index of element `flat`, as "[i, j, k]".
std::string multi_index(const Shape& shape, std::int64_t flat) {
  std::vector<std::int64_t> index(shape.rank());
  for (std::size_t a = shape.rank(); a-- > 0;) {
    index[a] = flat % shape[a];
    flat /= shape[a];
  }
  return fmt::format("[{}]", fmt::join(index, ", "));
}

}  // namespace

std::optional<std::string> describe_mismatch(const Tensor& actual, const Tensor& expected,
                                             const Tolerance& tol) {
  if (!actual.defined() || !expected.defined()) {
    if (actual.defined() == expected.defined()) return std::nullopt;
    return fmt::format("expected a {} tensor, got a {} tensor",
                       expected.defined() ? "defined" : "undefined",
                       actual.defined() ? "defined" : "undefined");
  }
  if (actual.dtype() != expected.dtype())
    return fmt::format("expected dtype {}, got {}", to_string(expected.dtype()),
                       to_string(actual.dtype()));
  if (actual.shape() != expected.shape())
    return fmt::format("expected shape {}, got {}", to_string(expected.shape()),
                       to_string(actual.shape()));

  const void* a = actual.raw_data();
  const void* e = expected.raw_data();
  std::int64_t mismatches = 0;
  std::int64_t worst = -1;
  double worst_excess = -1.0;  // how far past its allowance the worst element is
  for (std::int64_t i = 0; i < actual.numel(); ++i) {
    const double x = load_as_double(a, actual.dtype(), i);
    const double y = load_as_double(e, expected.dtype(), i);
    double excess;
    if (std::isnan(x) || std::isnan(y)) {
      if (tol.equal_nan && std::isnan(x) && std::isnan(y)) continue;
      excess = INFINITY;
    } else if (std::isinf(x) || std::isinf(y)) {
      if (x == y) continue;
      excess = INFINITY;
    } else {
      excess = std::fabs(x - y) - (tol.atol + tol.rtol * std::fabs(y));
      if (excess <= 0.0) continue;
    }
    ++mismatches;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (mismatches == 0) return std::nullopt;
  const double x = load_as_double(a, actual.dtype(), worst);
  const double y = load_as_double(e, expected.dtype(), worst);
  return fmt::format(
      "{} of {} elements differ (rtol {}, atol {}); worst at {}: expected {}, got {} "
      "(difference {})",
      mismatches, actual.numel(), tol.rtol, tol.atol, multi_index(actual.shape(), worst), y, x,
      std::fabs(x - y));
}

}  // namespace nimble
