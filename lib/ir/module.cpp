#include "nimble/ir/module.hpp"

#include "support/check.hpp"

namespace nimble::ir {

void Module::add_adt(AdtDef adt) {
  NIMBLE_ASSERT(adt, "add_adt: null definition");
  if (find_adt(adt->name))
    throw_error(ErrorKind::invalid_argument, "module: type '{}' is already defined", adt->name);
  for (const ConstructorDef& c : adt->constructors) {
    if (find_constructor(c.name).first)
      throw_error(ErrorKind::invalid_argument,
                  "module: constructor '{}' of type '{}' is already defined by type '{}'", c.name,
                  adt->name, find_constructor(c.name).first->name);
  }
  const std::size_t index = adts_.size();
  for (std::size_t tag = 0; tag < adt->constructors.size(); ++tag)
    constructor_index_.emplace(adt->constructors[tag].name,
                               std::pair{index, static_cast<int>(tag)});
  adt_index_.emplace(adt->name, index);
  adts_.push_back(std::move(adt));
}

void Module::add_function(std::string name, Expr function) {
  if (!function.as<FunctionNode>())
    throw_error(ErrorKind::invalid_argument, "module: global @{} must be a function", name);
  if (find_function(name).defined())
    throw_error(ErrorKind::invalid_argument, "module: function @{} is already defined", name);
  function_index_.emplace(name, functions_.size());
  functions_.emplace_back(std::move(name), std::move(function));
}

void Module::update_function(std::string_view name, Expr function) {
  if (!function.as<FunctionNode>())
    throw_error(ErrorKind::invalid_argument, "module: global @{} must be a function", name);
  if (const auto it = function_index_.find(name); it != function_index_.end()) {
    functions_[it->second].second = std::move(function);
    return;
  }
  throw_error(ErrorKind::invalid_argument, "module: no function @{} to update", name);
}

void Module::add_entry(std::string name) {
  if (is_entry(name)) return;
  entry_index_.emplace(name, entries_.size());
  entries_.push_back(std::move(name));
}

AdtDef Module::find_adt(std::string_view name) const noexcept {
  const auto it = adt_index_.find(name);
  return it == adt_index_.end() ? AdtDef{} : adts_[it->second];
}

Expr Module::find_function(std::string_view name) const noexcept {
  const auto it = function_index_.find(name);
  return it == function_index_.end() ? Expr{} : functions_[it->second].second;
}

std::pair<AdtDef, int> Module::find_constructor(std::string_view name) const noexcept {
  const auto it = constructor_index_.find(name);
  if (it == constructor_index_.end()) return {{}, -1};
  return {adts_[it->second.first], it->second.second};
}

bool Module::is_entry(std::string_view name) const noexcept {
  return entry_index_.contains(name);
}

}  // namespace nimble::ir
