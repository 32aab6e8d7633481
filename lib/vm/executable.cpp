#include "nimble/vm/executable.hpp"

#include "support/check.hpp"
#include "vm/executable_data.hpp"

namespace nimble::vm {

Executable::Executable(std::shared_ptr<const ExecutableData> data) : data_(std::move(data)) {
  NIMBLE_ASSERT(data_ != nullptr, "an Executable needs data");
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
