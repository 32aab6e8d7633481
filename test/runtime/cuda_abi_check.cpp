// Compiled only where the CUDA toolkit's cuda.h is installed: the driver
// types, constants and versioned names nimble declares without the header
// (lib/runtime/cuda/driver.hpp) are cuda.h's. A mismatch fails the build.
#include <cuda.h>

#include <type_traits>

#include "runtime/cuda/driver.hpp"

namespace nimble::cuda {

static_assert(sizeof(CUresult) == sizeof(::CUresult));
static_assert(std::is_same_v<CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<CUdevice, ::CUdevice>);
static_assert(sizeof(CUjit_option) == sizeof(::CUjit_option));
static_assert(kSuccess == ::CUDA_SUCCESS);
static_assert(kErrorInvalidValue == ::CUDA_ERROR_INVALID_VALUE);
static_assert(kErrorOutOfMemory == ::CUDA_ERROR_OUT_OF_MEMORY);
static_assert(kErrorNoDevice == ::CUDA_ERROR_NO_DEVICE);
static_assert(kErrorInvalidDevice == ::CUDA_ERROR_INVALID_DEVICE);
static_assert(kErrorInvalidPtx == ::CUDA_ERROR_INVALID_PTX);
static_assert(kErrorNotFound == ::CUDA_ERROR_NOT_FOUND);
static_assert(kAttributeMaxThreadsPerBlock == ::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
static_assert(kAttributeMultiprocessorCount == ::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(kAttributeComputeCapabilityMajor == ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(kAttributeComputeCapabilityMinor == ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(kJitErrorLogBuffer == ::CU_JIT_ERROR_LOG_BUFFER);
static_assert(kJitErrorLogBufferSizeBytes == ::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
static_assert(kStreamNonBlocking == ::CU_STREAM_NON_BLOCKING);

// Each function pointer nimble declares has the parameters of the versioned
// function cuda.h declares (CUresult is an enum there, an int here: the same
// in the ABI, so results are compared by size above and parameters here).
template <class Ours, class Theirs>
struct SameParameters : std::false_type {};
template <class R1, class R2, class... A, class... B>
struct SameParameters<R1 (*)(A...), R2 (*)(B...)>
    : std::bool_constant<sizeof...(A) == sizeof...(B) && (... && (sizeof(A) == sizeof(B)))> {};

#define NIMBLE_SAME(ours, theirs) \
  static_assert(SameParameters<decltype(DriverApi::ours), decltype(&::theirs)>::value, #ours)
NIMBLE_SAME(cuGetErrorName, cuGetErrorName);
NIMBLE_SAME(cuInit, cuInit);
NIMBLE_SAME(cuDeviceGetName, cuDeviceGetName);
NIMBLE_SAME(cuDeviceGetAttribute, cuDeviceGetAttribute);
NIMBLE_SAME(cuDeviceTotalMem_v2, cuDeviceTotalMem_v2);
NIMBLE_SAME(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
NIMBLE_SAME(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease_v2);
NIMBLE_SAME(cuMemAlloc_v2, cuMemAlloc_v2);
NIMBLE_SAME(cuMemFree_v2, cuMemFree_v2);
NIMBLE_SAME(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2);
NIMBLE_SAME(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2);
NIMBLE_SAME(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2);
NIMBLE_SAME(cuModuleLoadDataEx, cuModuleLoadDataEx);
NIMBLE_SAME(cuModuleGetFunction, cuModuleGetFunction);
NIMBLE_SAME(cuLaunchKernel, cuLaunchKernel);
NIMBLE_SAME(cuStreamCreate, cuStreamCreate);
NIMBLE_SAME(cuStreamDestroy_v2, cuStreamDestroy_v2);
#undef NIMBLE_SAME

}  // namespace nimble::cuda
