// Kills: a value dies right after its last use. Register allocation reuses
// a dead value's register soon, but not at once, and a value in a register
// nothing overwrites lives until the frame ends — through every call the
// function makes after it. A KillRegister after the last use drops it
// there: its storage goes back to the pool while the rest of the function
// runs, so the memory in use at any point is what is live there (the
// bench's act_peak_bytes against act_lower_bound_bytes measures this).
//
// Only registers that may own memory are killed: those defined by an
// allocation, a view, a call, an aggregate or a field read (and Moves of
// them). Scalars live inline in their registers and constants belong to the
// Executable: killing them would cost a dispatch and free nothing.
//
// Where a register dies:
//   - after an instruction that reads or writes it, when it is not live
//     after it (in straight-line code, the successor is the next
//     instruction: the kill goes before it, and is then dead on every path
//     that reaches it, since it is dead after each predecessor);
//   - on the edge out of an If into a branch where it is no longer live: the
//     kill goes at the start of that branch. Only the If reaches a branch
//     start, or else the register is dead on the other incoming paths too.
// Runs on virtual registers, after memory planning and before register
// allocation (which treats a kill as a definition: nothing that shares the
// frame register can be live there).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "compiler/bytecode/compiler.hpp"
#include "compiler/bytecode/liveness.hpp"

namespace nimble::vm {

namespace {

bool may_own_memory(Opcode op) {
  switch (op) {
    case Opcode::AllocStorage:
    case Opcode::AllocTensor:
    case Opcode::AllocFreshTensor:
    case Opcode::AllocTensorReg:
    case Opcode::ReshapeTensor:
    case Opcode::TakeRow:
    case Opcode::DeviceCopy:
    case Opcode::Invoke:
    case Opcode::InvokeClosure:
    case Opcode::AllocADT:
    case Opcode::AllocClosure:
    case Opcode::GetField: return true;
    default: return false;
  }
}

}  // namespace

void insert_kills(std::vector<Instruction>& code, std::span<const std::uint32_t> arg_pool,
                  std::uint32_t num_virtual) {
  if (code.empty()) return;
  RegSet killable(num_virtual);
  for (bool changed = true; changed;) {  // Moves of killable registers, to a fixed point
    changed = false;
    for (const Instruction& in : code) {
      const bool owns = may_own_memory(in.opcode) || (in.opcode == Opcode::Move && killable.contains(in.a));
      if (owns && !killable.contains(in.dst)) {
        killable.insert(in.dst);
        changed = true;
      }
    }
  }

  const Liveness liveness = compute_liveness(code, arg_pool, num_virtual);
  const auto block_at = [&](std::size_t i) {
    const auto it = std::upper_bound(liveness.block_start.begin(), liveness.block_start.end(), i);
    return static_cast<std::size_t>(it - liveness.block_start.begin()) - 1;
  };
  std::vector<std::vector<Instruction>> kills(code.size());
  const auto kill_before = [&](std::size_t at, std::uint32_t r) {
    auto& list = kills[at];
    if (std::none_of(list.begin(), list.end(), [&](const Instruction& k) { return k.dst == r; }))
      list.push_back({.opcode = Opcode::KillRegister, .dst = r});
  };
  std::vector<std::size_t> succ;
  liveness.for_each_backward(code, arg_pool, [&](std::size_t i, const RegSet& live) {
    const Instruction& in = code[i];
    if (in.opcode == Opcode::If) {
      successors(code, i, succ);
      for (std::size_t s : succ) {
        const RegSet& entering = liveness.live_in[block_at(s)];
        live.for_each([&](std::uint32_t r) {
          if (killable.contains(r) && !entering.contains(r)) kill_before(s, r);
        });
      }
      return;
    }
    successors(code, i, succ);
    if (succ.size() != 1 || succ[0] != i + 1) return;  // Ret, TailCall, Fatal end the frame; Goto kills nothing
    for_each_register(in, arg_pool, [&](std::uint32_t r, bool) {
      if (killable.contains(r) && !live.contains(r)) kill_before(i + 1, r);
    });
  });
  splice(code, std::vector<bool>(code.size(), true), kills);
}

void insert_kills(BytecodeModule& module) {
  for (BytecodeFunction& f : module.functions) insert_kills(f.code, module.data.arg_pool, f.num_virtual);
}

}  // namespace nimble::vm
