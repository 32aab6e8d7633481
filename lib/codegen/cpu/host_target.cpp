#include "nimble/target.hpp"

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>

namespace nimble {

bool HostTarget::has(std::string_view feature) const {
  return std::binary_search(features.begin(), features.end(), feature);
}

const HostTarget& host_target() {
  // Never destroyed: a background compilation may read it while the process
  // exits (BackgroundCompiler::process()).
  static const HostTarget* const target = new HostTarget([] {
    HostTarget t;
    t.triple = llvm::sys::getProcessTriple();
    t.cpu = llvm::sys::getHostCPUName().str();
    for (const auto& feature : llvm::sys::getHostCPUFeatures())
      if (feature.second) t.features.push_back(feature.first().str());
    std::sort(t.features.begin(), t.features.end());
    return t;
  }());
  return *target;
}

std::string llvm_version() { return LLVM_VERSION_STRING; }

}  // namespace nimble
