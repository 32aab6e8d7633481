// The concrete shape of a tensor: a list of non-negative extents.
//
// (Symbolic and `Any` dims belong to the IR's TensorType; a Shape is what a
// tensor has at run time.) Ranks up to kInlineRank are stored inline, so the
// shapes the VM makes per instruction never touch the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>

namespace nimble {

class Shape {
 public:
  static constexpr std::size_t kInlineRank = 6;

  /// The shape of a scalar (rank 0, one element).
  Shape() noexcept {}  // NOLINT(modernize-use-equals-default): see Tensor()
  /// Throws Error(invalid_argument) if a dim is negative or the element count
  /// overflows int64.
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::span<const std::int64_t> dims);

  // Copies and moves are inline: copying a Tensor (a kernel argument, a
  // register the VM copies) is mostly copying its Shape, and a call into the
  // library plus a memmove cost more than the inline dims themselves.
  Shape(const Shape& other) : rank_(other.rank_), numel_(other.numel_) {
    std::memcpy(inline_, other.inline_, sizeof inline_);
    if (other.heap_) [[unlikely]]
      copy_heap(other);
  }
  Shape(Shape&& other) noexcept
      : rank_(std::exchange(other.rank_, 0)),
        numel_(std::exchange(other.numel_, 1)),
        heap_(std::move(other.heap_)) {
    std::memcpy(inline_, other.inline_, sizeof inline_);
  }
  Shape& operator=(const Shape& other) {
    if (this == &other) return *this;
    rank_ = other.rank_;
    numel_ = other.numel_;
    std::memcpy(inline_, other.inline_, sizeof inline_);
    if (other.heap_ || heap_) [[unlikely]]
      copy_heap(other);
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this == &other) return *this;
    rank_ = std::exchange(other.rank_, 0);
    numel_ = std::exchange(other.numel_, 1);
    heap_ = std::move(other.heap_);
    std::memcpy(inline_, other.inline_, sizeof inline_);
    return *this;
  }
  ~Shape() = default;

  [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
  /// Extent of axis `axis`; negative axes count from the end. Throws
  /// Error(out_of_range) for an axis outside [-rank, rank).
  [[nodiscard]] std::int64_t dim(std::int64_t axis) const;
  [[nodiscard]] std::int64_t operator[](std::size_t axis) const noexcept { return data()[axis]; }
  [[nodiscard]] std::span<const std::int64_t> dims() const noexcept { return {data(), rank_}; }
  [[nodiscard]] const std::int64_t* begin() const noexcept { return data(); }
  [[nodiscard]] const std::int64_t* end() const noexcept { return data() + rank_; }

  /// Product of the dims (1 for a scalar).
  [[nodiscard]] std::int64_t numel() const noexcept { return numel_; }

  friend bool operator==(const Shape& a, const Shape& b) noexcept;

 private:
  void assign(std::span<const std::int64_t> dims);
  void copy_heap(const Shape& other);  // heap_ = a copy of other's dims (or none)
  [[nodiscard]] const std::int64_t* data() const noexcept {
    return heap_ ? heap_.get() : inline_;
  }

  std::size_t rank_ = 0;
  std::int64_t numel_ = 1;
  std::int64_t inline_[kInlineRank] = {};
  std::unique_ptr<std::int64_t[]> heap_;  // only when rank_ > kInlineRank
};

/// "[2, 3]"; a scalar is "[]".
[[nodiscard]] std::string to_string(const Shape& shape);

}  // namespace nimble
