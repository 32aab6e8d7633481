// Little-endian binary fields for what nimble writes and reads back itself:
// disk-cache entries and exported artifacts. Reading never trusts the input:
// every read past the end sets failed() and yields zeros, so a truncated or
// corrupt payload is detected, never read out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nimble::runtime {

/// FNV-1a 64 of `bytes`, continuing from `h` (the basis by default).
[[nodiscard]] std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h = 0xcbf29ce484222325ull) noexcept;

class PayloadWriter {
 public:
  void u32(std::uint32_t v);
  void u64(std::uint64_t v);
  void i32(std::int32_t v) { u32(static_cast<std::uint32_t>(v)); }
  /// A u32 size, then the bytes.
  void str(std::string_view s);
  void bytes(std::string_view s) { out_.append(s); }
  [[nodiscard]] std::size_t size() const noexcept { return out_.size(); }
  [[nodiscard]] std::string take() && { return std::move(out_); }

 private:
  std::string out_;
};

class PayloadReader {
 public:
  explicit PayloadReader(std::string_view in) : in_(in) {}
  std::uint32_t u32();
  std::uint64_t u64();
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
  std::string str();
  /// The next `n` bytes (a view into the input).
  std::string_view bytes(std::uint64_t n);
  /// The rest of the payload.
  std::string_view rest();
  [[nodiscard]] std::size_t remaining() const noexcept { return in_.size(); }
  [[nodiscard]] bool failed() const noexcept { return failed_; }
  /// Marks the payload bad (a field out of its range).
  void fail() noexcept { failed_ = true; }

 private:
  std::string_view in_;
  bool failed_ = false;
};

}  // namespace nimble::runtime
