// The ahead-of-time KernelProvider: kernels from loaded artifacts — native
// code from the artifact's shared object, and for primitives placed on a GPU
// their PTX loaded into the device's context on first use.
#include "nimble/vm/artifact.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "nimble/runtime/kernel.hpp"
#include "vm/artifact_format.hpp"
#include "runtime/builtin_kernels.hpp"
#include "runtime/cpu_features.hpp"
#include "runtime/cuda/allocator.hpp"
#include "runtime/cuda/cuda_kernel.hpp"
#include "runtime/native_kernel.hpp"
#include "support/check.hpp"
#include "vm/executable_data.hpp"

namespace nimble {

namespace {

// A primitive's kernels: the generic one, and one per exported bucket.
struct AotEntry {
  Ref<Kernel> generic;
  std::vector<std::pair<Bucket, Ref<Kernel>>> specialized;
  // A GPU's kernels are made when the KernelCache asks, on the device there
  // is then: loading an artifact needs no GPU (as compiling for one needs
  // none); running it does. make(0): the generic kernel; make(k): that of
  // specialized[k - 1] (there null). Not kept here: the KernelCache keeps
  // them, and drops them with its other kernels (they hold the device's
  // context).
  std::function<Ref<Kernel>(std::size_t)> make;
};

class AotProvider final : public KernelProvider {
 public:
  std::string_view name() const noexcept override { return "aot"; }

  Ref<Kernel> get(const PrimitiveInfo& prim) override {
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(prim.hash);
    if (it == entries_.end()) return {};
    const AotEntry& entry = it->second;
    return entry.make ? entry.make(0) : entry.generic;
  }

  Ref<Kernel> specialize(const PrimitiveInfo& prim, const Bucket& bucket) override {
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(prim.hash);
    if (it == entries_.end()) return {};
    const AotEntry& entry = it->second;
    for (std::size_t k = 0; k < entry.specialized.size(); ++k) {
      const auto& [b, kernel] = entry.specialized[k];
      if (b == bucket) return entry.make ? entry.make(k + 1) : kernel;
    }
    return {};  // not exported: the generic kernel serves the bucket
  }

