// infer_types: the pipeline's first step (see passes.hpp). A module from
// Builder::build is typed already (the builder types each statement as it
// is built, so that a type error names the C++ line); one parsed from text
// is typed here. Inferring a typed module again would write the types of
// nodes the host's module shares with compilations on other threads, so a
// typed module passes through untouched.
#include "ir/type_inference.hpp"
#include "passes/passes.hpp"

namespace nimble::passes {

namespace {

bool is_typed(const ir::Module& module) {
  for (const auto& [name, fn] : module.functions())
    if (!fn->checked_type.defined()) return false;
  return true;
}

}  // namespace

ir::Module infer_types(const ir::Module& module) {
  if (is_typed(module)) return module;
  ir::verify(module);
  ir::infer_types(module);
  return module;
}

}  // namespace nimble::passes
