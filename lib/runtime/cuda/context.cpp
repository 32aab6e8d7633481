#include "runtime/cuda/context.hpp"

#include <array>

#include "support/check.hpp"

namespace nimble::cuda {

std::shared_ptr<const Context> Context::open(std::shared_ptr<const Driver> driver, int ordinal) {
  const Driver& d = *driver;
  int count = 0;
  if (const CUresult r = d.api().cuDeviceGetCount(&count); r != kSuccess && r != kErrorNoDevice) d.check(r, "cuDeviceGetCount");
  if (count == 0) throw_error(ErrorKind::not_supported, "not supported: no CUDA device (the driver {} sees none)", d.path());
  if (ordinal < 0 || ordinal >= count)
    throw_error(ErrorKind::not_supported, "not supported: no CUDA device cuda:{} (the driver sees {}: cuda:0 to cuda:{})",
                ordinal, count, count - 1);
  std::shared_ptr<Context> c(new Context);
  c->driver_ = std::move(driver);
  c->ordinal_ = ordinal;
  NIMBLE_CU(d, cuDeviceGet, &c->device_, ordinal);
  std::array<char, 256> name{};
  NIMBLE_CU(d, cuDeviceGetName, name.data(), static_cast<int>(name.size() - 1), c->device_);
  c->name_ = name.data();
  int major = 0, minor = 0;
  NIMBLE_CU(d, cuDeviceGetAttribute, &major, kAttributeComputeCapabilityMajor, c->device_);
  NIMBLE_CU(d, cuDeviceGetAttribute, &minor, kAttributeComputeCapabilityMinor, c->device_);
  c->compute_capability_ = major * 10 + minor;
  NIMBLE_CU(d, cuDeviceGetAttribute, &c->multiprocessors_, kAttributeMultiprocessorCount, c->device_);
  NIMBLE_CU(d, cuDeviceGetAttribute, &c->max_threads_per_block_, kAttributeMaxThreadsPerBlock, c->device_);
  NIMBLE_CU(d, cuDeviceTotalMem_v2, &c->total_memory_, c->device_);
  // Retained last: the destructor releases it only for a context it holds.
  NIMBLE_CU(d, cuDevicePrimaryCtxRetain, &c->context_, c->device_);
  return c;
}

Context::~Context() {
  if (context_ != nullptr) (void)driver_->api().cuDevicePrimaryCtxRelease_v2(device_);
}

void Context::make_current() const { NIMBLE_CU(*driver_, cuCtxSetCurrent, context_); }

}  // namespace nimble::cuda
