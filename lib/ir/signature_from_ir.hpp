// IR types as the runtime's TypeDesc (lib/vm/signature.hpp).
#pragma once

#include "nimble/ir/module.hpp"
#include "nimble/ir/type.hpp"
#include "vm/signature.hpp"

namespace nimble::vm {

[[nodiscard]] TypeDesc to_type_desc(const ir::Type& type);
[[nodiscard]] std::vector<AdtDesc> adt_descs(const ir::Module& module);

}  // namespace nimble::vm
