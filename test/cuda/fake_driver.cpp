// A fake CUDA driver for the [cuda] tests on machines without a GPU: a
// shared object that exports the driver functions nimble resolves
// (lib/runtime/cuda/driver.hpp), under the same versioned names, backed by
// host memory. It checks what a real driver would reject — a call without a
// current context, a copy outside an allocation, a free of an unknown
// address, a launch of more parameters than the kernel declares — and
// records what the tests inspect: live allocations, modules, streams and
// retained contexts, every launch with its configuration and parameter
// values. fake_cuda_* functions configure it and read it back.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/fake_driver.hpp"

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;

constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kOutOfMemory = 2;
constexpr CUresult kNotInitialized = 3;
constexpr CUresult kNoDevice = 100;
constexpr CUresult kInvalidDevice = 101;
constexpr CUresult kInvalidContext = 201;
constexpr CUresult kInvalidPtx = 218;
constexpr CUresult kInvalidHandle = 400;
constexpr CUresult kNotFound = 500;

struct Kernel {
  std::string entry;
  std::vector<std::size_t> param_sizes;
};

struct Module {
  std::vector<Kernel> kernels;
};

struct Stream {};

}  // namespace


namespace {

struct State {
  std::mutex mutex;
  bool initialized = false;
  int device_count = 1;
  int compute_capability = 90;
  std::size_t memory_limit = std::size_t{1} << 30;
  std::size_t memory_used = 0;
  int retained = 0;
  std::map<std::uintptr_t, std::size_t> allocations;  // address → bytes
  std::vector<Module*> modules;
  std::vector<Stream*> streams;
  std::vector<FakeLaunch> launches;
  std::map<std::string, int> calls;
  std::map<std::string, CUresult> fail_next;
  int context_token = 0;  // the address of this is the (only) context handle
  // Runs a launch in the test's place (fake_cuda_set_launch_hook).
  int (*launch_hook)(const char* entry, void** params, const unsigned* grid, const unsigned* block) = nullptr;
};

// Destroyed when the library is unloaded (the tests open and close it per
// case), so that nothing it holds outlives it unreachable.
State& state() {
  static State s;
  return s;
}

thread_local void* current_context = nullptr;

// Counts the call and returns the failure a test planted for it, if any.
CUresult enter(State& s, const char* call) {
  ++s.calls[call];
  if (auto it = s.fail_next.find(call); it != s.fail_next.end()) {
    const CUresult r = it->second;
    s.fail_next.erase(it);
    return r;
  }
  if (!s.initialized && std::strcmp(call, "cuInit") != 0 && std::strcmp(call, "cuGetErrorName") != 0 &&
      std::strcmp(call, "cuGetErrorString") != 0 && std::strcmp(call, "cuDriverGetVersion") != 0)
    return kNotInitialized;
  return kSuccess;
}

bool has_context(State& s) { return current_context == &s.context_token; }

// Whether [p, p + n) lies inside one allocation.
bool inside(State& s, CUdeviceptr p, std::size_t n) {
  auto it = s.allocations.upper_bound(static_cast<std::uintptr_t>(p));
  if (it == s.allocations.begin()) return false;
  --it;
  return p >= it->first && p + n <= it->first + it->second;
}

#define FAKE_ENTER(name)                               \
  State& s = state();                                  \
  const std::lock_guard lock(s.mutex);                 \
  if (const CUresult r = enter(s, name); r != kSuccess) return r

// The .entry kernels of `ptx` and their parameters' sizes; false when a
// parameter's type is not one the fake knows.
bool parse_entries(const std::string& ptx, std::vector<Kernel>& kernels) {
  std::size_t at = 0;
  while ((at = ptx.find(".entry", at)) != std::string::npos) {
    at += 6;
    const std::size_t open = ptx.find('(', at);
    const std::size_t close = ptx.find(')', open);
    if (open == std::string::npos || close == std::string::npos) return false;
    Kernel k;
    std::string name = ptx.substr(at, open - at);
    name.erase(std::remove_if(name.begin(), name.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n'; }),
               name.end());
    k.entry = name;
    std::size_t p = open;
    while ((p = ptx.find(".param", p)) != std::string::npos && p < close) {
      p += 6;
      const std::size_t type = ptx.find('.', p);
      const std::string t = ptx.substr(type + 1, 3);
      if (t == "u64" || t == "s64" || t == "b64" || t == "f64")
        k.param_sizes.push_back(8);
      else if (t == "u32" || t == "s32" || t == "b32" || t == "f32")
        k.param_sizes.push_back(4);
      else
        return false;
    }
    kernels.push_back(std::move(k));
  }
  return true;
}

}  // namespace

extern "C" {

// --- the driver functions ------------------------------------------------------

CUresult cuGetErrorName(CUresult r, const char** name) {
  static const std::map<CUresult, const char*> names = {
      {kSuccess, "CUDA_SUCCESS"},           {kInvalidValue, "CUDA_ERROR_INVALID_VALUE"},
      {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"}, {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED"},
      {kNoDevice, "CUDA_ERROR_NO_DEVICE"},  {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE"},
      {kInvalidContext, "CUDA_ERROR_INVALID_CONTEXT"}, {kInvalidPtx, "CUDA_ERROR_INVALID_PTX"},
      {kInvalidHandle, "CUDA_ERROR_INVALID_HANDLE"}, {kNotFound, "CUDA_ERROR_NOT_FOUND"}};
  const auto it = names.find(r);
  if (it == names.end()) return kInvalidValue;
  *name = it->second;
  return kSuccess;
}

CUresult cuGetErrorString(CUresult r, const char** text) {
  const char* name = nullptr;
  if (cuGetErrorName(r, &name) != kSuccess) return kInvalidValue;
  *text = r == kOutOfMemory ? "out of memory" : r == kInvalidPtx ? "a PTX JIT compilation failed" : "fake driver error";
  return kSuccess;
}

CUresult cuInit(unsigned flags) {
  FAKE_ENTER("cuInit");
  if (flags != 0) return kInvalidValue;
  s.initialized = true;
  return kSuccess;
}

CUresult cuDriverGetVersion(int* version) {
  FAKE_ENTER("cuDriverGetVersion");
  *version = 12040;
  return kSuccess;
}

CUresult cuDeviceGetCount(int* count) {
  FAKE_ENTER("cuDeviceGetCount");
  *count = s.device_count;
  return kSuccess;
}

CUresult cuDeviceGet(int* device, int ordinal) {
  FAKE_ENTER("cuDeviceGet");
  if (ordinal < 0 || ordinal >= s.device_count) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

CUresult cuDeviceGetName(char* name, int length, int device) {
  FAKE_ENTER("cuDeviceGetName");
  if (device < 0 || device >= s.device_count) return kInvalidDevice;
  std::snprintf(name, static_cast<std::size_t>(length), "Fake GPU %d", device);
  return kSuccess;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, int device) {
  FAKE_ENTER("cuDeviceGetAttribute");
  if (device < 0 || device >= s.device_count) return kInvalidDevice;
  switch (attribute) {
    case 1: *value = 1024; return kSuccess;                           // max threads per block
    case 16: *value = 132; return kSuccess;                           // multiprocessors
    case 75: *value = s.compute_capability / 10; return kSuccess;     // major
    case 76: *value = s.compute_capability % 10; return kSuccess;     // minor
    default: return kInvalidValue;
  }
}

CUresult cuDeviceTotalMem_v2(std::size_t* bytes, int device) {
  FAKE_ENTER("cuDeviceTotalMem_v2");
  if (device < 0 || device >= s.device_count) return kInvalidDevice;
  *bytes = s.memory_limit;
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRetain(void** context, int device) {
  FAKE_ENTER("cuDevicePrimaryCtxRetain");
  if (device < 0 || device >= s.device_count) return kInvalidDevice;
  ++s.retained;
  *context = &s.context_token;
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRelease_v2(int device) {
  FAKE_ENTER("cuDevicePrimaryCtxRelease_v2");
  if (device < 0 || device >= s.device_count || s.retained == 0) return kInvalidDevice;
  --s.retained;
  return kSuccess;
}

CUresult cuCtxSetCurrent(void* context) {
  FAKE_ENTER("cuCtxSetCurrent");
  if (context != nullptr && (context != &s.context_token || s.retained == 0)) return kInvalidContext;
  current_context = context;
  return kSuccess;
}

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, std::size_t bytes) {
  FAKE_ENTER("cuMemAlloc_v2");
  if (!has_context(s)) return kInvalidContext;
  if (bytes == 0) return kInvalidValue;
  if (bytes > s.memory_limit - s.memory_used) return kOutOfMemory;
  void* block = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (block == nullptr) return kOutOfMemory;
  s.memory_used += bytes;
  s.allocations[reinterpret_cast<std::uintptr_t>(block)] = bytes;
  *ptr = reinterpret_cast<std::uintptr_t>(block);
  return kSuccess;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  FAKE_ENTER("cuMemFree_v2");
  if (!has_context(s)) return kInvalidContext;
  const auto it = s.allocations.find(static_cast<std::uintptr_t>(ptr));
  if (it == s.allocations.end()) return kInvalidValue;
  s.memory_used -= it->second;
  std::free(reinterpret_cast<void*>(it->first));
  s.allocations.erase(it);
  return kSuccess;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr to, const void* from, std::size_t n, void*) {
  FAKE_ENTER("cuMemcpyHtoDAsync_v2");
  if (!has_context(s)) return kInvalidContext;
  if (!inside(s, to, n)) return kInvalidValue;
  std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(to)), from, n);
  return kSuccess;
}

CUresult cuMemcpyDtoHAsync_v2(void* to, CUdeviceptr from, std::size_t n, void*) {
  FAKE_ENTER("cuMemcpyDtoHAsync_v2");
  if (!has_context(s)) return kInvalidContext;
  if (!inside(s, from, n)) return kInvalidValue;
  std::memcpy(to, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(from)), n);
  return kSuccess;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr to, CUdeviceptr from, std::size_t n, void*) {
  FAKE_ENTER("cuMemcpyDtoDAsync_v2");
  if (!has_context(s)) return kInvalidContext;
  if (!inside(s, to, n) || !inside(s, from, n)) return kInvalidValue;
  std::memmove(reinterpret_cast<void*>(static_cast<std::uintptr_t>(to)),
               reinterpret_cast<const void*>(static_cast<std::uintptr_t>(from)), n);
  return kSuccess;
}

// Takes the error log options as the driver does (CU_JIT_ERROR_LOG_BUFFER =
// 5, its size = 6, the size passed in the pointer's bits) and rejects PTX
// without a .version directive, or with a parameter type it does not know.
CUresult cuModuleLoadDataEx(void** module, const void* image, unsigned num_options, int* options, void** values) {
  FAKE_ENTER("cuModuleLoadDataEx");
  if (!has_context(s)) return kInvalidContext;
  char* log = nullptr;
  std::size_t log_size = 0;
  for (unsigned i = 0; i < num_options; ++i) {
    if (options[i] == 5) log = static_cast<char*>(values[i]);
    if (options[i] == 6) log_size = static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(values[i]));
  }
  const std::string ptx(static_cast<const char*>(image));
  auto* m = new Module;
  const char* problem = nullptr;
  if (ptx.find(".version") == std::string::npos)
    problem = "ptxas application ptx input, line 1; fatal   : Missing .version directive at start of file";
  else if (!parse_entries(ptx, m->kernels))
    problem = "ptxas application ptx input; error   : unknown parameter type";
  if (problem != nullptr) {
    delete m;
    if (log != nullptr && log_size > 0) std::snprintf(log, log_size, "%s", problem);
    return kInvalidPtx;
  }
  s.modules.push_back(m);
  *module = m;
  return kSuccess;
}

CUresult cuModuleGetFunction(void** function, void* module, const char* name) {
  FAKE_ENTER("cuModuleGetFunction");
  auto* m = static_cast<Module*>(module);
  if (std::find(s.modules.begin(), s.modules.end(), m) == s.modules.end()) return kInvalidHandle;
  for (Kernel& k : m->kernels)
    if (k.entry == name) {
      *function = &k;
      return kSuccess;
    }
  return kNotFound;
}

CUresult cuModuleUnload(void* module) {
  FAKE_ENTER("cuModuleUnload");
  if (!has_context(s)) return kInvalidContext;
  auto* m = static_cast<Module*>(module);
  const auto it = std::find(s.modules.begin(), s.modules.end(), m);
  if (it == s.modules.end()) return kInvalidHandle;
  s.modules.erase(it);
  delete m;
  return kSuccess;
}

CUresult cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void* stream, void** params, void** extra) {
  FAKE_ENTER("cuLaunchKernel");
  if (!has_context(s)) return kInvalidContext;
  if (extra != nullptr || gx * gy * gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024) return kInvalidValue;
  if (stream != nullptr && std::find(s.streams.begin(), s.streams.end(), stream) == s.streams.end())
    return kInvalidHandle;
  const auto* k = static_cast<const Kernel*>(function);
  FakeLaunch l{};
  std::snprintf(l.entry, sizeof l.entry, "%s", k->entry.c_str());
  l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
  l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
  l.shared_bytes = shared;
  l.stream = stream;
  l.num_params = static_cast<int>(k->param_sizes.size());
  for (std::size_t i = 0; i < k->param_sizes.size() && i < 8; ++i) {
    if (params == nullptr || params[i] == nullptr) return kInvalidValue;
    std::memcpy(&l.params[i], params[i], k->param_sizes[i]);
  }
  s.launches.push_back(l);
  if (s.launch_hook != nullptr) return s.launch_hook(k->entry.c_str(), params, l.grid, l.block);
  return kSuccess;
}

