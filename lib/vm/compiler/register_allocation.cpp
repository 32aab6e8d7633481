// Register allocation. The function compiler gives every value its own
// (virtual) register, so a function's frame would have as many registers as
// it has values, and a value would live until the function returns: a chain
// of 1000 ops would keep 1000 output buffers alive and touch a fresh register
// for every instruction. This pass maps the virtual registers onto few frame
// registers by graph colouring (Chaitin's interference graph, coloured
// greedily in order of definition): liveness over the bytecode's control
// flow, then two registers share a frame register when neither is live where
// the other is defined. A value's register is then reused soon after its last
// use, and overwriting it drops the value: its storage goes back to the pool
// and the next allocation gets the same, cache-hot block.
//
// The operands that are registers come from opcodes.def, so a new
// instruction needs no change here.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "support/check.hpp"
#include "vm/compiler/compiler.hpp"
#include "vm/instruction.hpp"

namespace nimble::vm {

namespace {

// A set of virtual registers.
class RegSet {
 public:
  explicit RegSet(std::size_t n) : words_((n + 63) / 64, 0) {}
  void insert(std::uint32_t r) { words_[r / 64] |= std::uint64_t{1} << (r % 64); }
  void erase(std::uint32_t r) { words_[r / 64] &= ~(std::uint64_t{1} << (r % 64)); }
  // this |= other; true when this changed.
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

// Calls `f(reg&, is_def)` for each register operand of `in`, defs first. A
// KillRegister's operand counts as a def: whatever shares its frame register
// must not be live there. Registers listed in the argument pool (call
// arguments, kernel inputs and outputs, ADT fields, captures) are uses.
template <class F>
void for_each_register(Instruction& in, std::span<std::uint32_t> arg_pool, F&& f) {
  const OpcodeInfo& op = info(in.opcode);
  std::uint32_t* fields[5] = {&in.dst, &in.a, &in.b, &in.c, &in.d};
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

// Where control may go after instruction `i` (jump targets and fall-through).
void successors(const std::vector<Instruction>& code, std::size_t i, std::vector<std::size_t>& out) {
  out.clear();
  const Instruction& in = code[i];
  const auto target = [&](std::uint32_t field) {
    return static_cast<std::size_t>(static_cast<std::int64_t>(i) + jump_offset(field));
  };
  switch (in.opcode) {
    case Opcode::If:
      out.push_back(target(in.b));
      out.push_back(target(in.c));
      return;
    case Opcode::Goto: out.push_back(target(in.a)); return;
    case Opcode::Ret:
    case Opcode::TailCall:
    case Opcode::Fatal: return;
    default:
      if (i + 1 < code.size()) out.push_back(i + 1);
  }
}

}  // namespace

std::uint32_t allocate_registers(std::vector<Instruction>& code, std::span<std::uint32_t> arg_pool,
                                 std::uint32_t num_params, std::uint32_t num_virtual) {
  const std::size_t n = code.size();
  if (n == 0) return num_params;

  // Basic blocks: a leader at 0, at every jump target and after every jump.
  std::vector<std::size_t> succ;
  std::vector<bool> leader(n + 1, false);
  leader[0] = leader[n] = true;
  for (std::size_t i = 0; i < n; ++i) {
    successors(code, i, succ);
    const bool falls_through = succ.size() == 1 && succ[0] == i + 1;
    if (!falls_through) leader[i + 1] = true;
    for (std::size_t s : succ) {
      NIMBLE_ASSERT(s < n, "a jump leaves its function");
      leader[s] = true;
    }
  }
  std::vector<std::size_t> block_start;
  std::vector<std::size_t> block_of(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (leader[i]) block_start.push_back(i);
    block_of[i] = block_start.size() - 1;
  }
  const std::size_t num_blocks = block_start.size();
  block_start.push_back(n);

  // Per block: the registers it reads before writing them, and those it writes.
  std::vector<RegSet> uses(num_blocks, RegSet(num_virtual)), defs(num_blocks, RegSet(num_virtual));
  for (std::size_t b = 0; b < num_blocks; ++b)
    for (std::size_t i = block_start[b + 1]; i-- > block_start[b];) {
      for_each_register(code[i], arg_pool, [&](std::uint32_t& r, bool is_def) {
        if (is_def) {
          defs[b].insert(r);
          uses[b].erase(r);
        }
      });
      for_each_register(code[i], arg_pool, [&](std::uint32_t& r, bool is_def) {
        if (!is_def) uses[b].insert(r);
      });
    }

  // Liveness: live_in(b) = uses(b) ∪ (live_out(b) − defs(b)), to a fixed point
  // (one pass when, as the compiler emits them, every jump goes forward).
  std::vector<RegSet> live_in(num_blocks, RegSet(num_virtual)), live_out(num_blocks, RegSet(num_virtual));
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t b = num_blocks; b-- > 0;) {
      successors(code, block_start[b + 1] - 1, succ);
      for (std::size_t s : succ) live_out[b].unite(live_in[block_of[s]]);
      RegSet in = live_out[b];
      defs[b].for_each([&](std::uint32_t r) { in.erase(r); });
      in.unite(uses[b]);
      if (!(in == live_in[b])) {
        live_in[b] = std::move(in);
        changed = true;
      }
    }
  }

