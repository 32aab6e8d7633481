// The CUDA driver API, opened with dlopen at first use and never linked, so
// that nimble builds and runs on machines without a GPU or a CUDA toolkit.
//
// The types and constants below are the driver API's own (cuda.h), declared
// here so that no CUDA header is needed to build; where the toolkit is
// installed, test/runtime/cuda_driver_abi_test.cpp checks them against
// cuda.h. Functions are resolved by the versioned symbol names that cuda.h's
// macros select (cuMemAlloc is cuMemAlloc_v2, …): the unversioned symbols
// still exported by libcuda keep the ABI of CUDA 3.x.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace nimble::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUjit_option = int;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;

inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorInvalidValue = 1;
inline constexpr CUresult kErrorOutOfMemory = 2;
inline constexpr CUresult kErrorNoDevice = 100;
inline constexpr CUresult kErrorInvalidDevice = 101;
inline constexpr CUresult kErrorInvalidPtx = 218;
inline constexpr CUresult kErrorNotFound = 500;

inline constexpr int kAttributeMaxThreadsPerBlock = 1;
inline constexpr int kAttributeMultiprocessorCount = 16;
inline constexpr int kAttributeComputeCapabilityMajor = 75;
inline constexpr int kAttributeComputeCapabilityMinor = 76;

inline constexpr CUjit_option kJitErrorLogBuffer = 5;
inline constexpr CUjit_option kJitErrorLogBufferSizeBytes = 6;

inline constexpr unsigned kStreamNonBlocking = 1;

/// Every driver function nimble calls. One table per loaded library.
struct DriverApi {
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem_v2)(std::size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr*, std::size_t);
  CUresult (*cuMemFree_v2)(CUdeviceptr);
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void*, std::size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync_v2)(void*, CUdeviceptr, std::size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream);
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, CUjit_option*, void**);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy_v2)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
};

/// A loaded driver library and its function table.
class Driver {
 public:
  /// Opens the library at `path` (a file name is searched as dlopen does),
  /// resolves every function of DriverApi and calls cuInit(0). Throws
  /// Error(not_supported) naming the library and what failed: no library
  /// (dlerror's text), a missing symbol (a driver older than nimble needs),
  /// or cuInit's error (no usable driver or device).
  [[nodiscard]] static std::shared_ptr<const Driver> open(const std::string& path);

  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  [[nodiscard]] const DriverApi& api() const noexcept { return api_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// The driver's CUDA version, e.g. 12040 for 12.4.
  [[nodiscard]] int version() const noexcept { return version_; }

  /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or the number when the
  /// driver does not know the code.
  [[nodiscard]] std::string describe(CUresult result) const;

  /// Throws Error(runtime_error) "CUDA: <call> failed: <describe(result)>"
  /// unless `result` is kSuccess.
  void check(CUresult result, const char* call) const;

 private:
  Driver() = default;
  void* handle_ = nullptr;
  std::string path_;
  int version_ = 0;
  DriverApi api_{};
};

/// The process's driver: the library NIMBLE_CUDA_DRIVER names, else
/// libcuda.so.1. Opened on first use and kept for the life of the process
/// (a failure is remembered: every later call throws the same Error).
[[nodiscard]] std::shared_ptr<const Driver> process_driver();

}  // namespace nimble::cuda

/// Calls driver function `fn` of Driver `driver` and turns a failure into a
/// nimble::Error naming the call: NIMBLE_CU(d, cuMemFree_v2, ptr).
#define NIMBLE_CU(driver, fn, ...) (driver).check((driver).api().fn(__VA_ARGS__), #fn)
