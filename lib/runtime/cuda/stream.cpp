#include "runtime/cuda/stream.hpp"

#include <cstdint>

#include "support/check.hpp"

namespace nimble::cuda {

namespace {

CUdeviceptr address(const void* p) noexcept { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)); }

thread_local const StreamScope* t_scope = nullptr;

}  // namespace

StreamScope::StreamScope(std::span<Stream* const> streams) noexcept : streams_(streams), outer_(t_scope) {
  t_scope = this;
}

StreamScope::~StreamScope() { t_scope = outer_; }

Stream* scoped_stream(const Context& context) noexcept {
  if (t_scope == nullptr) return nullptr;
  for (Stream* s : t_scope->streams_)
    if (&s->context().driver() == &context.driver() && s->context().ordinal() == context.ordinal()) return s;
  return nullptr;
}

Stream::Stream(std::shared_ptr<const Context> context) : context_(std::move(context)) {
  context_->make_current();
  NIMBLE_CU(context_->driver(), cuStreamCreate, &stream_, kStreamNonBlocking);
}

Stream::~Stream() {
  try {
    context_->make_current();
    (void)context_->driver().api().cuStreamSynchronize(stream_);
    (void)context_->driver().api().cuStreamDestroy_v2(stream_);
  } catch (const Error&) {
    // No context left to destroy it in.
  }
}

void Stream::copy_to_device(void* device, const void* host, std::size_t n) {
  if (n == 0) return;
  context_->make_current();
  NIMBLE_CU(context_->driver(), cuMemcpyHtoDAsync_v2, address(device), host, n, stream_);
}

void Stream::copy_to_host(void* host, const void* device, std::size_t n) {
  if (n == 0) return;
  context_->make_current();
  NIMBLE_CU(context_->driver(), cuMemcpyDtoHAsync_v2, host, address(device), n, stream_);
  NIMBLE_CU(context_->driver(), cuStreamSynchronize, stream_);
}

void Stream::copy_on_device(void* to, const void* from, std::size_t n) {
  if (n == 0) return;
  context_->make_current();
  NIMBLE_CU(context_->driver(), cuMemcpyDtoDAsync_v2, address(to), address(from), n, stream_);
}

void Stream::launch(CUfunction kernel, const LaunchConfig& config, void** args, std::string_view name) {
  const auto& g = config.grid;
  const auto& b = config.block;
  const std::uint64_t threads = std::uint64_t{b[0]} * b[1] * b[2];
  if (g[0] == 0 || g[1] == 0 || g[2] == 0 || threads == 0 ||
      threads > static_cast<std::uint64_t>(context_->max_threads_per_block()))
    throw_error(ErrorKind::invalid_argument,
                "CUDA: launching {}: expected a grid and block of at least 1 in every dim and at most {} threads per "
                "block, got grid {}x{}x{}, block {}x{}x{}",
                name, context_->max_threads_per_block(), g[0], g[1], g[2], b[0], b[1], b[2]);
  context_->make_current();
  const CUresult r = context_->driver().api().cuLaunchKernel(kernel, g[0], g[1], g[2], b[0], b[1], b[2],
                                                             config.shared_bytes, stream_, args, nullptr);
  if (r != kSuccess)
    throw_error(ErrorKind::runtime_error, "CUDA: cuLaunchKernel failed for {}: {}", name,
                context_->driver().describe(r));
}

void Stream::synchronize() {
  context_->make_current();
  NIMBLE_CU(context_->driver(), cuStreamSynchronize, stream_);
}

}  // namespace nimble::cuda