  // Interference: a register defined by an instruction interferes with every
  // register live after it and (so that no instruction's result lands on an
  // operand it still reads) with the instruction's other operands. The
  // parameters, and anything live on entry, are defined together on entry.
  std::vector<std::vector<std::uint32_t>> edges(num_virtual);
  const auto interfere = [&](std::uint32_t x, std::uint32_t y) {
    if (x == y) return;
    edges[x].push_back(y);
    edges[y].push_back(x);
  };
  std::vector<std::uint32_t> operands;
  for (std::size_t b = 0; b < num_blocks; ++b) {
    RegSet live = live_out[b];
    for (std::size_t i = block_start[b + 1]; i-- > block_start[b];) {
      operands.clear();
      for_each_register(code[i], arg_pool, [&](std::uint32_t& r, bool) { operands.push_back(r); });
      for_each_register(code[i], arg_pool, [&](std::uint32_t& r, bool is_def) {
        if (!is_def) return;
        live.for_each([&](std::uint32_t l) { interfere(r, l); });
        for (std::uint32_t o : operands) interfere(r, o);
      });
      for_each_register(code[i], arg_pool, [&](std::uint32_t& r, bool is_def) {
        if (is_def) live.erase(r);
      });
      for_each_register(code[i], arg_pool, [&](std::uint32_t& r, bool is_def) {
        if (!is_def) live.insert(r);
      });
    }
  }
  RegSet entry = live_in[0];
  for (std::uint32_t p = 0; p < num_params; ++p) entry.insert(p);
  std::vector<std::uint32_t> at_entry;
  entry.for_each([&](std::uint32_t r) { at_entry.push_back(r); });
  for (std::size_t x = 0; x < at_entry.size(); ++x)
    for (std::size_t y = x + 1; y < at_entry.size(); ++y) interfere(at_entry[x], at_entry[y]);

  // Colouring: parameter k keeps register k (the calling convention); every
  // other register, in order of first appearance, takes the lowest frame
  // register that no interfering register has.
  constexpr std::uint32_t kUncoloured = kNoReg;
  std::vector<std::uint32_t> colour(num_virtual, kUncoloured);
  for (std::uint32_t p = 0; p < num_params; ++p) colour[p] = p;
  std::uint32_t num_registers = num_params;
  std::vector<std::uint32_t> taken_by;  // frame register -> the last vreg that found it taken
  const auto assign = [&](std::uint32_t v) {
    if (colour[v] != kUncoloured) return;
    for (std::uint32_t w : edges[v])
      if (colour[w] != kUncoloured) {
        if (colour[w] >= taken_by.size()) taken_by.resize(colour[w] + 1, kUncoloured);
        taken_by[colour[w]] = v;
      }
    std::uint32_t c = 0;
    while (c < taken_by.size() && taken_by[c] == v) ++c;
    colour[v] = c;
    num_registers = std::max(num_registers, c + 1);
  };
  for (std::uint32_t r : at_entry) assign(r);
  for (Instruction& in : code)
    for_each_register(in, arg_pool, [&](std::uint32_t& r, bool) { assign(r); });
  for (Instruction& in : code)
    for_each_register(in, arg_pool, [&](std::uint32_t& r, bool) { r = colour[r]; });
  return num_registers;
}

}  // namespace nimble::vm
