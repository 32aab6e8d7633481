#include "compiler/bytecode/liveness.hpp"

namespace nimble::vm {

void successors(std::span<const Instruction> code, std::size_t i, std::vector<std::size_t>& out) {
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

void splice(std::vector<Instruction>& code, const std::vector<bool>& keep,
            const std::vector<std::vector<Instruction>>& insert_before) {
  const std::size_t n = code.size();
  const auto inserted = [&](std::size_t i) { return i < insert_before.size() ? insert_before[i].size() : 0; };
  // start[i]: where what stands for instruction i begins in the new code.
  std::vector<std::int64_t> start(n + 1);
  std::int64_t next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    start[i] = next;
    next += static_cast<std::int64_t>(inserted(i)) + (keep[i] ? 1 : 0);
  }
  start[n] = next;
  std::vector<Instruction> out;
  out.reserve(static_cast<std::size_t>(next));
  for (std::size_t i = 0; i < n; ++i) {
    if (inserted(i) > 0) out.insert(out.end(), insert_before[i].begin(), insert_before[i].end());
    if (!keep[i]) continue;
    Instruction in = code[i];
    const auto at = static_cast<std::int64_t>(out.size());
    const auto retarget = [&](std::uint32_t& field) {
      const std::int64_t target = static_cast<std::int64_t>(i) + jump_offset(field);
      field = encode_jump(static_cast<std::int32_t>(start[static_cast<std::size_t>(target)] - at));
    };
    if (in.opcode == Opcode::If) {
      retarget(in.b);
      retarget(in.c);
    } else if (in.opcode == Opcode::Goto) {
      retarget(in.a);
    }
    out.push_back(in);
  }
  code = std::move(out);
}

Liveness compute_liveness(std::span<const Instruction> code, std::span<const std::uint32_t> arg_pool,
                          std::uint32_t num_virtual) {
  const std::size_t n = code.size();
  Liveness l;
  // Basic blocks: a leader at 0, at every jump target and after every jump.
  std::vector<std::size_t> succ;
  std::vector<bool> leader(n + 1, false);
  leader[0] = leader[n] = true;
  for (std::size_t i = 0; i < n; ++i) {
    successors(code, i, succ);
    const bool falls_through = succ.size() == 1 && succ[0] == i + 1;
    if (falls_through) continue;
    leader[i + 1] = true;
    for (std::size_t s : succ) {
      NIMBLE_ASSERT(s < n, "a jump leaves its function");
      leader[s] = true;
    }
  }
  std::vector<std::size_t> block_of(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (leader[i]) l.block_start.push_back(i);
    block_of[i] = l.block_start.size() - 1;
  }
  const std::size_t num_blocks = l.block_start.size();
  l.block_start.push_back(n);

  // Per block: the registers it reads before writing them, and those it writes.
  std::vector<RegSet> uses(num_blocks, RegSet(num_virtual)), defs(num_blocks, RegSet(num_virtual));
  for (std::size_t b = 0; b < num_blocks; ++b)
    for (std::size_t i = l.block_start[b + 1]; i-- > l.block_start[b];) {
      for_each_register(code[i], arg_pool, [&](std::uint32_t r, bool is_def) {
        if (is_def) {
          defs[b].insert(r);
          uses[b].erase(r);
        }
      });
      for_each_register(code[i], arg_pool, [&](std::uint32_t r, bool is_def) {
        if (!is_def) uses[b].insert(r);
      });
    }

  // live_in(b) = uses(b) ∪ (live_out(b) − defs(b)), to a fixed point (one
  // pass when, as the compiler emits them, every jump goes forward).
  l.live_in.assign(num_blocks, RegSet(num_virtual));
  l.live_out.assign(num_blocks, RegSet(num_virtual));
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t b = num_blocks; b-- > 0;) {
      successors(code, l.block_start[b + 1] - 1, succ);
      for (std::size_t s : succ) l.live_out[b].unite(l.live_in[block_of[s]]);
      RegSet in = l.live_out[b];
      defs[b].for_each([&](std::uint32_t r) { in.erase(r); });
      in.unite(uses[b]);
      if (!(in == l.live_in[b])) {
        l.live_in[b] = std::move(in);
        changed = true;
      }
    }
  }
  return l;
}

}  // namespace nimble::vm
