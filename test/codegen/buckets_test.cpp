// Shape buckets, tiered compilation and the disk cache: the policy's facts at
// bucket boundaries, specialized kernels against the generic one and the
// reference on every dim pattern, the tiered kernel's once-per-bucket
// compilation (background and synchronous) and its limit, four threads over
// one Executable, and the disk cache's hits, misses and rejections, in this
// process and in a second one.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "codegen/cpu/cpu_kernel.hpp"
#include "codegen/kernel_ir.hpp"
#include "codegen/kernel_store.hpp"
#include "nimble/builder.hpp"
#include "nimble/compile.hpp"
#include "nimble/interpreter.hpp"
#include "nimble/runtime/stats.hpp"
#include "nimble/support/log.hpp"
#include "nimble/vm/virtual_machine.hpp"
#include "ops/ops.hpp"
#include "runtime/background_compiler.hpp"
#include "support/cache_scope.hpp"
#include "support/op_calls.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using namespace nimble::testing;

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// The log lines nimble sends while it lives (nimble/support/log.hpp).
class LogCapture {
 public:
  LogCapture() {
    set_log_sink([this](LogLevel, std::string_view message) {
      const std::lock_guard lock(mutex_);
      lines_.emplace_back(message);
    });
  }
  ~LogCapture() { set_log_sink({}); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::vector<std::string> lines() {
    const std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

KernelCacheOptions options(bool background, std::uint32_t limit = 8, std::string disk = {}) {
  KernelCacheOptions o;
  o.background = background;
  o.buckets.max_specialized_per_function = limit;
  o.disk_cache_dir = std::move(disk);
  return o;
}

// f(x: f32[?, 3]) = sigmoid(x * x + 1): one fused kernel over one dynamic dim.
ir::Module sigmoid_module() {
  Builder b;
  b.entry(b.def("f", {{"x", ir::tensor_type({ir::Any, 3}, DType::f32)}},
                [&](Expr x) { return sigmoid(x * x + 1.0); }));
  return b.build();
}

Tensor rows(std::int64_t n, std::uint64_t seed = 1) {
  Rng rng(seed);
  return random_tensor(rng, {n, 3}, DType::f32, {.specials = false});
}

void check_matches(vm::VirtualMachine& machine, const ir::Module& m, const Tensor& x) {
  const Value expected = evaluate(m, "f", {x});
  CHECK_THAT(machine.invoke("f", {x}).tensor(), IsCloseTo(expected.tensor(), {.rtol = 1e-6, .atol = 1e-7}));
}

// A fresh VM of `m` on inputs in two buckets ([=4], [%2 64..127]), checked.
void run_two_buckets(const ir::Module& m, std::uint64_t seed = 1) {
  vm::VirtualMachine machine(compile(m));
  check_matches(machine, m, rows(4, seed));
  check_matches(machine, m, rows(70, seed));
}

// (primitive, bucket) of every compilation so far.
std::multiset<std::pair<std::string, std::string>> compilations() {
  std::multiset<std::pair<std::string, std::string>> all;
  for (const KernelCompileRecord& r : kernel_compile_log()) all.insert({r.name, r.bucket});
  return all;
}

// Runs `f`, which must throw a nimble::Error of `kind` whose message contains `text`.
template <class F>
void check_error(F&& f, ErrorKind kind, std::string_view text) {
  try {
    f();
    FAIL_CHECK("expected nimble::Error(" << to_string(kind) << ") containing: " << text);
  } catch (const Error& e) {
    CHECK(to_string(e.kind()) == to_string(kind));
    INFO("message: " << e.message());
    CHECK(e.message().find(text) != std::string::npos);
  }
}


}  // namespace

TEST_CASE("buckets: the policy keeps exact small dims, multiples and power-of-two ranges", "[jit]") {
  const BucketPolicy policy;  // exact up to 16, multiples up to 16, ranges
  CHECK(policy.bucket_of(0) == DimBucket{.exact = 0, .min = 0, .max = 0});
  CHECK(policy.bucket_of(1) == DimBucket{.exact = 1, .min = 1, .max = 1});
  CHECK(policy.bucket_of(16) == DimBucket{.exact = 16, .min = 16, .max = 16});
  CHECK(policy.bucket_of(17) == DimBucket{.multiple = 1, .min = 17, .max = 31});
  CHECK(policy.bucket_of(24) == DimBucket{.multiple = 8, .min = 17, .max = 31});
  CHECK(policy.bucket_of(32) == DimBucket{.multiple = 16, .min = 32, .max = 63});
  CHECK(policy.bucket_of(48) == policy.bucket_of(32));
  CHECK(policy.bucket_of(63) == DimBucket{.multiple = 1, .min = 32, .max = 63});
  CHECK(policy.bucket_of(64) == DimBucket{.multiple = 16, .min = 64, .max = 127});
  CHECK(policy.bucket_of(37) != policy.bucket_of(38));  // multiples 1 and 2
  CHECK(policy.bucket_of(std::int64_t{1} << 40).max == (std::int64_t{1} << 41) - 1);
  CHECK(policy.bucket_of(kMax).max == kMax);
  CHECK(policy.bucket_of(std::vector<std::int64_t>{5, 128}).to_string() == "[=5, %16 128..255]");

  // Every value lies in its own bucket, and the facts hold for all of a bucket.
  for (const BucketPolicy& p : {BucketPolicy{}, BucketPolicy{.exact_up_to = -1},
                                BucketPolicy{.exact_up_to = 4, .max_multiple = 1},
                                BucketPolicy{.max_multiple = 64, .power_of_two_ranges = false}}) {
    for (std::int64_t v = 0; v < 600; ++v) {
      const DimBucket b = p.bucket_of(v);
      INFO("value " << v << " in " << Bucket{{b}}.to_string());
      CHECK(b.contains(v));
      CHECK((v == 0 || b.exact == -1 || v <= p.exact_up_to));
      CHECK(b.multiple <= p.max_multiple);
      for (std::int64_t w = std::max<std::int64_t>(0, v - 70); w < v + 70; ++w)
        if (p.bucket_of(w) == b) CHECK(b.contains(w));
    }
  }
  CHECK(BucketPolicy{.exact_up_to = -1}.bucket_of(5) == DimBucket{.multiple = 1, .min = 4, .max = 7});
  CHECK(BucketPolicy{.power_of_two_ranges = false}.bucket_of(1000) ==
        DimBucket{.multiple = 8, .min = 17, .max = kMax});

  check_error([] { BucketPolicy{.max_multiple = 12}.validate(); }, ErrorKind::invalid_argument,
              "max_multiple must be a power of two, got 12");
  check_error([] { KernelCache::global().configure({.buckets = {.exact_up_to = -2}}); },
              ErrorKind::invalid_argument, "exact_up_to must be >= -1");
}

TEST_CASE("buckets: a specialized kernel matches the generic one on its bucket and refuses other shapes",
          "[jit]") {
  te::SymbolTable symbols;
  const std::vector<te::Tensor> in = symbolic_matmul_inputs(symbols);
  const std::vector<te::Tensor> out = ops::matmul().compute(in, {});
  const Ref<Kernel> generic = codegen::compile_cpu_kernel("matmul", in, out);
  REQUIRE(generic->dynamic_dims().size() == 3);  // m, k, n: a.dim0, a.dim1, b.dim1

  const BucketPolicy policy;
  Rng rng(11);
  // Each dim pattern: exact, exact zero, a multiple of 16, of 8, odd, at the
  // boundaries of the exact range and of power-of-two ranges.
  const std::vector<std::array<std::int64_t, 3>> shapes{
      {1, 1, 1}, {0, 3, 5}, {16, 17, 32}, {17, 31, 33}, {31, 32, 63}, {64, 48, 40}, {127, 1, 128}, {100, 5, 257}};
  for (const auto& [m, k, n] : shapes) {
    const Bucket bucket = policy.bucket_of(std::vector<std::int64_t>{m, k, n});
    INFO(fmt::format("{}x{}x{} in bucket {}", m, k, n, bucket.to_string()));
    const Ref<Kernel> special = codegen::compile_cpu_kernel("matmul", in, out, bucket);
    const Tensor a = random_tensor(rng, {m, k}, DType::f32, {.specials = false});
    const Tensor b = random_tensor(rng, {k, n}, DType::f32, {.specials = false});
    const Tensor want = ops::matmul().reference(std::vector<Value>{a, b}, {}).tensor();
    const Tensor got = Tensor::empty({m, n}, DType::f32);
    const Tensor base = Tensor::empty({m, n}, DType::f32);
    special->run(std::vector<Tensor>{a, b}, std::vector<Tensor>{got});
    generic->run(std::vector<Tensor>{a, b}, std::vector<Tensor>{base});
    CHECK_THAT(got, IsCloseTo(want, {.rtol = 1e-5, .atol = 1e-5}));
    CHECK_THAT(got, IsCloseTo(base, {.rtol = 1e-6, .atol = 1e-6}));
  }

  // A shape outside the bucket is an Error, never a wrong result.
  const Bucket five = policy.bucket_of(std::vector<std::int64_t>{5, 4, 32});
  const Ref<Kernel> special = codegen::compile_cpu_kernel("matmul", in, out, five);
  const Tensor a = Tensor::zeros({6, 4}, DType::f32);
  const Tensor b = Tensor::zeros({4, 32}, DType::f32);
  check_error([&] { special->run(std::vector<Tensor>{a, b}, std::vector<Tensor>{Tensor::empty({6, 32}, DType::f32)}); },
              ErrorKind::runtime_error, "specialized for a dim 0 in [=5] was called with another shape");
  const Tensor b40 = Tensor::zeros({4, 40}, DType::f32);  // not a multiple of 16
  const Tensor a5 = Tensor::zeros({5, 4}, DType::f32);
  check_error([&] { special->run(std::vector<Tensor>{a5, b40}, std::vector<Tensor>{Tensor::empty({5, 40}, DType::f32)}); },
              ErrorKind::runtime_error, "b dim 1 in [%16 32..63]");
  check_error([&] { (void)codegen::compile_cpu_kernel("matmul", in, out, policy.bucket_of(std::vector<std::int64_t>{5})); },
              ErrorKind::invalid_argument, "a bucket of 1 dims for a kernel of 3");
  CHECK(codegen::cpu_kernel_ir("matmul", in, out).find("in bucket") == std::string::npos);
}

TEST_CASE("buckets: each new bucket is specialized once, before the call or in the background", "[jit]") {
  const ir::Module m = sigmoid_module();
  SECTION("synchronous, up to the limit, then the generic kernel serves") {
    ScopedCacheOptions scope(options(false, 2));
    LogCapture log;
    vm::VirtualMachine machine(compile(m));
    check_matches(machine, m, rows(2));
    const std::uint64_t first_launches = engine_stats().kernel_launches;
    EngineStats s = engine_stats();
    CHECK(s.call_site_hits == 0);
    CHECK(s.kernels_compiled == 2);  // the generic kernel, then [=2]
    CHECK(s.specialized_compiled == 1);
    check_matches(machine, m, rows(2, 7));  // the same bucket
    check_matches(machine, m, rows(3));
    check_matches(machine, m, rows(40));  // the limit of 2 was reached: generic
    check_matches(machine, m, rows(41));
    s = engine_stats();
    CHECK(s.specialized_compiled == 2);
    CHECK(s.buckets_over_limit == 2);
    // One line, the first time past the limit, naming the policy to raise.
    const std::vector<std::string> logged = log.lines();
    REQUIRE(logged.size() == 1);
    CHECK_THAT(logged[0], Catch::Contains("called in more than 2 shape buckets") &&
                              Catch::Contains("max_specialized_per_function"));
    std::multiset<std::pair<std::string, std::string>> want;
    for (const auto& [name, bucket] : compilations()) want.insert({name, bucket});
    CHECK(want.size() == 3);
    CHECK(want.count({kernel_compile_log()[0].name, "[=2]"}) == 1);
    CHECK(want.count({kernel_compile_log()[0].name, "[=3]"}) == 1);
    // Every call after the first had its kernels at hand.
    CHECK(s.call_site_hits == s.kernel_launches - first_launches);
  }
  SECTION("in the background: the generic kernel serves until the specialized one is ready") {
    ScopedCacheOptions scope(options(true));
    vm::VirtualMachine machine(compile(m));
    check_matches(machine, m, rows(100));  // compiles the generic kernel, queues [%4 64..127]
    KernelCache::global().wait_for_background();
    EngineStats s = engine_stats();
    CHECK(s.kernels_compiled == 2);
    CHECK(s.specialized_compiled == 1);
    CHECK(s.specializations_pending == 0);
    CHECK(KernelCache::global().stats().pending == 0);
    CHECK(kernel_compile_log().back().bucket == "[%4 64..127]");
    check_matches(machine, m, rows(68));  // the same bucket, now specialized
    check_matches(machine, m, rows(5));   // a new one: generic now, [=5] later
    KernelCache::global().wait_for_background();
    CHECK(engine_stats().specialized_compiled == 2);
    check_matches(machine, m, rows(5, 3));
  }
  SECTION("no specialization when the limit is zero") {
    ScopedCacheOptions scope(options(false, 0));
    vm::VirtualMachine machine(compile(m));
    check_matches(machine, m, rows(9));
    check_matches(machine, m, rows(10));
    CHECK(engine_stats().kernels_compiled == 1);
    CHECK(engine_stats().buckets_over_limit == 0);
  }
}

TEST_CASE("buckets: four threads over one Executable compile each key once", "[jit][concurrency]") {
  for (const bool background : {true, false}) {
    INFO((background ? "background" : "synchronous"));
    ScopedCacheOptions scope(options(background, 6));
    const ir::Module m = sigmoid_module();
    const vm::Executable exe = compile(m);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        vm::VirtualMachine machine(exe);
        Rng rng(static_cast<std::uint64_t>(100 + t));
        for (int i = 0; i < 40; ++i) {
          const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 80);
          const Tensor x = random_tensor(rng, {n, 3}, DType::f32, {.specials = false});
          const Tensor got = machine.invoke("f", {x}).tensor();
          const Tensor want = evaluate(m, "f", {x}).tensor();
          if (!allclose(got, want, {.rtol = 1e-6, .atol = 1e-7})) failures.fetch_add(1);
        }
      });
    for (std::thread& t : threads) t.join();
    KernelCache::global().wait_for_background();
    CHECK(failures.load() == 0);
    const auto all = compilations();
    for (const auto& key : all) {
      INFO(key.first << " " << key.second);
      CHECK(all.count(key) == 1);
    }
    CHECK(engine_stats().specialized_compiled <= 6);
    CHECK(engine_stats().specialized_compiled >= 1);
  }
}

