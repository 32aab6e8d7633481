// Liveness of virtual registers over one function's bytecode, shared by the
// passes that run on it before register allocation (memory planning,
// register allocation). Operands come from opcodes.def, so a new
// instruction needs no change here.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "support/check.hpp"
#include "vm/instruction.hpp"

namespace nimble::vm {

/// A set of virtual registers.
class RegSet {
 public:
  explicit RegSet(std::size_t n) : words_((n + 63) / 64, 0) {}
  void insert(std::uint32_t r) { words_[r / 64] |= std::uint64_t{1} << (r % 64); }
  void erase(std::uint32_t r) { words_[r / 64] &= ~(std::uint64_t{1} << (r % 64)); }
  [[nodiscard]] bool contains(std::uint32_t r) const {
    return (words_[r / 64] >> (r % 64)) & 1;
  }
  /// this |= other; true when this changed.
  bool unite(const RegSet& other) {
    bool changed = false;
    for (std::size_t w = 0; w < words_.size(); ++w) {
      const std::uint64_t merged = words_[w] | other.words_[w];
      changed = changed || merged != words_[w];
      words_[w] = merged;
    }
    return changed;
  }
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t w = 0; w < words_.size(); ++w)
      for (std::uint64_t bits = words_[w]; bits != 0; bits &= bits - 1)
        f(static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits))));
  }
  friend bool operator==(const RegSet&, const RegSet&) = default;

 private:
  std::vector<std::uint64_t> words_;
};

/// Calls `f(reg, is_def)` for each register operand of `in` (an Instruction,
/// const or not: `reg` is then a reference into it or into `arg_pool`), defs
/// first. A KillRegister's operand counts as a def: whatever shares its frame
/// register must not be live there. Registers listed in the argument pool
/// (call arguments, kernel inputs and outputs, ADT fields, captures) are uses.
template <class In, class Pool, class F>
void for_each_register(In& in, std::span<Pool> arg_pool, F&& f) {
  const OpcodeInfo& op = info(in.opcode);
  using Field = std::conditional_t<std::is_const_v<In>, const std::uint32_t, std::uint32_t>;
  Field* fields[5] = {&in.dst, &in.a, &in.b, &in.c, &in.d};
  if (op.fields[0] == Operand::reg) f(in.dst, true);
  for (std::size_t k = 1; k < 5; ++k) {
    if (op.fields[k] == Operand::reg) f(*fields[k], false);
    if (op.fields[k] == Operand::args) {
      NIMBLE_ASSERT(k + 1 < 5 && op.fields[k + 1] == Operand::count, "an args field is followed by its count");
      const std::uint32_t offset = *fields[k];
      const std::uint32_t count = *fields[k + 1];
      for (std::uint32_t j = 0; j < count; ++j) f(arg_pool[offset + j], false);
    }
  }
}

/// Where control may go after instruction `i` (jump targets and fall-through).
void successors(std::span<const Instruction> code, std::size_t i, std::vector<std::size_t>& out);

/// Basic blocks and the registers live at their ends.
struct Liveness {
  std::vector<std::size_t> block_start;  ///< per block its first instruction; then code.size()
  std::vector<RegSet> live_in;           ///< per block
  std::vector<RegSet> live_out;          ///< per block

  [[nodiscard]] std::size_t num_blocks() const { return live_in.size(); }

  /// Calls `f(i, live)` for every instruction, each block walked backwards,
  /// with `live` the registers live just after instruction i.
  template <class F>
  void for_each_backward(std::span<const Instruction> code, std::span<const std::uint32_t> arg_pool,
                         F&& f) const {
    for (std::size_t b = 0; b < num_blocks(); ++b) {
      RegSet live = live_out[b];
      for (std::size_t i = block_start[b + 1]; i-- > block_start[b];) {
        f(i, static_cast<const RegSet&>(live));
        for_each_register(code[i], arg_pool, [&](std::uint32_t r, bool is_def) {
          if (is_def) live.erase(r);
        });
        for_each_register(code[i], arg_pool, [&](std::uint32_t r, bool is_def) {
          if (!is_def) live.insert(r);
        });
      }
    }
  }
};

/// Rewrites `code`: before each instruction i come `insert_before[i]` (when
/// given), then the instruction itself if `keep[i]`. A jump to i lands on
/// the first of those (a removed target becomes what follows it), so an
/// inserted instruction runs on every path that reaches i.
void splice(std::vector<Instruction>& code, const std::vector<bool>& keep,
            const std::vector<std::vector<Instruction>>& insert_before = {});

/// The liveness of `code`'s virtual registers [0, num_virtual).
[[nodiscard]] Liveness compute_liveness(std::span<const Instruction> code,
                                        std::span<const std::uint32_t> arg_pool,
                                        std::uint32_t num_virtual);

}  // namespace nimble::vm
