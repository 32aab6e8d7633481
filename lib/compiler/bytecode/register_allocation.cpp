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
#include "compiler/bytecode/compiler.hpp"
#include "compiler/bytecode/liveness.hpp"
#include "vm/instruction.hpp"

namespace nimble::vm {

std::uint32_t allocate_registers(std::vector<Instruction>& code, std::span<std::uint32_t> arg_pool,
                                 std::uint32_t num_params, std::uint32_t num_virtual) {
  const std::size_t n = code.size();
  if (n == 0) return num_params;

  const Liveness liveness = compute_liveness(code, arg_pool, num_virtual);

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
  liveness.for_each_backward(code, arg_pool, [&](std::size_t i, const RegSet& live) {
    operands.clear();
    for_each_register(code[i], arg_pool, [&](std::uint32_t r, bool) { operands.push_back(r); });
    for_each_register(code[i], arg_pool, [&](std::uint32_t r, bool is_def) {
      if (!is_def) return;
      live.for_each([&](std::uint32_t l) { interfere(r, l); });
      for (std::uint32_t o : operands) interfere(r, o);
    });
  });
  RegSet entry = liveness.live_in[0];
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

void allocate_registers(BytecodeModule& module) {
  for (BytecodeFunction& f : module.functions)
    f.num_virtual = allocate_registers(f.code, module.data.arg_pool, f.num_params, f.num_virtual);
}

}  // namespace nimble::vm
