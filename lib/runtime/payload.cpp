#include "runtime/payload.hpp"

#include <cstring>
#include <utility>

namespace nimble::runtime {

namespace {

template <class T>
void put(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // x86-64 and aarch64: little-endian
  out.append(bytes, sizeof(T));
}

}  // namespace

std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h) noexcept {
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

void PayloadWriter::u32(std::uint32_t v) { put(out_, v); }
void PayloadWriter::u64(std::uint64_t v) { put(out_, v); }

void PayloadWriter::str(std::string_view s) {
  u32(static_cast<std::uint32_t>(s.size()));
  out_.append(s);
}

std::string_view PayloadReader::bytes(std::uint64_t n) {
  if (failed_ || in_.size() < n) {
    failed_ = true;
    return {};
  }
  const std::string_view s = in_.substr(0, n);
  in_.remove_prefix(n);
  return s;
}

std::uint32_t PayloadReader::u32() {
  std::uint32_t v = 0;
  if (const std::string_view b = bytes(sizeof v); !failed_) std::memcpy(&v, b.data(), sizeof v);
  return v;
}

std::uint64_t PayloadReader::u64() {
  std::uint64_t v = 0;
  if (const std::string_view b = bytes(sizeof v); !failed_) std::memcpy(&v, b.data(), sizeof v);
  return v;
}

std::string PayloadReader::str() { return std::string(bytes(u32())); }

std::string_view PayloadReader::rest() { return std::exchange(in_, {}); }

}  // namespace nimble::runtime
