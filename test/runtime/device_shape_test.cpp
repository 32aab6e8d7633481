#include <catch2/catch.hpp>

#include "nimble/runtime/device.hpp"
#include "nimble/runtime/shape.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;

TEST_CASE("devices print and parse", "[runtime]") {
  CHECK(to_string(Device::cpu()) == "cpu");
  CHECK(to_string(Device::cuda(1)) == "cuda:1");
  CHECK(parse_device("cpu") == Device::cpu());
  CHECK(parse_device("cuda") == Device::cuda(0));
  CHECK(parse_device("cuda:3") == Device::cuda(3));
  CHECK_NIMBLE_ERROR(parse_device("gpu"), ErrorKind::parse_error,
                     "expected a device ('cpu', 'cuda' or 'cuda:N'), got 'gpu'");
  CHECK_NIMBLE_ERROR(parse_device("cuda:-1"), ErrorKind::parse_error,
                     "expected a device ('cpu', 'cuda' or 'cuda:N'), got 'cuda:-1'");
  CHECK_NIMBLE_ERROR(parse_device("cuda:1x"), ErrorKind::parse_error,
                     "expected a device ('cpu', 'cuda' or 'cuda:N'), got 'cuda:1x'");
}

TEST_CASE("shapes hold dims inline and on the heap", "[runtime]") {
  const Shape scalar;
  CHECK(scalar.rank() == 0);
  CHECK(scalar.numel() == 1);
  CHECK(to_string(scalar) == "[]");

  const Shape s{2, 3, 4};
  CHECK(s.rank() == 3);
  CHECK(s.numel() == 24);
  CHECK(s.dim(-1) == 4);
  CHECK(s[0] == 2);
  CHECK(to_string(s) == "[2, 3, 4]");
  CHECK(Shape{0, 5}.numel() == 0);

  const Shape big{1, 2, 3, 4, 5, 6, 7, 8};  // beyond the inline capacity
  CHECK(big.rank() == 8);
  CHECK(big.numel() == 40320);
  Shape copy = big;
  CHECK(copy == big);
  Shape moved = std::move(copy);
  CHECK(moved == big);
  CHECK(copy.rank() == 0);  // NOLINT(bugprone-use-after-move): moved-from is a scalar
  copy = s;
  CHECK(copy == s);
  CHECK_FALSE(copy == big);
  moved = s;  // heap -> inline
  CHECK(moved == s);
}

TEST_CASE("bad shapes are errors", "[runtime]") {
  CHECK_NIMBLE_ERROR((Shape{2, -3}), ErrorKind::invalid_argument,
                     "invalid shape [2, -3]: dim 1 is -3, but dims must be >= 0");
  CHECK_NIMBLE_ERROR((Shape{std::int64_t{1} << 40, std::int64_t{1} << 40}),
                     ErrorKind::invalid_argument,
                     "invalid shape [1099511627776, 1099511627776]: the element count overflows "
                     "int64");
  const Shape s{2, 3};
  CHECK_NIMBLE_ERROR(s.dim(2), ErrorKind::out_of_range,
                     "axis 2 is out of range for shape [2, 3] (rank 2)");
  CHECK_NIMBLE_ERROR(s.dim(-3), ErrorKind::out_of_range,
                     "axis -3 is out of range for shape [2, 3] (rank 2)");
}

TEST_CASE("errors carry a kind and gather context", "[runtime]") {
  Error e(ErrorKind::type_error, "expected f32, got i32");
  e.with_context("argument 'x'").with_context("function 'main'");
  CHECK(e.message() == "function 'main': argument 'x': expected f32, got i32");
  CHECK(std::string(e.what()) == e.message());
  CHECK(e.kind() == ErrorKind::type_error);
  CHECK(to_string(ErrorKind::not_supported) == "not_supported");
  // Catchable as std::exception.
  CHECK_THROWS_AS(throw Error(ErrorKind::runtime_error, "x"), std::exception);
}
