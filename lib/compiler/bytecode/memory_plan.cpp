// Memory planning. Manifest memory (op_call.cpp) gives every kernel output
// its own AllocStorage, so an inference makes one pooled allocation (and
// one release) per op. This pass coalesces the storages of static size
// whose tensors never leave the function into arenas, one per region (a
// stretch of straight-line code between calls): storages whose lifetimes
// never overlap on any control-flow path share bytes, and each AllocTensor
// becomes a view at its storage's offset in its region's arena. An arena
// per region rather than per function, because an arena lives as long as
// any tensor in it: one allocated on entry would be held through every call
// the function makes (a recursion would hold one per level, none of it live).
//
// It runs on the bytecode with virtual registers (before register
// allocation), where liveness is exact for the code that will run:
//   1. Alias groups: a storage, the tensors allocated in it, and whatever
//      is a copy or view of them (Move, ReshapeTensor, TakeRow, DeviceCopy).
//   2. A group is planned when it has one AllocStorage of a constant size,
//      no parameter, and its registers are only read by instructions that
//      do not keep the tensor (kernel calls, views, shape reads, branches):
//      a tensor returned, passed to a function, put in a tuple, ADT or
//      closure escapes the frame and keeps its own storage. A group live
//      across a call (Invoke, InvokeClosure) keeps its own storage too, so
//      that a recursion holds no planned buffer while its callees run.
//   3. Regions: a new one starts at every basic block and after every call.
//      A group belongs to the region of its AllocStorage (and stays
//      unplanned if a view of it is made in another); a region with fewer
//      than two groups gains nothing from an arena.
//   4. Two planned groups of a region interfere when one is live where the
//      other is defined (liveness over the bytecode's control flow): then
//      their bytes may not overlap. Offsets: largest group first, each at
//      the lowest 64-byte aligned offset clear of the groups it interferes
//      with already placed (first fit, as TVM's static memory planner).
//   5. Rewrite: one LoadConsti + AllocStorage of each arena where its
//      region's first planned storage was; each planned AllocTensor views
//      its arena at its offset; the planned AllocStorage instructions and
//      their size constants go.
// The arena lives as long as any tensor in it (the tensors hold it), so
// a tail-recursive loop allocates it once per iteration, and the frame's
// register for it dies after its last AllocTensor.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "compiler/bytecode/compiler.hpp"
#include "compiler/bytecode/liveness.hpp"

