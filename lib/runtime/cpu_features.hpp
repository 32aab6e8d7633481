// The x86 target features of the CPU this process runs on, named as LLVM
// names them. The ahead-of-time runtime must check, without LLVM, that this
// CPU has every feature an exported kernel object was compiled with (the
// object records them as LLVM feature names), so this ports the x86 branch of
// LLVM 19's llvm::sys::getHostCPUFeatures (llvm/lib/TargetParser/Host.cpp) to
// plain cpuid/xgetbv: on the same machine both report the same features.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nimble::runtime {

/// The x86 target features this CPU (and its OS: AVX/AVX-512/AMX state enabled
/// via XGETBV) supports, named as LLVM 19's llvm::sys::getHostCPUFeatures()
/// names them, the enabled ones only, sorted. Empty on non-x86-64 hosts.
[[nodiscard]] const std::vector<std::string>& host_cpu_features();

/// Whether this CPU has `feature` (an LLVM feature name such as "avx2",
/// "avx512f", "fma").
[[nodiscard]] bool host_has_cpu_feature(std::string_view feature);

}  // namespace nimble::runtime
