#include "nimble/runtime/shape.hpp"

#include <algorithm>
#include <utility>

#include "support/check.hpp"

namespace nimble {

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  assign({dims.begin(), dims.size()});
}

Shape::Shape(std::span<const std::int64_t> dims) { assign(dims); }

// A copy of a valid shape needs no checks: copy the fields.
void Shape::copy_heap(const Shape& other) {
  if (!other.heap_) {
    heap_.reset();
    return;
  }
  heap_ = std::make_unique<std::int64_t[]>(rank_);
  std::copy(other.heap_.get(), other.heap_.get() + rank_, heap_.get());
}


void Shape::assign(std::span<const std::int64_t> dims) {
  std::int64_t numel = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0)
      throw_error(ErrorKind::invalid_argument,
                  "invalid shape [{}]: dim {} is {}, but dims must be >= 0",
                  fmt::join(dims, ", "), i, dims[i]);
    if (__builtin_mul_overflow(numel, dims[i], &numel))
      throw_error(ErrorKind::invalid_argument,
                  "invalid shape [{}]: the element count overflows int64", fmt::join(dims, ", "));
  }
  // Only now, when nothing can throw, change *this.
  std::unique_ptr<std::int64_t[]> heap;
  if (dims.size() > kInlineRank) heap = std::make_unique<std::int64_t[]>(dims.size());
  heap_ = std::move(heap);
  std::int64_t* out = heap_ ? heap_.get() : inline_;
  std::copy(dims.begin(), dims.end(), out);
  rank_ = dims.size();
  numel_ = numel;
}

std::int64_t Shape::dim(std::int64_t axis) const {
  const auto rank = static_cast<std::int64_t>(rank_);
  if (axis < -rank || axis >= rank)
    throw_error(ErrorKind::out_of_range, "axis {} is out of range for shape {} (rank {})", axis,
                to_string(*this), rank);
  return data()[axis < 0 ? axis + rank : axis];
}

bool operator==(const Shape& a, const Shape& b) noexcept {
  return std::ranges::equal(a.dims(), b.dims());
}

std::string to_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape.dims(), ", "));
}

}  // namespace nimble
