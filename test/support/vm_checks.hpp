// Checks on what a VirtualMachine did, shared by the device tests.
#pragma once

#include <cstdint>
#include <string_view>

#include "nimble/nimble.hpp"

namespace nimble::testing {

/// Whether every tensor in `v` (through tuples and ADT fields) is on the host.
inline bool all_on_host(const Value& v) {
  if (v.is_tensor()) return v.tensor().device() == Device::cpu();
  if (v.kind() == Value::Kind::tuple || v.kind() == Value::Kind::adt)
    for (const Value& f : v.fields())
      if (!all_on_host(f)) return false;
  return true;
}

/// How many instructions with opcode `opcode` the profile counted.
inline std::uint64_t executed(const vm::Profile& p, std::string_view opcode) {
  for (const auto& c : p.instructions)
    if (c.name == opcode) return c.count;
  return 0;
}

}  // namespace nimble::testing