CUresult cuStreamCreate(void** stream, unsigned flags) {
  FAKE_ENTER("cuStreamCreate");
  if (!has_context(s)) return kInvalidContext;
  if (flags > 1) return kInvalidValue;
  auto* st = new Stream;
  s.streams.push_back(st);
  *stream = st;
  return kSuccess;
}

CUresult cuStreamDestroy_v2(void* stream) {
  FAKE_ENTER("cuStreamDestroy_v2");
  if (!has_context(s)) return kInvalidContext;
  const auto it = std::find(s.streams.begin(), s.streams.end(), stream);
  if (it == s.streams.end()) return kInvalidHandle;
  delete *it;
  s.streams.erase(it);
  return kSuccess;
}

CUresult cuStreamSynchronize(void* stream) {
  FAKE_ENTER("cuStreamSynchronize");
  if (!has_context(s)) return kInvalidContext;
  if (stream != nullptr && std::find(s.streams.begin(), s.streams.end(), stream) == s.streams.end())
    return kInvalidHandle;
  return kSuccess;
}

// --- the tests' controls ---------------------------------------------------------

// Forgets every call and launch; the next cuInit starts the driver again.
// Live objects stay (the tests check that nimble gives them all back).
void fake_cuda_configure(int device_count, unsigned long long memory_bytes, int compute_capability) {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  s.device_count = device_count;
  s.memory_limit = memory_bytes;
  s.compute_capability = compute_capability;
  s.launches.clear();
  s.calls.clear();
  s.fail_next.clear();
  current_context = nullptr;  // the calling thread's: each test starts with none
}

