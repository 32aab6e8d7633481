// Catch2 support for tensors: CHECK_THAT(actual, IsCloseTo(expected)), and
// printing of tensors in failure messages.
#pragma once

#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "nimble/error.hpp"
#include "nimble/runtime/tensor.hpp"
#include "nimble/runtime/tensor_compare.hpp"

namespace nimble::testing {

/// The distance from 1 to the next float of `t` (0 for integers): the unit
/// of the tolerance policy.
inline double epsilon(DType t) {
  switch (t) {
    case DType::f32: return 0x1p-23;
    case DType::f64: return 0x1p-52;
    case DType::f16: return 0x1p-10;
    case DType::bf16: return 0x1p-7;
    default: return 0;
  }
}

/// Matches a tensor of the same dtype and shape whose elements are within
/// `tol` of `expected`; on failure, says what differs.
class IsCloseTo : public Catch::MatcherBase<Tensor> {
 public:
  explicit IsCloseTo(Tensor expected, Tolerance tol = {})
      : expected_(std::move(expected)), tol_(tol) {}

  bool match(const Tensor& actual) const override {
    mismatch_ = describe_mismatch(actual, expected_, tol_);
    return !mismatch_;
  }
  std::string describe() const override {
    return "is close to " + to_string(expected_) + (mismatch_ ? "\n  but " + *mismatch_ : "");
  }

 private:
  Tensor expected_;
  Tolerance tol_;
  mutable std::optional<std::string> mismatch_;
};

}  // namespace nimble::testing

namespace Catch {
template <>
struct StringMaker<nimble::Tensor> {
  static std::string convert(const nimble::Tensor& t) { return nimble::to_string(t); }
};
}  // namespace Catch

/// Checks that `expr` throws a nimble::Error of `kind` whose message matches
/// the Catch string matcher `matcher`.
#define CHECK_NIMBLE_ERROR_MATCHES(expr, error_kind, matcher)                         \
  do {                                                                                \
    try {                                                                             \
      static_cast<void>(expr);                                                        \
      FAIL_CHECK("expected nimble::Error(" << nimble::to_string(error_kind)            \
                                           << ") from: " #expr);                      \
    } catch (const nimble::Error& e) {                                                \
      CHECK(nimble::to_string(e.kind()) == nimble::to_string(error_kind));            \
      CHECK_THAT(e.message(), matcher);                                               \
    }                                                                                 \
  } while (false)

/// Checks that `expr` throws a nimble::Error of `kind` whose message is exactly `text`.
#define CHECK_NIMBLE_ERROR(expr, error_kind, text) \
  CHECK_NIMBLE_ERROR_MATCHES(expr, error_kind, Catch::Equals(std::string(text)))

/// Checks that `expr` throws a nimble::Error of `kind` whose message contains `text`.
#define CHECK_NIMBLE_ERROR_CONTAINS(expr, error_kind, text) \
  CHECK_NIMBLE_ERROR_MATCHES(expr, error_kind, Catch::Contains(std::string(text)))
