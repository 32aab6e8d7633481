// The binary image of a saved Executable (lib/vm/serializer.cpp), and what
// the verifier shares with it.
//
//   offset  size  field
//        0     8  magic "NIMBLEVM"
//        8     4  format version (kFormatVersion)
//       12     4  flags (none defined yet: must be 0)
//       16     8  payload size in bytes (everything after the header)
//       24     8  FNV-1a 64 checksum of the payload
//       32     …  payload
//
// The payload is a fixed sequence of sections, each a 4-byte tag, a u64 byte
// size and its contents: FUNC (functions), CODE (instructions), ARGS (the
// argument pool), SHAP (the shape pool), CNST (constants), PRIM (primitives),
// STRS (strings), ADTS (type definitions). All integers are little-endian
// and fixed width; a string or a list is a u32 count and then its elements;
// an enum is one byte; a tensor is its dtype, a u32 rank, the i64 dims and
// the raw row-major bytes; a TypeDesc is its kind, dtype, dims, fields
// (recursively, at most kMaxTypeDepth deep) and name. A primitive is its
// name, kind, input and output counts, source, hash and device (kind, u32 index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace nimble::vm::format {

inline constexpr std::string_view kMagic = "NIMBLEVM";
inline constexpr std::uint32_t kFormatVersion = 2;  // 2: a primitive records its device
inline constexpr std::size_t kHeaderSize = 32;
inline constexpr std::size_t kPayloadSizeOffset = 16;
inline constexpr std::size_t kChecksumOffset = 24;

/// How deeply TypeDescs may nest (tuples of tuples, ADT arguments): deep
/// enough for any real program, shallow enough that reading, printing and
/// checking a type by recursion cannot overflow the stack.
inline constexpr std::size_t kMaxTypeDepth = 64;

/// FNV-1a 64 of `bytes`.
[[nodiscard]] std::uint64_t fnv1a64(std::span<const std::byte> bytes) noexcept;

/// Rewrites the payload size and checksum in the header of `image` (at least
/// kHeaderSize bytes) to match the bytes after it. Lets tests and the fuzzer
/// take a corrupted payload past the checksum to the parser and verifier.
void reseal(std::span<std::byte> image) noexcept;

}  // namespace nimble::vm::format
