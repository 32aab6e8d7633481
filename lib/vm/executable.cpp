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

}  // namespace nimble::vm
