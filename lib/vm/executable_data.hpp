// The contents of an Executable (include/nimble/vm/executable.hpp): what the
// emitter produces, the serializer writes, the loader verifies and the VM
// runs. Plain data; every index in `code` points into one of these tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/runtime/kernel.hpp"
#include "nimble/runtime/tensor.hpp"
#include "vm/instruction.hpp"
#include "vm/signature.hpp"

namespace nimble::vm {

struct VMFunction {
  std::string name;
  std::vector<std::string> param_names;  // params are registers 0..n-1
  std::vector<TypeDesc> param_types;
  TypeDesc result_type;
  std::uint32_t num_registers = 0;  // >= number of params
  std::uint32_t code_begin = 0;     // index of the first instruction in `code`
  std::uint32_t code_size = 0;      // > 0; the last instruction is Ret, TailCall, Goto or Fatal
  bool is_entry = false;            // the host may invoke it
  friend bool operator==(const VMFunction&, const VMFunction&) = default;
};

struct ExecutableData {
  std::vector<VMFunction> functions;
  std::vector<Instruction> code;
  std::vector<std::uint32_t> arg_pool;  // register lists of Invoke, AllocADT, ...
  std::vector<std::int64_t> shape_pool;  // at a shape index: rank, then the dims
  std::vector<Tensor> constants;         // LoadConst
  std::vector<PrimitiveInfo> primitives; // InvokePacked
  std::vector<std::string> strings;      // Fatal messages
  std::vector<AdtDesc> adts;             // for argument checks
};

/// Checks that `data` is well formed: every operand of every instruction in
/// range for its kind (opcodes.def), jumps inside their function, every
/// function ending in a terminator, pools and tables consistent. Throws
/// Error(parse_error) naming the function, instruction and field. The loader
/// runs it on every input; the emitter's tests run it on what it emits.
void verify(const ExecutableData& data);

}  // namespace nimble::vm
