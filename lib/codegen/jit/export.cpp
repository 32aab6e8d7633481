// Ahead-of-time export (include/nimble/export.hpp): every primitive function
// of an Executable lowered as the JIT lowers it — its generic kernel and its
// specialized buckets — compiled for each CPU variant as position-
// independent objects, linked into one shared object per variant by the
// system linker, and written with the bytecode and the kernels' descriptions
// into one artifact (vm/artifact_format.hpp). Primitives the JIT leaves
// to the reference kernels are exported too: a data-independent shape
// function as a native kernel that computes its output's shape expressions,
// an opaque op the runtime implements itself (stack) by name. A primitive
// placed on a GPU is exported as the JIT makes it there: the PTX of its
// generic kernel and of each bucket for each CUDA target, their prologues
// (host code) in each CPU variant's shared object.
#include "nimble/export.hpp"

#include <fmt/format.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <tbb/parallel_for.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <unordered_set>

#include "codegen/cpu/cpu_kernel.hpp"
#include "codegen/cuda/gpu_kernel.hpp"
#include "codegen/kernel_ir.hpp"
#include "codegen/llvm/host_code.hpp"
#include "codegen/llvm/jit.hpp"
#include "codegen/llvm/kernel_emitter.hpp"
#include "codegen/primitive_rule.hpp"
#include "ir/op.hpp"
#include "nimble/ir/module.hpp"
#include "nimble/version.hpp"
#include "ops/relation_util.hpp"
#include "vm/artifact_format.hpp"
#include "support/check.hpp"
#include "vm/executable_data.hpp"

extern char** environ;