// Each launch from now on is also run by `hook` (null: none), a test's
// stand-in for the GPU: it gets the entry's name, the parameters (a pointer
// to each value) and the grid and block; what it returns, the launch does.
void fake_cuda_set_launch_hook(int (*hook)(const char*, void**, const unsigned*, const unsigned*)) {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  s.launch_hook = hook;
}

// The next call of `call` returns `result` (before any of its checks).
void fake_cuda_fail_next(const char* call, int result) {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  s.fail_next[call] = result;
}

int fake_cuda_calls(const char* call) {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  const auto it = s.calls.find(call);
  return it == s.calls.end() ? 0 : it->second;
}

int fake_cuda_live_allocations() {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  return static_cast<int>(s.allocations.size());
}

int fake_cuda_live_modules() {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  return static_cast<int>(s.modules.size());
}

int fake_cuda_live_streams() {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  return static_cast<int>(s.streams.size());
}

int fake_cuda_retained_contexts() {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  return s.retained;
}

int fake_cuda_launch_count() {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  return static_cast<int>(s.launches.size());
}

// Launch `i` (in order) into `out`; false when there is none.
bool fake_cuda_launch(int i, FakeLaunch* out) {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  if (i < 0 || static_cast<std::size_t>(i) >= s.launches.size()) return false;
  *out = s.launches[static_cast<std::size_t>(i)];
  return true;
}

}  // extern "C"
