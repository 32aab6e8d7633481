// Kernels that are native code of the host CPU: compiled by the JIT in this
// process, loaded from the disk cache, or exported ahead of time into a
// shared object. They share one calling convention (the emitter's, see
// lib/codegen/llvm/kernel_emitter.hpp):
//
//   i32 prologue(void* const* data, const i64* const* dims, i64* info, i64* sched)
//   i32 stage_k (void* const* data, const i64* const* dims, i64* info, i64 begin, i64 end)
//
// and one description of what the caller needs besides the code — buffers,
// shape bindings, error sites — as plain data (NativeKernelDesc), so that
// the runtime can run an exported kernel with no compiler and no LLVM.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nimble/error.hpp"
#include "nimble/runtime/device.hpp"
#include "nimble/runtime/dtype.hpp"
#include "nimble/runtime/kernel.hpp"
#include "runtime/payload.hpp"

namespace nimble::runtime {

/// What a failure code means; the kernel's caller formats the message (it
/// has the tensors at hand for the shapes).
struct ErrorSite {
  enum class Form : std::uint8_t {
    message,     ///< `text` as it is
    input_dim,   ///< input `buffer` dim `dim` != info[0] (`text`: the expected expression)
    output_dim,  ///< output `buffer` dim `dim` != info[0]
    index,       ///< info[0] out of [0, info[1]) at axis `dim` of `text` (`stage`)
  };
  Form form = Form::message;
  ErrorKind kind = ErrorKind::runtime_error;
  std::string text;
  std::string stage;
  int buffer = -1;
  int dim = -1;
};

/// A native kernel as its caller sees it.
struct NativeKernelDesc {
  std::string name;
  std::uint32_t num_inputs = 0;
  std::uint32_t num_outputs = 0;
  /// Inputs, outputs, then temporaries (the caller allocates those, sized by
  /// the prologue).
  struct Buffer {
    std::string name;
    DType dtype = DType::f32;
    std::uint32_t rank = 0;
  };
  std::vector<Buffer> buffers;
  /// Shape symbols in binding order: `var` is dim `dim` of buffer `buffer`
  /// (the kernel's dynamic dims, which a bucket is about).
  struct Binding {
    std::string var;
    std::uint32_t buffer = 0;
    std::uint32_t dim = 0;
  };
  std::vector<Binding> bindings;
  /// Input dims the kernel checks against a constant.
  std::vector<DynamicDim> constant_input_dims;
  std::uint32_t num_stages = 0;
  std::vector<ErrorSite> errors;  ///< failure code k > 0 is errors[k - 1]
};

/// Appends `desc` to `w`.
void write_desc(PayloadWriter& w, const NativeKernelDesc& desc);
/// Reads what write_desc wrote; nullopt (and r.failed()) if it is truncated
/// or inconsistent (an index out of range, an unknown dtype or form).
[[nodiscard]] std::optional<NativeKernelDesc> read_desc(PayloadReader& r);

/// The addresses of a native kernel's functions, and what keeps them valid
/// (a JIT dylib, a loaded shared object).
struct NativeCode {
  void* prologue = nullptr;
  std::vector<void*> stages;  ///< one per desc.num_stages
  std::shared_ptr<const void> owner;
};

/// Where a native kernel's stages run when not on the host: a GPU launches
/// them (runtime/cuda/cuda_stages.hpp). The prologue, which reads shapes
/// only, still runs on the host.
class StageRunner {
 public:
  virtual ~StageRunner() = default;
  /// The device every tensor of the kernel (and its temporaries) is on.
  [[nodiscard]] virtual Device device() const noexcept = 0;
  /// Runs the stages in order: `data` holds each buffer's address on
  /// device(), `dims` each input's and output's shape (host memory), `sched`
  /// the prologue's (extent, work) per stage. Returns 0, or the code of a
  /// failure with its values in `info`.
  virtual std::int32_t run(void* const* data, const std::int64_t* const* dims, const std::int64_t* sched,
                           std::array<std::int64_t, 4>& info) const = 0;
};

/// A Kernel that runs `code` as `desc` describes it: checks the tensors'
/// dtypes and ranks, runs the prologue, allocates the temporaries, and runs
/// each stage, split across nimble's threads when it is large — or, with
/// `stages`, has `stages` run them (then `code` needs only its prologue,
/// and the tensors must be on stages->device()).
[[nodiscard]] Ref<Kernel> make_native_kernel(NativeKernelDesc desc, NativeCode code,
                                             std::shared_ptr<const StageRunner> stages = nullptr);

/// The symbols of a kernel emitted with `prefix`: the prologue, then the stages.
[[nodiscard]] std::vector<std::string> native_symbols(const std::string& prefix, std::uint32_t num_stages);

}  // namespace nimble::runtime