namespace nimble {

namespace {

namespace fs = std::filesystem;
using runtime::artifact::KernelEntry;
using runtime::artifact::PrimitiveEntry;

struct CpuTarget {
  std::string name;
  codegen::ObjectTarget object;
  std::vector<std::string> required;  ///< as runtime/cpu_features.hpp names them
  unsigned vector_bits = 128;         ///< codegen::vector_bits of `object`
};

// The features each x86-64 micro-architecture level adds (the psABI's
// table, in LLVM's names).
std::vector<std::string> level_features(int level) {
  std::vector<std::string> f{"64bit", "cmov", "cx8", "fxsr", "mmx", "sse", "sse2"};
  if (level >= 2) f.insert(f.end(), {"cx16", "popcnt", "sahf", "sse3", "sse4.1", "sse4.2", "ssse3"});
  if (level >= 3) f.insert(f.end(), {"avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"});
  if (level >= 4) f.insert(f.end(), {"avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"});
  return f;
}

CpuTarget cpu_target(const std::string& name) {
  if (name == "host") {
    CpuTarget t{name, codegen::jit_object_target(), {}, 0};
    t.vector_bits = codegen::vector_bits(t.object);
    // Every feature the JIT compiles with: "+avx2,+fma,-avx512f,...".
    std::string_view rest = t.object.features;
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string_view f = rest.substr(0, comma);
      if (f.size() > 1 && f[0] == '+') t.required.emplace_back(f.substr(1));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    return t;
  }
  for (int level = 1; level <= 4; ++level) {
    const std::string cpu = level == 1 ? "x86-64" : fmt::format("x86-64-v{}", level);
    if (name == cpu) {
      CpuTarget t{name, {cpu, ""}, level_features(level), 0};
      t.vector_bits = codegen::vector_bits(t.object);
      return t;
    }
  }
  throw_error(ErrorKind::invalid_argument,
              "export: unknown CPU target \"{}\": expected host, x86-64-v4, x86-64-v3, x86-64-v2 or x86-64", name);
}

// The compute capabilities of `names` ("sm_90" → 90), ascending, each one
// nimble targets.
std::vector<std::uint32_t> cuda_capabilities(const std::vector<std::string>& names) {
  std::vector<std::uint32_t> all;
  for (const std::string& name : names) {
    const bool parsed = name.size() == 5 && name.starts_with("sm_") && std::isdigit(static_cast<unsigned char>(name[3])) &&
                        std::isdigit(static_cast<unsigned char>(name[4]));
    if (!parsed) throw_error(ErrorKind::invalid_argument, "export: CUDA target \"{}\": not of the form sm_NN", name);
    const int sm = std::stoi(name.substr(3));
    try {
      (void)codegen::CudaTarget{sm}.ptx_version();
    } catch (const Error& e) {
      throw_error(ErrorKind::invalid_argument, "export: CUDA target \"{}\": {}", name, e.message());
    }
    all.push_back(static_cast<std::uint32_t>(sm));
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

// The opaque ops whose kernels the runtime has (runtime/builtin_kernels.hpp),
// with their integer attributes in the order it takes them.
struct Builtin {
  std::string_view op;
  std::vector<std::string_view> attrs;
};
const Builtin kBuiltins[] = {{"stack", {"axis"}}};

// `prim` as a call of a built-in op: its entry, or nullopt.
std::optional<PrimitiveEntry> builtin_entry(const PrimitiveInfo& prim) {
  const ir::Module m = ir::parse(prim.source, prim.name.c_str());
  if (m.functions().size() != 1) return std::nullopt;
  const auto* fn = m.functions()[0].second.as<ir::FunctionNode>();
  const auto* call = fn ? fn->body.as<ir::CallNode>() : nullptr;
  const auto* op = call ? call->callee.as<ir::OpNode>() : nullptr;
  if (!op) return std::nullopt;
  for (const Builtin& b : kBuiltins) {
    if (op->def->name != b.op) continue;
    PrimitiveEntry e{.hash = prim.hash, .name = prim.name, .kind = prim.kind, .builtin = std::string(b.op)};
    for (std::string_view a : b.attrs) e.builtin_attrs.push_back(ops::int_attr(*op->def, call->attrs, a));
    return e;
  }
  return std::nullopt;
}

// The kernel of a data-independent shape function: the compute rule's
// inputs, and per result an i64[rank] of its shape expressions, under the
// rule's checks (so that a mismatch is reported before any allocation).
std::optional<codegen::KernelIR> shape_kernel_ir(const PrimitiveInfo& prim) {
  PrimitiveInfo compute = prim;
  compute.kind = PrimitiveKind::compute;
  const std::optional<codegen::PrimitiveRule> rule = codegen::primitive_rule(compute);
  if (!rule) return std::nullopt;
  std::vector<te::Check> checks;
  for (const te::Tensor& t : te::stages(rule->outputs))
    if (!t.is_placeholder()) checks.insert(checks.end(), t->checks.begin(), t->checks.end());
  std::vector<te::Tensor> shapes;
  for (std::size_t k = 0; k < rule->outputs.size(); ++k) {
    const std::vector<te::Expr>& dims = rule->outputs[k].shape();
    const auto rank = static_cast<std::int64_t>(dims.size());
    shapes.push_back(te::compute(
        {te::int_imm(rank)}, fmt::format("shape{}", k),
        [&](std::span<const te::Var> i) {
          if (dims.empty()) return te::int_imm(0);
          te::Expr e = te::cast(DType::i64, dims.back());
          for (std::int64_t d = rank - 2; d >= 0; --d)
            e = te::select(te::eq(i[0], te::int_imm(d)), te::cast(DType::i64, dims[static_cast<std::size_t>(d)]), e);
          return e;
        },
        k == 0 ? checks : std::vector<te::Check>{}));
  }
  return codegen::lower_to_kernel_ir(prim.name, rule->inputs, shapes);
}

// The generic kernel IR of `prim`, or nullopt if it has no compute rule.
std::optional<codegen::KernelIR> kernel_ir(const PrimitiveInfo& prim) {
  if (prim.kind == PrimitiveKind::shape_function) return shape_kernel_ir(prim);
  const std::optional<codegen::PrimitiveRule> rule = codegen::primitive_rule(prim);
  if (!rule) return std::nullopt;
  return codegen::lower_to_kernel_ir(prim.name, rule->inputs, rule->outputs);
}

// One kernel to compile for every variant (for a GPU kernel: its prologue),
// and a GPU kernel's PTX for every CUDA target.
struct Job {
  std::size_t primitive;  // index into the entries
  codegen::KernelIR ir;
  Bucket bucket;
  std::string prefix;
  bool gpu = false;
};

// Runs `argv`; its stderr into the Error if it fails.
void run_tool(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw_error(ErrorKind::runtime_error, "export: cannot run the linker {}: {}", argv[0], std::strerror(spawned));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  throw_error(ErrorKind::runtime_error, "export: the linker {} failed: {}", argv[0], output);
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "/usr/bin:/bin";
  while (!rest.empty()) {
    const std::size_t colon = rest.find(':');
    const fs::path dir(std::string(rest.substr(0, colon)));
    if (::access((dir / program).c_str(), X_OK) == 0) return true;
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  return false;
}

std::string choose_linker(const std::string& wanted) {
  if (!wanted.empty()) return wanted;
  for (const char* l : {"ld.lld", "ld"})
    if (on_path(l)) return l;
  throw_error(ErrorKind::runtime_error, "export: no linker found on PATH (ld.lld or ld); set ExportOptions::linker");
}

// A directory of its own under the system's temporary directory, removed
// with everything in it when the export is done.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "nimble-export-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw_error(ErrorKind::runtime_error, "export: cannot make a temporary directory: {}", std::strerror(errno));
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const fs::path& path() const noexcept { return path_; }

 private:
  fs::path path_;
};

std::string read_binary(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

ExportReport export_executable(const vm::Executable& executable, const std::string& path,
                               const ExportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.cpu_targets.empty())
    throw_error(ErrorKind::invalid_argument, "export: ExportOptions::cpu_targets is empty");
  std::vector<CpuTarget> targets;
  for (const std::string& name : options.cpu_targets) targets.push_back(cpu_target(name));
  const std::vector<std::uint32_t> cuda_targets = cuda_capabilities(options.cuda_targets);
  const vm::ExecutableData& data = executable.data();
  for (const ExportBucket& b : options.buckets) {
    const bool known = std::any_of(data.primitives.begin(), data.primitives.end(),
                                   [&](const PrimitiveInfo& p) { return p.name == b.primitive; });
    if (!known)
      throw_error(ErrorKind::invalid_argument, "export: ExportOptions::buckets names {}, which the executable does not call",
                  b.primitive);
  }

  // What to compile: per primitive its generic kernel and its buckets.
  runtime::artifact::Contents contents;
  contents.nimble_version = kVersion;
  contents.llvm_version = LLVM_VERSION_STRING;
  std::vector<Job> jobs;
  ExportReport report;
  std::unordered_set<std::uint64_t> seen;
  for (const PrimitiveInfo& prim : data.primitives) {
    if (!seen.insert(prim.hash).second) continue;
    const bool gpu = !prim.device.is_cpu();
    std::optional<codegen::KernelIR> ir;
    try {
      ir = kernel_ir(prim);
      if (gpu && ir) codegen::check_runs_on_gpu(*ir);
    } catch (Error& e) {
      if (e.kind() != ErrorKind::not_supported || gpu) throw e.with_context(fmt::format("export: {}", prim.name));
    }
    if (gpu) {
      if (!ir)
        throw_error(ErrorKind::not_supported, "not supported: export: {} runs on {} and has no compute rule",
                    prim.name, to_string(prim.device));
      if (cuda_targets.empty())
        throw_error(ErrorKind::invalid_argument, "export: {} runs on {} but ExportOptions::cuda_targets is empty",
                    prim.name, to_string(prim.device));
    }
    if (!ir) {
      std::optional<PrimitiveEntry> builtin = builtin_entry(prim);
      if (!builtin)
        throw_error(ErrorKind::not_supported,
                    "not supported: export: {} ({}) has no compute rule nimble can compile ahead of time, and the "
                    "runtime has no built-in kernel for it",
                    prim.name, prim.kind == PrimitiveKind::compute ? "a compute primitive" : "a shape function");
      contents.primitives.push_back(std::move(*builtin));
      ++report.builtins;
      continue;
    }
    const std::size_t index = contents.primitives.size();
    contents.primitives.push_back({.hash = prim.hash, .name = prim.name, .kind = prim.kind});
    std::vector<Bucket> buckets;
    if (options.seen_buckets && prim.kind == PrimitiveKind::compute)
      buckets = KernelCache::global().specialized_buckets(prim);
    for (const ExportBucket& b : options.buckets)
      if (b.primitive == prim.name && std::find(buckets.begin(), buckets.end(), b.bucket) == buckets.end())
        buckets.push_back(b.bucket);
    // A GPU kernel is named as the JIT names its entries (profilers show the
    // same names).
    const auto prefix = [&](std::size_t k) {
      if (gpu) return codegen::gpu_symbol_prefix(prim, k == 0 ? Bucket{} : buckets[k - 1]);
      return k == 0 ? fmt::format("nimble_aot_{:016x}_g", prim.hash)
                    : fmt::format("nimble_aot_{:016x}_b{}", prim.hash, k - 1);
    };
    jobs.push_back({index, *ir, {}, prefix(0), gpu});
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      codegen::KernelIR specialized = *ir;
      try {
        codegen::specialize(specialized, buckets[k]);
      } catch (Error& e) {
        throw e.with_context(fmt::format("export: bucket {} of {}", buckets[k].to_string(), prim.name));
      }
      jobs.push_back({index, std::move(specialized), buckets[k], prefix(k + 1), gpu});
    }
  }

  // Compile every job for every variant (in parallel: each in its own
  // LLVMContext and TargetMachine), then link each variant.
  const TempDir temp;
  const auto object_path = [&](std::size_t t, std::size_t j) { return temp.path() / fmt::format("{}_{}.o", t, j); };
  std::vector<std::vector<runtime::ErrorSite>> errors(jobs.size());
  tbb::parallel_for(std::size_t{0}, jobs.size() * targets.size(), [&](std::size_t n) {
    const std::size_t j = n / targets.size(), t = n % targets.size();
    auto context = std::make_unique<llvm::LLVMContext>();
    codegen::EmittedKernel emitted =
        jobs[j].gpu ? codegen::emit_gpu_prologue(jobs[j].ir, *context, jobs[j].prefix)
                    : codegen::emit_cpu_kernel(jobs[j].ir, *context, jobs[j].prefix,
                                               codegen::CpuEmitOptions::for_vector_bits(targets[t].vector_bits));
    if (t == 0) errors[j] = std::move(emitted.errors);
    const std::string object =
        codegen::compile_to_pic_object(std::move(context), std::move(emitted.module), targets[t].object);
    std::ofstream out(object_path(t, j), std::ios::binary);
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    if (!out.flush())
      throw_error(ErrorKind::runtime_error, "export: cannot write {}", object_path(t, j).string());
  });
  // The GPU kernels' PTX, per CUDA target.
  std::vector<std::size_t> gpu_jobs;
  for (std::size_t j = 0; j < jobs.size(); ++j)
    if (jobs[j].gpu) gpu_jobs.push_back(j);
  std::vector<std::vector<runtime::artifact::Ptx>> ptx(jobs.size());
  for (std::size_t j : gpu_jobs) ptx[j].resize(cuda_targets.size());
  tbb::parallel_for(std::size_t{0}, gpu_jobs.size() * cuda_targets.size(), [&](std::size_t n) {
    const std::size_t j = gpu_jobs[n / cuda_targets.size()], c = n % cuda_targets.size();
    const int sm = static_cast<int>(cuda_targets[c]);
    ptx[j][c] = {cuda_targets[c], codegen::emit_ptx(jobs[j].ir, jobs[j].prefix, {sm}).ptx};
  });
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    contents.primitives[jobs[j].primitive].kernels.push_back({jobs[j].bucket, jobs[j].prefix,
                                                              codegen::describe_native_kernel(jobs[j].ir, std::move(errors[j])),
                                                              std::move(ptx[j])});
    ++report.kernels;
    if (jobs[j].gpu) ++report.gpu_kernels;
    if (!jobs[j].bucket.dims.empty()) ++report.specialized;
  }
  const std::string linker = jobs.empty() ? std::string() : choose_linker(options.linker);
  for (std::size_t t = 0; t < targets.size(); ++t) {
    runtime::artifact::Variant& variant = contents.variants.emplace_back(
        runtime::artifact::Variant{targets[t].name, targets[t].object.cpu, targets[t].required, {}});
    if (jobs.empty()) continue;  // only built-in kernels: no code
    const fs::path so = temp.path() / fmt::format("{}.so", t);
    std::vector<std::string> argv{linker, "-shared", "-o", so.string()};
    for (std::size_t j = 0; j < jobs.size(); ++j) argv.push_back(object_path(t, j).string());
    run_tool(argv, temp.path() / "link.log");
    variant.shared_object = read_binary(so);
  }

  const std::vector<std::byte> bytes = executable.save();
  contents.executable.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const std::string file = runtime::artifact::write(contents);
  // Written beside the destination and renamed over it: a reader never sees
  // half an artifact.
  const std::string partial = fmt::format("{}.{}.partial", path, ::getpid());
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
    if (!out.flush()) {
      std::error_code ignored;
      fs::remove(partial, ignored);
      throw_error(ErrorKind::invalid_argument, "export: cannot write {}", path);
    }
  }
  std::error_code error;
  fs::rename(partial, path, error);
  if (error) {
    fs::remove(partial, error);
    throw_error(ErrorKind::invalid_argument, "export: cannot write {}: {}", path, error.message());
  }
  report.primitives = contents.primitives.size();
  report.variants = targets.size();
  report.bytes = file.size();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace nimble
