// The VM's fixed-width instruction and the tables generated from
// opcodes.def. Every instruction is 24 bytes; a function's code is a
// contiguous run of them in the Executable. Variable-length operands
// (call arguments, ADT fields, shapes) live in side pools that an
// instruction indexes, so the dispatch loop never decodes a length.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "nimble/runtime/device.hpp"

namespace nimble::vm {

enum class Opcode : std::uint8_t {
#define NIMBLE_OPCODE(name, dst, a, b, c, d, aux) name,
#include "vm/opcodes.def"
#undef NIMBLE_OPCODE
};

inline constexpr std::size_t kNumOpcodes = 0
#define NIMBLE_OPCODE(name, dst, a, b, c, d, aux) +1
#include "vm/opcodes.def"
#undef NIMBLE_OPCODE
    ;

/// What an instruction field holds (see opcodes.def).
enum class Operand : std::uint8_t {
  none, reg, func, const_, packed, str, shape, args, count, outputs, jump, imm, device, dtype,
  scalar, tag
};

/// Scalar integer / bool operations the VM runs itself (loop counters, shape
/// arithmetic): no kernel call, no allocation.
enum class ScalarOp : std::uint8_t {
  add, sub, mul, div, rem, minimum, maximum,   // integer, as the ops (div truncates)
  eq, ne, lt, le, gt, ge,                      // -> bool
  logical_and, logical_or,                     // bool
  neg, abs, logical_not,                       // unary
};
inline constexpr std::uint8_t kNumScalarOps = static_cast<std::uint8_t>(ScalarOp::logical_not) + 1;
[[nodiscard]] std::string_view scalar_op_name(ScalarOp op) noexcept;
[[nodiscard]] constexpr bool is_unary(ScalarOp op) noexcept { return op >= ScalarOp::neg; }

/// The tag of AllocADT that makes a tuple instead of a constructor value.
inline constexpr std::uint32_t kTupleTag = 0xFFFFFFFFu;

struct Instruction {
  Opcode opcode;
  std::uint8_t aux = 0;  // a DType or ScalarOp code, per opcodes.def
  std::uint16_t reserved = 0;
  std::uint32_t dst = 0;
  std::uint32_t a = 0;
  std::uint32_t b = 0;
  std::uint32_t c = 0;
  std::uint32_t d = 0;
};
static_assert(sizeof(Instruction) == 24);

/// One row of opcodes.def.
struct OpcodeInfo {
  std::string_view name;
  std::array<Operand, 5> fields;  // dst, a, b, c, d
  Operand aux;
};

inline constexpr std::array<OpcodeInfo, kNumOpcodes> kOpcodeInfo = {{
#define NIMBLE_OPCODE(name, dst, a, b, c, d, aux)                                        \
  {#name, {Operand::dst, Operand::a, Operand::b, Operand::c, Operand::d}, Operand::aux},
#include "vm/opcodes.def"
#undef NIMBLE_OPCODE
}};

[[nodiscard]] inline const OpcodeInfo& info(Opcode op) noexcept {
  return kOpcodeInfo[static_cast<std::size_t>(op)];
}

/// A jump operand is stored as the two's complement of a signed offset.
[[nodiscard]] inline std::int32_t jump_offset(std::uint32_t field) noexcept {
  return static_cast<std::int32_t>(field);
}
[[nodiscard]] inline std::uint32_t encode_jump(std::int32_t offset) noexcept {
  return static_cast<std::uint32_t>(offset);
}

/// A device operand: the kind in the low byte, the index above it.
[[nodiscard]] inline std::uint32_t encode_device(Device device) noexcept {
  return static_cast<std::uint32_t>(device.kind) |
         (static_cast<std::uint32_t>(device.index) << 8);
}
/// The device of an operand; nullopt if the code names no device kind.
[[nodiscard]] inline std::optional<Device> decode_device(std::uint32_t code) noexcept {
  const std::uint32_t kind = code & 0xFF;
  if (kind > static_cast<std::uint32_t>(DeviceKind::cuda) || (code >> 8) > 0xFFFF)
    return std::nullopt;
  return Device{static_cast<DeviceKind>(kind), static_cast<std::int32_t>(code >> 8)};
}

}  // namespace nimble::vm