TEST_CASE("buckets: the disk cache serves a fresh cache, and rejects corrupt, truncated and foreign entries",
          "[jit]") {
  const TempDir dir;
  const ir::Module m = sigmoid_module();
  ScopedCacheOptions scope(options(false, 8, dir.str()));
  run_two_buckets(m);
  EngineStats s = engine_stats();
  CHECK(s.kernels_compiled == 3);  // generic, [=4], [%2 64..127]
  CHECK(s.disk_misses == 3);
  CHECK(s.disk_hits == 0);
  const std::vector<std::filesystem::path> files = dir.files();
  REQUIRE(files.size() == 3);
  for (const auto& f : files) CHECK(f.extension() == ".nkc");

  // As a new process would: nothing in memory, everything on disk.
  const auto run_afresh = [&](std::uint64_t seed) {
    KernelCache::global().clear();
    reset_engine_stats();
    run_two_buckets(m, seed);
    return engine_stats();
  };
  s = run_afresh(2);
  CHECK(s.kernels_compiled == 0);
  CHECK(s.disk_hits == 3);
  CHECK(s.disk_load_ms > 0);

  // Damage each entry a different way: every one is rejected and rebuilt.
  const auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const auto write = [](const std::filesystem::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  };
  const std::string first = read(files[0]);
  std::string flipped = first;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x40);
  write(files[0], flipped);                         // a bit flipped
  write(files[1], read(files[1]).substr(0, 100));  // truncated
  write(files[2], first);                           // another key's entry: whole, but foreign
  s = run_afresh(3);
  CHECK(s.disk_rejected == 3);
  CHECK(s.kernels_compiled == 3);
  CHECK(s.disk_hits == 0);
  // Rebuilt entries load again.
  s = run_afresh(4);
  CHECK(s.disk_hits == 3);
  CHECK(s.kernels_compiled == 0);
  CHECK(dir.files().size() == 3);  // no temporary file left behind

  // A directory others can write is not used: its objects would run here.
  std::filesystem::permissions(dir.str(), std::filesystem::perms::others_write, std::filesystem::perm_options::add);
  s = run_afresh(5);
  CHECK(s.disk_hits == 0);
  CHECK(s.kernels_compiled == 3);
  // Objects are keyed by this build of the library (its GNU build ID).
  CHECK(codegen::library_build_id().size() >= 16);
}