  // Adds an artifact's kernels; a primitive an earlier artifact had (the
  // same source, so the same computation) takes the newer kernels.
  void add(std::unordered_map<std::uint64_t, AotEntry> entries) {
    std::lock_guard lock(mutex_);
    for (auto& [hash, entry] : entries) entries_.insert_or_assign(hash, std::move(entry));
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, AotEntry> entries_;
};

AotProvider& aot_provider() {
  // Registered once; the KernelCache shares its ownership. Priority -50:
  // where the runtime runs alone it is the only provider; in a process that
  // also has the compiler, the JIT serves first (and the reference kernels
  // after the artifacts), unless a VM asks for "aot".
  static const std::shared_ptr<AotProvider> provider = [] {
    auto p = std::make_shared<AotProvider>();
    KernelCache::global().add_provider(p, -50);
    return p;
  }();
  return *provider;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(ErrorKind::invalid_argument, "cannot read artifact {}: {}", path, std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw_error(ErrorKind::invalid_argument, "cannot read artifact {}", path);
  return bytes;
}

// The first variant this CPU can run, or Error naming what each lacks.
const runtime::artifact::Variant& choose_variant(const runtime::artifact::Contents& c, const std::string& path) {
  std::string lacking;
  for (const runtime::artifact::Variant& v : c.variants) {
    std::vector<std::string> missing;
    for (const std::string& f : v.required_features)
      if (!runtime::host_has_cpu_feature(f)) missing.push_back(f);
    if (missing.empty()) return v;
    lacking += fmt::format("{}{} (for {}) needs {}", lacking.empty() ? "" : "; ", v.target, v.cpu,
                           fmt::join(missing, ", "));
  }
  throw_error(ErrorKind::not_supported,
              "not supported: artifact {} has no kernels this CPU can run: {}; export it with a portable "
              "variant too (ExportOptions::cpu_targets, e.g. \"x86-64\")",
              path, lacking);
}

// A shared object loaded from memory, unloaded when the last kernel goes.
class SharedObject {
 public:
  SharedObject(std::string_view bytes, const std::string& path) {
    // An anonymous file: the loader maps exactly the bytes that were
    // checked, and nothing is left on disk.
    const int fd = ::memfd_create("nimble-artifact", MFD_CLOEXEC);
    if (fd < 0)
      throw_error(ErrorKind::runtime_error, "artifact {}: memfd_create: {}", path, std::strerror(errno));
    std::size_t written = 0;
    while (written < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
      if (n <= 0) {
        const int error = errno;
        ::close(fd);
        throw_error(ErrorKind::runtime_error, "artifact {}: writing its code: {}", path, std::strerror(error));
      }
      written += static_cast<std::size_t>(n);
    }
    // The loader knows a library by its path: the descriptor stays open
    // while the library is loaded, so that no other artifact's path is the same.
    handle_ = ::dlopen(fmt::format("/proc/self/fd/{}", fd).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      ::close(fd);
      const char* why = ::dlerror();
      throw_error(ErrorKind::runtime_error, "artifact {}: its shared object does not load: {}", path,
                  why != nullptr ? why : "unknown error");
    }
    fd_ = fd;
  }
  ~SharedObject() {
    ::dlclose(handle_);
    ::close(fd_);
  }
  SharedObject(const SharedObject&) = delete;
  SharedObject& operator=(const SharedObject&) = delete;

  void* symbol(const std::string& name, const std::string& path) const {
    void* at = ::dlsym(handle_, name.c_str());
    if (at == nullptr)
      throw_error(ErrorKind::parse_error, "artifact {}: its shared object lacks the kernel symbol {}", path, name);
    return at;
  }

 private:
  void* handle_ = nullptr;
  int fd_ = -1;
};

Ref<Kernel> load_kernel(const runtime::artifact::KernelEntry& k, const std::shared_ptr<const SharedObject>& so,
                        const std::string& path) {
  const std::vector<std::string> symbols = runtime::native_symbols(k.symbol_prefix, k.desc.num_stages);
  runtime::NativeCode code;
  code.prologue = so->symbol(symbols[0], path);
  for (std::size_t s = 1; s < symbols.size(); ++s) code.stages.push_back(so->symbol(symbols[s], path));
  code.owner = so;
  return runtime::make_native_kernel(k.desc, std::move(code));
}

// The GPU kernel of `k` on `device`: its prologue from `so`, its stages the
// PTX of the highest compute capability the device has.
Ref<Kernel> load_gpu_kernel(const runtime::artifact::KernelEntry& k, Device device,
                            const std::shared_ptr<const SharedObject>& so, const std::string& path) {
  auto* gpu = dynamic_cast<cuda::DeviceAllocator*>(&allocator_for(device));
  if (gpu == nullptr)
    throw_error(ErrorKind::not_supported, "not supported: artifact {}: {} runs on {}, which is not a CUDA GPU here",
                path, k.desc.name, to_string(device));
  const int sm = gpu->context().compute_capability();
  const runtime::artifact::Ptx* best = nullptr;
  for (const runtime::artifact::Ptx& p : k.ptx)
    if (static_cast<int>(p.compute_capability) <= sm) best = &p;
  if (best == nullptr)
    throw_error(ErrorKind::not_supported,
                "not supported: artifact {}: {} has PTX for sm_{} and later; {} is sm_{} (export it with "
                "ExportOptions::cuda_targets for it)",
                path, k.desc.name, k.ptx.front().compute_capability, to_string(device), sm);
  runtime::NativeCode prologue;
  prologue.prologue = so->symbol(runtime::native_symbols(k.symbol_prefix, 0)[0], path);
  prologue.owner = so;
  try {
    return cuda::make_cuda_kernel(k.desc, std::move(prologue), best->text, k.symbol_prefix, gpu->shared_context());
  } catch (Error& e) {
    throw e.with_context(fmt::format("artifact {}", path));
  }
}

}  // namespace

vm::Executable load_artifact(const std::string& path, ArtifactInfo* info) {
  const std::string file = read_file(path);
  const runtime::artifact::Contents contents = runtime::artifact::read(file, path);
  vm::Executable executable = [&] {
    try {
      return vm::Executable::load(std::as_bytes(std::span(contents.executable)));
    } catch (Error& e) {
      throw e.with_context(fmt::format("artifact {}", path));
    }
  }();
  const runtime::artifact::Variant& variant = choose_variant(contents, path);
  // An artifact of built-in kernels only has no code.
  const auto so = variant.shared_object.empty() ? nullptr
                                                : std::make_shared<const SharedObject>(variant.shared_object, path);

  ArtifactInfo found;
  found.cpu_target = variant.target;
  found.file_bytes = file.size();
  std::unordered_map<std::uint64_t, AotEntry> entries;
  for (const runtime::artifact::PrimitiveEntry& p : contents.primitives) {
    AotEntry entry;
    if (!p.builtin.empty()) {
      entry.generic = runtime::make_builtin_kernel(p.builtin, p.kind, p.builtin_attrs);
      if (!entry.generic)
        throw_error(ErrorKind::not_supported, "not supported: artifact {} calls {} (op {}), which this runtime lacks",
                    path, p.name, p.builtin);
      ++found.builtins;
    } else {
      if (!so) throw_error(ErrorKind::parse_error, "artifact {}: {} has kernels but the artifact no code", path, p.name);
      const auto prim = std::find_if(executable.data().primitives.begin(), executable.data().primitives.end(),
                                     [&](const PrimitiveInfo& q) { return q.hash == p.hash; });
      const Device device = prim == executable.data().primitives.end() ? Device::cpu() : prim->device;
      for (const runtime::artifact::KernelEntry& k : p.kernels)
        if (device.is_cpu() == !k.ptx.empty())
          throw_error(ErrorKind::parse_error, "artifact {}: {} runs on {} but a kernel of it is {}", path, p.name,
                      to_string(device), k.ptx.empty() ? "host code only" : "a GPU's (PTX)");
      if (!device.is_cpu()) {
        for (std::size_t k = 1; k < p.kernels.size(); ++k) entry.specialized.emplace_back(p.kernels[k].bucket, nullptr);
        entry.make = [kernels = p.kernels, device, so, path](std::size_t k) {
          return load_gpu_kernel(kernels.at(k), device, so, path);
        };
        found.kernels += p.kernels.size();
        found.specialized += p.kernels.size() - 1;
        found.gpu_kernels += p.kernels.size();
        entries.emplace(p.hash, std::move(entry));
        continue;
      }
      entry.generic = load_kernel(p.kernels[0], so, path);
      for (std::size_t k = 1; k < p.kernels.size(); ++k)
        entry.specialized.emplace_back(p.kernels[k].bucket, load_kernel(p.kernels[k], so, path));
      found.kernels += p.kernels.size();
      found.specialized += p.kernels.size() - 1;
    }
    entries.emplace(p.hash, std::move(entry));
  }
  found.primitives = entries.size();
  // Every primitive the bytecode calls must have its kernel here: a model
  // that fails half-way through its first call would be worse.
  for (const PrimitiveInfo& prim : executable.data().primitives)
    if (!entries.contains(prim.hash))
      throw_error(ErrorKind::parse_error, "artifact {}: no kernel for primitive {} (hash {:016x})", path, prim.name,
                  prim.hash);
  aot_provider().add(std::move(entries));
  if (info != nullptr) *info = std::move(found);
  return executable;
}

}  // namespace nimble
