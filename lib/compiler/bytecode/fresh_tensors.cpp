// Fresh tensors: a storage that only one tensor views, whole, from its
// start, is allocated with the tensor by one AllocFreshTensor:
//
//   LoadConsti    %size, 600            AllocFreshTensor %t, [150], cpu, f32
//   AllocStorage  %s, %size, 64, cpu  ->
//   AllocTensor   %t, %s, 0, [150]
//
// Memory planning leaves a kernel output its own storage when the tensor
// leaves the frame (a result, a field of a tuple) or has no other storage
// of its region to share an arena with: most outputs of small recursive
// functions (a Tree-LSTM node's h and c) and of one-kernel programs. There
// the register holding the storage only passes it to the tensor: a
// dispatch, a reference taken and dropped and a kill for nothing. The size
// constant goes too when nothing else reads it. Runs after memory planning
// (which leaves an arena's storages and a dynamic one alone: they have more
// views, or a size computed at run time) and before the kills.
#include <cstdint>
#include <vector>

#include "compiler/bytecode/compiler.hpp"
#include "compiler/bytecode/liveness.hpp"

namespace nimble::vm {

void fuse_fresh_tensors(std::vector<Instruction>& code, std::span<const std::uint32_t> arg_pool,
                        std::uint32_t num_virtual) {
  std::vector<std::uint32_t> num_defs(num_virtual, 0), num_uses(num_virtual, 0);
  std::vector<std::int64_t> def_at(num_virtual, -1);
  for (std::size_t i = 0; i < code.size(); ++i)
    for_each_register(code[i], arg_pool, [&](std::uint32_t r, bool is_def) {
      if (is_def) {
        ++num_defs[r];
        def_at[r] = static_cast<std::int64_t>(i);
      } else {
        ++num_uses[r];
      }
    });
  std::vector<bool> keep(code.size(), true);
  bool changed = false;
  for (Instruction& in : code) {
    if (in.opcode != Opcode::AllocTensor || in.b != 0) continue;
    const std::uint32_t s = in.a;
    if (num_defs[s] != 1 || num_uses[s] != 1) continue;
    const auto alloc = static_cast<std::size_t>(def_at[s]);
    const Instruction& storage = code[alloc];
    if (storage.opcode != Opcode::AllocStorage) continue;
    const std::uint32_t size = storage.a;
    if (num_defs[size] == 1 && num_uses[size] == 1 && code[static_cast<std::size_t>(def_at[size])].opcode == Opcode::LoadConsti)
      keep[static_cast<std::size_t>(def_at[size])] = false;
    keep[alloc] = false;
    in = {.opcode = Opcode::AllocFreshTensor, .aux = in.aux, .dst = in.dst, .a = in.c, .b = storage.c};
    changed = true;
  }
  if (changed) splice(code, keep);
}

std::uint64_t fresh_tensor_bytes(std::span<const std::int64_t> shape_pool, const Instruction& in) {
  std::uint64_t bytes = dtype_size(static_cast<DType>(in.aux));
  const auto rank = static_cast<std::size_t>(shape_pool[in.a]);
  for (std::size_t k = 0; k < rank; ++k) bytes *= static_cast<std::uint64_t>(shape_pool[in.a + 1 + k]);
  return bytes;
}

void fuse_fresh_tensors(BytecodeModule& module) {
  for (BytecodeFunction& f : module.functions) fuse_fresh_tensors(f.code, module.data.arg_pool, f.num_virtual);
}

}  // namespace nimble::vm