namespace nimble::vm {

namespace {

constexpr std::uint64_t kAlignment = 64;  // as op_call.cpp allocates
constexpr std::uint64_t kMaxArena = 0xFFFFFFFFu;  // AllocTensor's offset is 32 bits

class UnionFind {
 public:
  explicit UnionFind(std::size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0u); }
  std::uint32_t find(std::uint32_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void unite(std::uint32_t x, std::uint32_t y) { parent_[find(x)] = find(y); }

 private:
  std::vector<std::uint32_t> parent_;
};

// Whether reading a tensor as operand `field` (0 dst, 1 a, 2 b, 3 c, 4 d;
// 5 an argument-pool entry) of `op` leaves no reference to it behind the
// instruction, other than in registers of its own alias group.
bool keeps_no_reference(Opcode op, int field) {
  switch (op) {
    case Opcode::InvokePacked: return field == 5;  // a kernel reads or writes it during the call
    case Opcode::AllocTensor:
    case Opcode::AllocTensorReg:                     // a: the storage (aliases); c: a shape read
    case Opcode::ReshapeTensor:                      // a: aliases; b: a shape read
    case Opcode::TakeRow:                            // a: aliases; b: a scalar read
    case Opcode::Move:
    case Opcode::DeviceCopy:
    case Opcode::ShapeOf:
    case Opcode::TensorDim:
    case Opcode::StorageSize:
    case Opcode::If:
    case Opcode::KillRegister: return true;
    default: return false;
  }
}

struct Group {
  std::size_t alloc = 0;  // its AllocStorage
  std::uint64_t bytes = 0;
  std::int64_t size_def = -1;  // the LoadConsti of its size, when only it reads that
  bool planned = true;
  std::vector<std::uint32_t> interferes;  // other planned groups (by root)
  std::uint64_t offset = 0;
  std::uint32_t region = 0;
};

}  // namespace

std::uint32_t plan_memory(std::vector<Instruction>& code, std::span<const std::uint32_t> arg_pool,
                          std::uint32_t num_params, std::uint32_t num_virtual, MemoryPlanStats* stats) {
  if (code.empty()) return num_virtual;
  const std::uint32_t cpu = encode_device(Device::cpu());

  // 1. Alias groups, and each register's defining LoadConsti (if it has
  // exactly one def) and number of reads.
  UnionFind alias(num_virtual);
  std::vector<std::uint32_t> num_defs(num_virtual, 0), num_uses(num_virtual, 0);
  std::vector<std::int64_t> def_at(num_virtual, -1);
  std::vector<std::uint32_t> num_views(num_virtual, 0);  // reads as an AllocTensor's storage
  for (std::size_t i = 0; i < code.size(); ++i) {
    const Instruction& in = code[i];
    for_each_register(in, arg_pool, [&](std::uint32_t r, bool is_def) {
      if (is_def) {
        ++num_defs[r];
        def_at[r] = static_cast<std::int64_t>(i);
      } else {
        ++num_uses[r];
      }
    });
    switch (in.opcode) {
      case Opcode::AllocTensor:
      case Opcode::AllocTensorReg:
      case Opcode::ReshapeTensor:
      case Opcode::TakeRow:
      case Opcode::Move:
      case Opcode::DeviceCopy: alias.unite(in.dst, in.a); break;
      default: break;
    }
    switch (in.opcode) {
      case Opcode::AllocTensor:
      case Opcode::AllocTensorReg: ++num_views[in.a]; break;
      default: break;
    }
  }

  // 2. Candidates: one AllocStorage of constant size on the CPU per group.
  std::vector<std::optional<Group>> groups(num_virtual);
  std::vector<bool> excluded(num_virtual, false);  // by root
  for (std::size_t i = 0; i < code.size(); ++i) {
    const Instruction& in = code[i];
    if (in.opcode != Opcode::AllocStorage) continue;
    const std::uint32_t root = alias.find(in.dst);
    const std::uint32_t size = in.a;
    const std::int64_t at = def_at[size];
    const bool constant = num_defs[size] == 1 && at >= 0 &&
                          code[static_cast<std::size_t>(at)].opcode == Opcode::LoadConsti;
    // The storage's register must be read by AllocTensors only: it goes.
    if (groups[root] || !constant || in.c != cpu || num_defs[in.dst] != 1 ||
        num_uses[in.dst] != num_views[in.dst]) {
      excluded[root] = true;
      continue;
    }
    const Instruction& load = code[static_cast<std::size_t>(at)];
    Group g;
    g.alloc = i;
    g.bytes = (std::uint64_t{load.a} | (std::uint64_t{load.b} << 32));
    g.bytes = (g.bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (num_uses[size] == 1) g.size_def = at;
    groups[root] = g;
  }
  for (std::uint32_t p = 0; p < num_params && p < num_virtual; ++p) excluded[alias.find(p)] = true;
  for (const Instruction& in : code) {
    const OpcodeInfo& op = info(in.opcode);
    const std::uint32_t fields[5] = {in.dst, in.a, in.b, in.c, in.d};
    for (int k = 1; k < 5; ++k) {
      if (op.fields[k] == Operand::reg && !keeps_no_reference(in.opcode, k))
        excluded[alias.find(fields[k])] = true;
      if (op.fields[k] == Operand::args && !keeps_no_reference(in.opcode, 5))
        for (std::uint32_t j = 0; j < fields[k + 1]; ++j) excluded[alias.find(arg_pool[fields[k] + j])] = true;
    }
  }
  const Liveness liveness = compute_liveness(code, arg_pool, num_virtual);
  liveness.for_each_backward(code, arg_pool, [&](std::size_t i, const RegSet& live) {
    if (code[i].opcode == Opcode::Invoke || code[i].opcode == Opcode::InvokeClosure)
      live.for_each([&](std::uint32_t r) { excluded[alias.find(r)] = true; });
  });

  // 3. Regions, and the groups each plans.
  std::vector<std::uint32_t> region(code.size());
  std::uint32_t num_regions = 0;
  for (std::size_t i = 0, b = 0; i < code.size(); ++i) {
    const bool block_starts = b < liveness.block_start.size() && liveness.block_start[b] == i;
    if (block_starts) ++b;
    const bool after_call = i > 0 && (code[i - 1].opcode == Opcode::Invoke || code[i - 1].opcode == Opcode::InvokeClosure);
    if (i == 0 || block_starts || after_call) ++num_regions;
    region[i] = num_regions - 1;
  }
  for (std::uint32_t r = 0; r < num_virtual; ++r)
    if (groups[r]) groups[r]->region = region[groups[r]->alloc];
  for (std::size_t i = 0; i < code.size(); ++i) {
    const Instruction& in = code[i];
    if (in.opcode != Opcode::AllocTensor && in.opcode != Opcode::AllocTensorReg) continue;
    const std::uint32_t g = alias.find(in.a);
    if (groups[g] && groups[g]->region != region[i]) excluded[g] = true;
  }
  std::vector<std::uint32_t> per_region(num_regions, 0);
  for (std::uint32_t r = 0; r < num_virtual; ++r)
    if (groups[r] && !excluded[r] && groups[r]->bytes > 0) ++per_region[groups[r]->region];
  std::vector<std::uint32_t> planned;
  for (std::uint32_t r = 0; r < num_virtual; ++r) {
    if (!groups[r] || excluded[r]) continue;
    if (groups[r]->bytes == 0 || per_region[groups[r]->region] < 2) {
      excluded[r] = true;  // one storage gains nothing from an arena
      continue;
    }
    planned.push_back(r);
  }
  if (planned.empty()) return num_virtual;
  const auto is_planned = [&](std::uint32_t root) { return groups[root] && !excluded[root]; };

  // 4. Interference between planned groups of a region, then offsets. The largest sum
  // of the groups in use at one instruction bounds any placement from below.
  std::vector<std::uint32_t> operands, in_use;
  std::uint64_t lower_bound = 0;
  liveness.for_each_backward(code, arg_pool, [&](std::size_t i, const RegSet& live) {
    operands.clear();
    for_each_register(code[i], arg_pool, [&](std::uint32_t r, bool) { operands.push_back(alias.find(r)); });
    in_use.clear();
    for (std::uint32_t o : operands)
      if (is_planned(o)) in_use.push_back(o);
    live.for_each([&](std::uint32_t l) {
      if (is_planned(alias.find(l))) in_use.push_back(alias.find(l));
    });
    std::sort(in_use.begin(), in_use.end());
    in_use.erase(std::unique(in_use.begin(), in_use.end()), in_use.end());
    std::uint64_t bytes = 0;
    for (std::uint32_t g : in_use) bytes += groups[g]->bytes;
    lower_bound = std::max(lower_bound, bytes);
    for_each_register(code[i], arg_pool, [&](std::uint32_t r, bool is_def) {
      if (!is_def) return;
      const std::uint32_t g = alias.find(r);
      if (!is_planned(g)) return;
      const auto edge = [&](std::uint32_t h) {
        if (h == g || !is_planned(h) || groups[h]->region != groups[g]->region) return;
        groups[g]->interferes.push_back(h);
        groups[h]->interferes.push_back(g);
      };
      live.for_each([&](std::uint32_t l) { edge(alias.find(l)); });
      for (std::uint32_t o : operands) edge(o);
    });
  });
  std::stable_sort(planned.begin(), planned.end(),
                   [&](std::uint32_t x, std::uint32_t y) { return groups[x]->bytes > groups[y]->bytes; });
  std::vector<bool> placed(num_virtual, false);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> taken;  // [begin, end) of placed neighbours
  std::vector<std::uint64_t> arena(num_regions, 0);
  for (std::uint32_t g : planned) {
    Group& group = *groups[g];
    taken.clear();
    for (std::uint32_t h : group.interferes)
      if (placed[h]) taken.emplace_back(groups[h]->offset, groups[h]->offset + groups[h]->bytes);
    std::sort(taken.begin(), taken.end());
    std::uint64_t offset = 0;
    for (const auto& [begin, end] : taken) {
      if (offset + group.bytes <= begin) break;
      offset = std::max(offset, end);
    }
    group.offset = offset;
    placed[g] = true;
    arena[group.region] = std::max(arena[group.region], offset + group.bytes);
  }
  std::uint64_t total = 0;
  for (std::uint64_t a : arena) {
    if (a > kMaxArena) return num_virtual;
    total += a;
  }
  if (stats) *stats = {.arena_bytes = total, .lower_bound_bytes = lower_bound};

  // 5. Rewrite: each region's arena (two new registers: its size, itself)
  // where its first planned storage was allocated.
  std::vector<std::int64_t> first_alloc(num_regions, -1);
  for (std::uint32_t g : planned) {
    std::int64_t& first = first_alloc[groups[g]->region];
    const auto at = static_cast<std::int64_t>(groups[g]->alloc);
    if (first < 0 || at < first) first = at;
  }
  std::vector<std::uint32_t> arena_reg(num_regions, 0);
  std::vector<std::vector<Instruction>> insert(code.size());
  std::uint32_t next_reg = num_virtual;
  for (std::uint32_t k = 0; k < num_regions; ++k) {
    if (first_alloc[k] < 0) continue;
    const std::uint32_t size_reg = next_reg++;
    arena_reg[k] = next_reg++;
    insert[static_cast<std::size_t>(first_alloc[k])] = {
        {.opcode = Opcode::LoadConsti, .aux = static_cast<std::uint8_t>(DType::i64), .dst = size_reg,
         .a = static_cast<std::uint32_t>(arena[k]), .b = 0},
        {.opcode = Opcode::AllocStorage, .aux = static_cast<std::uint8_t>(DType::i8), .dst = arena_reg[k],
         .a = size_reg, .b = static_cast<std::uint32_t>(kAlignment), .c = cpu},
    };
  }
  std::vector<bool> keep(code.size(), true);
  for (std::uint32_t g : planned) {
    keep[groups[g]->alloc] = false;
    if (groups[g]->size_def >= 0) keep[static_cast<std::size_t>(groups[g]->size_def)] = false;
  }
  for (Instruction& in : code) {
    if (in.opcode != Opcode::AllocTensor && in.opcode != Opcode::AllocTensorReg) continue;
    const std::uint32_t g = alias.find(in.a);
    if (!is_planned(g) || code[groups[g]->alloc].dst != in.a) continue;
    in.a = arena_reg[groups[g]->region];
    in.b = static_cast<std::uint32_t>(groups[g]->offset + in.b);
  }
  splice(code, keep, insert);
  return next_reg;
}

void plan_memory(BytecodeModule& module) {
  for (BytecodeFunction& f : module.functions)
    f.num_virtual = plan_memory(f.code, module.data.arg_pool, f.num_params, f.num_virtual, &f.plan);
}

}  // namespace nimble::vm
