#include "nimble/ir/module.hpp"

#include <algorithm>

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
  adts_.push_back(std::move(adt));
}

void Module::add_function(std::string name, Expr function) {
  if (!function.as<FunctionNode>())
    throw_error(ErrorKind::invalid_argument, "module: global @{} must be a function", name);
  if (find_function(name).defined())
    throw_error(ErrorKind::invalid_argument, "module: function @{} is already defined", name);
  functions_.emplace_back(std::move(name), std::move(function));
}

void Module::update_function(std::string_view name, Expr function) {
  if (!function.as<FunctionNode>())
    throw_error(ErrorKind::invalid_argument, "module: global @{} must be a function", name);
  for (auto& [n, f] : functions_) {
    if (n == name) {
      f = std::move(function);
      return;
    }
  }
  throw_error(ErrorKind::invalid_argument, "module: no function @{} to update", name);
}

void Module::add_entry(std::string name) {
  if (!is_entry(name)) entries_.push_back(std::move(name));
}

AdtDef Module::find_adt(std::string_view name) const noexcept {
  for (const AdtDef& a : adts_)
    if (a->name == name) return a;
  return {};
}

Expr Module::find_function(std::string_view name) const noexcept {
  for (const auto& [n, f] : functions_)
    if (n == name) return f;
  return {};
}

std::pair<AdtDef, int> Module::find_constructor(std::string_view name) const noexcept {
  for (const AdtDef& a : adts_) {
    const int tag = a->find_constructor(name);
    if (tag >= 0) return {a, tag};
  }
  return {{}, -1};
}

bool Module::is_entry(std::string_view name) const noexcept {
  return std::find(entries_.begin(), entries_.end(), name) != entries_.end();
}

}  // namespace nimble::ir
