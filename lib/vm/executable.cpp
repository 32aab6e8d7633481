#include "nimble/vm/executable.hpp"

#include <unordered_map>

#include "support/check.hpp"
#include "vm/executable_data.hpp"

namespace nimble::vm {

// Keys view the names in the ExecutableData, which the index's owner (the
// Executable) keeps alive and never changes.
struct FunctionIndex {
  std::unordered_map<std::string_view, std::uint32_t> by_name;
};

Executable::Executable(std::shared_ptr<const ExecutableData> data) : data_(std::move(data)) {
  NIMBLE_ASSERT(data_ != nullptr, "an Executable needs data");
  auto index = std::make_shared<FunctionIndex>();
  index->by_name.reserve(data_->functions.size());
  // The first of equal names wins, as the linear search this replaces did
  // (the loader's verifier rejects duplicates; the emitter makes none).
  for (std::size_t i = 0; i < data_->functions.size(); ++i)
    index->by_name.emplace(data_->functions[i].name, static_cast<std::uint32_t>(i));
  function_index_ = std::move(index);
}

std::int64_t Executable::find_function(std::string_view name) const noexcept {
  const auto it = function_index_->by_name.find(name);
  return it == function_index_->by_name.end() ? -1 : static_cast<std::int64_t>(it->second);
}

std::vector<std::string> Executable::entry_points() const {
  std::vector<std::string> names;
  for (const VMFunction& f : data_->functions)
    if (f.is_entry) names.push_back(f.name);
  return names;
}

std::uint32_t Executable::constructor_tag(std::string_view adt, std::string_view constructor) const {
  for (const AdtDesc& a : data_->adts) {
    if (a.name != adt) continue;
    for (std::size_t tag = 0; tag < a.constructors.size(); ++tag)
      if (a.constructors[tag].name == constructor) return static_cast<std::uint32_t>(tag);
  }
  throw_error(ErrorKind::invalid_argument, "the executable has no constructor {} of type {}", constructor, adt);
}

}  // namespace nimble::vm
