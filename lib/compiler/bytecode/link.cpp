// link: the last step of the bytecode compiler (compiler.hpp).
#include <algorithm>

#include "compiler/bytecode/compiler.hpp"

namespace nimble::vm {

ExecutableData link(BytecodeModule module) {
  ExecutableData& data = module.data;
  for (std::size_t i = 0; i < data.functions.size(); ++i) {
    VMFunction& f = data.functions[i];
    const BytecodeFunction& code = module.functions[i];
    f.num_registers = std::max<std::uint32_t>(1, code.num_virtual);
    f.code_begin = static_cast<std::uint32_t>(data.code.size());
    f.code_size = static_cast<std::uint32_t>(code.code.size());
    data.code.insert(data.code.end(), code.code.begin(), code.code.end());
  }
  return std::move(data);
}

}  // namespace nimble::vm
