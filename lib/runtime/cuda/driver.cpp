#include "runtime/cuda/driver.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <variant>

#include "support/check.hpp"

namespace nimble::cuda {

namespace {

// Resolves `name` into `slot`; throws naming the symbol when it is missing.
template <class Fn>
void resolve(void* handle, const std::string& path, const char* name, Fn*& slot) {
  void* symbol = ::dlsym(handle, name);
  if (symbol == nullptr)
    throw_error(ErrorKind::not_supported,
                "not supported: the CUDA driver {} has no {} (a driver older than nimble needs?)", path, name);
  slot = reinterpret_cast<Fn*>(symbol);
}

}  // namespace

std::shared_ptr<const Driver> Driver::open(const std::string& path) {
  std::shared_ptr<Driver> driver(new Driver);
  driver->path_ = path;
  driver->handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (driver->handle_ == nullptr) {
    const char* why = ::dlerror();
    throw_error(ErrorKind::not_supported, "not supported: no CUDA driver: cannot load {}: {}", path,
                why != nullptr ? why : "unknown error");
  }
  DriverApi& a = driver->api_;
  void* h = driver->handle_;
#define NIMBLE_RESOLVE(fn) resolve(h, path, #fn, a.fn)
  NIMBLE_RESOLVE(cuGetErrorName);
  NIMBLE_RESOLVE(cuGetErrorString);
  NIMBLE_RESOLVE(cuInit);
  NIMBLE_RESOLVE(cuDriverGetVersion);
  NIMBLE_RESOLVE(cuDeviceGetCount);
  NIMBLE_RESOLVE(cuDeviceGet);
  NIMBLE_RESOLVE(cuDeviceGetName);
  NIMBLE_RESOLVE(cuDeviceGetAttribute);
  NIMBLE_RESOLVE(cuDeviceTotalMem_v2);
  NIMBLE_RESOLVE(cuDevicePrimaryCtxRetain);
  NIMBLE_RESOLVE(cuDevicePrimaryCtxRelease_v2);
  NIMBLE_RESOLVE(cuCtxSetCurrent);
  NIMBLE_RESOLVE(cuMemAlloc_v2);
  NIMBLE_RESOLVE(cuMemFree_v2);
  NIMBLE_RESOLVE(cuMemcpyHtoDAsync_v2);
  NIMBLE_RESOLVE(cuMemcpyDtoHAsync_v2);
  NIMBLE_RESOLVE(cuMemcpyDtoDAsync_v2);
  NIMBLE_RESOLVE(cuModuleLoadDataEx);
  NIMBLE_RESOLVE(cuModuleGetFunction);
  NIMBLE_RESOLVE(cuModuleUnload);
  NIMBLE_RESOLVE(cuLaunchKernel);
  NIMBLE_RESOLVE(cuStreamCreate);
  NIMBLE_RESOLVE(cuStreamDestroy_v2);
  NIMBLE_RESOLVE(cuStreamSynchronize);
#undef NIMBLE_RESOLVE
  if (const CUresult r = a.cuInit(0); r != kSuccess)
    throw_error(ErrorKind::not_supported, "not supported: the CUDA driver {} cannot start: cuInit failed: {}", path,
                driver->describe(r));
  driver->check(a.cuDriverGetVersion(&driver->version_), "cuDriverGetVersion");
  return driver;
}

Driver::~Driver() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

std::string Driver::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName(result, &name) != kSuccess || name == nullptr) return fmt::format("CUDA error {}", result);
  if (api_.cuGetErrorString(result, &text) != kSuccess || text == nullptr) return name;
  return fmt::format("{} ({})", name, text);
}

void Driver::check(CUresult result, const char* call) const {
  if (result != kSuccess) [[unlikely]]
    throw_error(ErrorKind::runtime_error, "CUDA: {} failed: {}", call, describe(result));
}

std::shared_ptr<const Driver> process_driver() {
  // Never destroyed: kernels and tensors in statics may release device
  // memory at exit, after a function-local static here would be gone.
  static const auto* const loaded = [] {
    const char* chosen = std::getenv("NIMBLE_CUDA_DRIVER");
    const std::string path = chosen != nullptr && *chosen != '\0' ? chosen : "libcuda.so.1";
    try {
      return new std::variant<std::shared_ptr<const Driver>, Error>(Driver::open(path));
    } catch (const Error& e) {
      return new std::variant<std::shared_ptr<const Driver>, Error>(e);
    }
  }();
  if (const auto* error = std::get_if<Error>(loaded)) throw *error;
  return std::get<std::shared_ptr<const Driver>>(*loaded);
}

}  // namespace nimble::cuda