// The second process of the next test: run by it (this binary, this test
// only, with NIMBLE_TEST_WARM_CACHE set to the cache it filled); elsewhere a
// no-op.
TEST_CASE("buckets: (child process) a warm start compiles nothing", "[.][jit]") {
  const char* dir = std::getenv("NIMBLE_TEST_WARM_CACHE");
  if (dir == nullptr) return;
  const ir::Module m = sigmoid_module();
  ScopedCacheOptions scope(options(false, 8, dir));
  run_two_buckets(m, 5);
  CHECK(engine_stats().kernels_compiled == 0);
  CHECK(engine_stats().disk_hits == 3);
  CHECK(engine_stats().disk_rejected == 0);
}

TEST_CASE("buckets: a second process loads every kernel from the disk cache", "[jit]") {
  const TempDir dir;
  const ir::Module m = sigmoid_module();
  {
    ScopedCacheOptions scope(options(false, 8, dir.str()));
    run_two_buckets(m);
    CHECK(engine_stats().kernels_compiled == 3);
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command =
      fmt::format("NIMBLE_TEST_WARM_CACHE='{}' '{}' '*a warm start compiles nothing' > '{}/child.log' 2>&1",
                  dir.str(), self, dir.str());
  const int status = std::system(command.c_str());
  std::ifstream log(dir.str() + "/child.log");
  INFO("child:\n" << std::string((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>()));
  CHECK(status == 0);
}

// What a compilation uses of LLVM's function-local statics: made after the
// first background task was queued, so that exit destroys it before any
// atexit handler registered earlier runs.
namespace {
std::atomic<bool> late_static_destroyed{false};
struct LateStatic {
  LateStatic() = default;
  LateStatic(const LateStatic&) = delete;
  LateStatic& operator=(const LateStatic&) = delete;
  ~LateStatic() { late_static_destroyed = true; }
};
const LateStatic& late_static() {
  static const LateStatic s;
  return s;
}
}  // namespace

// The child of the next test: exits while a background task still runs
// (then, if the task outlived the static it uses, it exits with 3).
TEST_CASE("background compiler: (child process) exit while a task runs", "[.][jit]") {
  if (std::getenv("NIMBLE_TEST_EXIT_CHILD") == nullptr) return;
  BackgroundCompiler::process().submit([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (late_static_destroyed) ::_exit(3);
    ::_exit(0);  // the task ran to its end first: the wait worked
  });
  (void)late_static();
  std::exit(4);  // the task's _exit(0) ends the process before this exit does
}

TEST_CASE("background compiler: a process exits only after its background tasks, before statics go", "[jit]") {
  const TempDir dir;
  std::filesystem::create_directories(dir.str());
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command = fmt::format(
      "NIMBLE_TEST_EXIT_CHILD=1 '{}' '*exit while a task runs' > '{}/child.log' 2>&1", self, dir.str());
  const int status = std::system(command.c_str());
  std::ifstream log(dir.str() + "/child.log");
  INFO("child:\n" << std::string((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>()));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
