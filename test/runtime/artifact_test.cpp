// Ahead-of-time export and the runtime's loader: an exported model computes
// exactly what the JIT-run one does (the same kernels), through the "aot"
// provider alone; corrupt, truncated, foreign and mismatched artifacts are
// refused with a clear Error; one artifact serves VMs on several threads.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "models/lstm.hpp"
#include "models/tree_lstm.hpp"
#include "models/workloads.hpp"
#include "nimble/compile.hpp"
#include "nimble/export.hpp"
#include "nimble/ir/module.hpp"
#include "nimble/target.hpp"
#include "nimble/version.hpp"
#include "nimble/vm/artifact.hpp"
#include "nimble/vm/virtual_machine.hpp"
#include "vm/artifact_format.hpp"
#include "runtime/cpu_features.hpp"
#include "support/random_program.hpp"
#include "support/same_value.hpp"
#include "vm/executable_data.hpp"

using namespace nimble;
using Catch::Matchers::Contains;

namespace {

namespace fs = std::filesystem;

// A fresh directory for one test's artifacts, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "nimble-aot-test-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Synchronous specialization, so that the buckets a run meets are compiled
// when an export asks for them; restored afterwards.
class SynchronousBuckets {
 public:
  SynchronousBuckets() : saved_(KernelCache::global().options()) {
    KernelCacheOptions options = saved_;
    options.background = false;
    KernelCache::global().configure(options);
  }
  ~SynchronousBuckets() { KernelCache::global().configure(saved_); }

 private:
  KernelCacheOptions saved_;
};

// f(x: f32[?], y: f32[?]) = concatenate((sigmoid(x), y)) * 2: an output
// dim no argument's type carries (a data-independent shape function) and a
// tuple input.
ir::Module concat_module() {
  Builder b;
  b.entry(b.def("f", {{"x", f32({Any})}, {"y", f32({Any})}}, [](Expr x, Expr y) -> Expr {
    return concatenate({sigmoid(x), y}, 0) * scalar(2.0, DType::f32);
  }));
  return b.build();
}

Tensor ramp(std::int64_t n, float scale) {
  Tensor t = Tensor::empty({n}, DType::f32);
  float v = -1.0f;
  for (float& e : t.values<float>()) e = (v += scale);
  return t;
}

Value tree_value(const vm::Executable& exe, const workloads::TreeShape& t) {
  if (t.leaf >= 0) return Value::adt(exe.constructor_tag("Tree", "Leaf"), {Value(Tensor::scalar(t.leaf))});
  return Value::adt(exe.constructor_tag("Tree", "Node"), {tree_value(exe, *t.left), tree_value(exe, *t.right)});
}

std::vector<Value> lstm_args(std::int64_t length) {
  static const std::vector<Tensor> w = workloads::w1_weights();
  std::vector<Value> args{workloads::w1_input(length)};
  args.insert(args.end(), w.begin(), w.end());
  return args;
}

std::vector<Value> tree_args(const vm::Executable& exe, std::int64_t leaves) {
  static const std::vector<Tensor> w = workloads::w2_weights();
  std::vector<Value> args{tree_value(exe, *workloads::w2_tree(leaves)), workloads::w2_leaves(leaves)};
  args.insert(args.end(), w.begin(), w.end());
  return args;
}

// load_artifact, and the kernel cache emptied: the calls after it take the
// kernels of this artifact, not those cached from an earlier one with the
// same primitives.
vm::Executable load(const std::string& path, ArtifactInfo* info = nullptr) {
  vm::Executable exe = load_artifact(path, info);
  KernelCache::global().clear();
  return exe;
}

// A VM that takes every kernel from the loaded artifacts.
vm::VirtualMachine aot_machine(const vm::Executable& exe) {
  vm::VirtualMachine machine(exe);
  machine.set_kernel_provider("aot");
  return machine;
}

// An exported concat_module, for the error cases.
std::string exported_concat(const ScratchDir& dir, const ExportOptions& options = {}) {
  const std::string path = dir.file("concat.nimble");
  (void)export_executable(compile(concat_module()), path, options);
  return path;
}

}  // namespace

TEST_CASE("The runtime names this CPU's features as LLVM does", "[aot]") {
  std::vector<std::string> llvm = host_target().features;  // enabled ones, sorted
  std::vector<std::string> ours = runtime::host_cpu_features();
  // LLVM 19 reads cpuid leaf 0x24 without setting ECX (the subleaf), so on a
  // CPU with AVX10.1/512 it sees the feature only when ECX happens to be 0
  // (a KVM guest answers other subleaves with zeros); the runtime reads
  // subleaf 0, where the bit is. More than LLVM saw is harmless here: a
  // variant needs only what its compiler enabled.
  if (std::find(llvm.begin(), llvm.end(), "avx10.1-512") == llvm.end())
    std::erase(ours, "avx10.1-512");
  CHECK(ours == llvm);
  CHECK(runtime::host_has_cpu_feature("sse2"));
  CHECK_FALSE(runtime::host_has_cpu_feature("no-such-feature"));
}

TEST_CASE("An exported model computes exactly what the JIT-run one does", "[aot]") {
  const SynchronousBuckets sync;
  const ScratchDir dir;

  SECTION("a shape function, a tuple input and exported buckets") {
    const vm::Executable exe = compile(concat_module());
    vm::VirtualMachine jit(exe);
    std::vector<Value> expected;
    const std::vector<std::pair<std::int64_t, std::int64_t>> sizes{{3, 5}, {16, 1}, {40, 33}, {0, 2}, {1000, 7}};
    for (const auto& [n, m] : sizes) expected.push_back(jit.invoke("f", {ramp(n, 0.01f), ramp(m, 0.5f)}));
    const ExportReport report = export_executable(exe, dir.file("f.nimble"));
    CHECK(report.variants == 1);
    CHECK(report.builtins == 0);

    ArtifactInfo info;
    const vm::Executable loaded = load(dir.file("f.nimble"), &info);
    CHECK(info.cpu_target == "host");
    CHECK(info.kernels == report.kernels);
    CHECK(info.file_bytes == report.bytes);
    vm::VirtualMachine aot = aot_machine(loaded);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const Value got = aot.invoke("f", {ramp(sizes[i].first, 0.01f), ramp(sizes[i].second, 0.5f)});
      CHECK(testing::same_value(got, expected[i]));
    }
  }

  SECTION("W1 (the LSTM: stack is a built-in) and W2 (the Tree-LSTM)") {
    Builder b1;
    models::build_lstm(b1);
    const vm::Executable lstm = compile(b1.build());
    Builder b2;
    models::build_tree_lstm(b2);
    const vm::Executable tree = compile(b2.build());
    vm::VirtualMachine lstm_jit(lstm), tree_jit(tree);
    const Value lstm3 = lstm_jit.invoke("lstm", lstm_args(3));
    const Value tree8 = tree_jit.invoke("tree_lstm", tree_args(tree, 8));
    const ExportReport r1 = export_executable(lstm, dir.file("w1.nimble"));
    CHECK(r1.builtins == 2);  // stack and its shape function
    (void)export_executable(tree, dir.file("w2.nimble"));

    const vm::Executable lstm_loaded = load(dir.file("w1.nimble"));
    const vm::Executable tree_loaded = load(dir.file("w2.nimble"));
    vm::VirtualMachine lstm_aot = aot_machine(lstm_loaded), tree_aot = aot_machine(tree_loaded);
    CHECK(testing::same_value(lstm_aot.invoke("lstm", lstm_args(3)), lstm3));
    CHECK(testing::same_value(tree_aot.invoke("tree_lstm", tree_args(tree_loaded, 8)), tree8));
    // Sizes the export never saw run the generic kernels.
    CHECK(testing::same_value(lstm_aot.invoke("lstm", lstm_args(5)), lstm_jit.invoke("lstm", lstm_args(5))));
    CHECK(testing::same_value(tree_aot.invoke("tree_lstm", tree_args(tree_loaded, 5)),
                              tree_jit.invoke("tree_lstm", tree_args(tree, 5))));
  }

  SECTION("text programs: reshape, split, concatenate, stack along another axis") {
    const ir::Module m = ir::parse(R"(
      type List<T> { Nil, Cons(T, List<T>) }
      entry def @shapes(%x: f32[?, 4]) -> (f32[?, 2, 2], f32[?, 4]) {
        let %r = reshape(%x, newshape=[-1, 2, 2]);
        let %parts = split(%x, sections=2, axis=1);
        let %c = concatenate((%parts.1, %parts.0), axis=1);
        (%r, %c)
      }
      entry def @stacked(%xs: List<f32[3]>) -> f32[3, ?] {
        stack(%xs, axis=1)
      }
    )");
    const vm::Executable exe = compile(m);
    (void)export_executable(exe, dir.file("text.nimble"));
    const vm::Executable loaded = load(dir.file("text.nimble"));
    vm::VirtualMachine jit(exe);
    vm::VirtualMachine aot = aot_machine(loaded);
    for (std::int64_t rows : {0, 1, 3, 20}) {
      const std::vector<Value> args{ramp(rows * 4, 0.5f).reshape({rows, 4})};
      CHECK(testing::same_value(aot.invoke("shapes", args), jit.invoke("shapes", args)));
    }
    Value xs = Value::adt(loaded.constructor_tag("List", "Nil"), {});
    for (int k = 0; k < 5; ++k)
      xs = Value::adt(loaded.constructor_tag("List", "Cons"), {Value(ramp(3, 0.1f * static_cast<float>(k + 1))), xs});
    const Value stacked = aot.invoke("stacked", {xs});
    CHECK(stacked.tensor().shape() == Shape{3, 5});
    CHECK(testing::same_value(stacked, jit.invoke("stacked", {xs})));
    // The built-in stack reports a bad list as the reference does.
    CHECK_THROWS_WITH(aot.invoke("stacked", {Value::adt(loaded.constructor_tag("List", "Nil"), {})}),
                      Contains("cannot stack an empty list"));
  }

  SECTION("a portable variant computes the same within rounding") {
    const vm::Executable exe = compile(concat_module());
    ExportOptions options;
    options.cpu_targets = {"x86-64"};
    (void)export_executable(exe, dir.file("portable.nimble"), options);
    ArtifactInfo info;
    vm::VirtualMachine aot = aot_machine(load(dir.file("portable.nimble"), &info));
    CHECK(info.cpu_target == "x86-64");
    vm::VirtualMachine jit(exe);
    for (std::int64_t n : {1, 17, 300}) {
      const std::vector<Value> args{ramp(n, 0.01f), ramp(n + 2, 0.25f)};
      CHECK(testing::close_value(aot.invoke("f", args), jit.invoke("f", args), {.rtol = 1e-6, .atol = 1e-7}));
    }
  }
}

TEST_CASE("Declared buckets are exported, and bad export options are refused", "[aot]") {
  const ScratchDir dir;
  const vm::Executable exe = compile(concat_module());
  ExportOptions options;
  options.seen_buckets = false;
  SECTION("a declared bucket, and a call outside every exported bucket") {
    std::string prim;
    for (const PrimitiveInfo& p : exe.data().primitives)
      if (p.kind == PrimitiveKind::compute && p.name.find("concatenate") != std::string::npos) prim = p.name;
    REQUIRE_FALSE(prim.empty());
    options.buckets = {{prim, Bucket{{DimBucket{.exact = 3}, DimBucket{.exact = 5}}}}};
    const ExportReport report = export_executable(exe, dir.file("declared.nimble"), options);
    CHECK(report.specialized == 1);
    ArtifactInfo info;
    vm::VirtualMachine aot = aot_machine(load(dir.file("declared.nimble"), &info));
    CHECK(info.specialized == 1);
    const SynchronousBuckets sync;
    const std::uint64_t failed = engine_stats().specializations_failed;
    vm::VirtualMachine jit(exe);
    for (const auto& [n, m] : {std::pair{3, 5}, std::pair{4, 6}, std::pair{300, 1}}) {
      const std::vector<Value> args{ramp(n, 0.1f), ramp(m, 0.1f)};
      CHECK(testing::same_value(aot.invoke("f", args), jit.invoke("f", args)));
    }
    CHECK(engine_stats().specializations_failed == failed);  // no kernel for a bucket is not a failure
  }
  SECTION("a bucket that does not fit the primitive") {
    options.buckets = {{exe.data().primitives[0].name, Bucket{{DimBucket{}, DimBucket{}, DimBucket{}, DimBucket{}}}}};
    CHECK_THROWS_WITH(export_executable(exe, dir.file("x.nimble"), options), Contains("bucket"));
  }
  SECTION("unknown CPU target") {
    options.cpu_targets = {"pentium"};
    CHECK_THROWS_WITH(export_executable(exe, dir.file("x.nimble"), options), Contains("unknown CPU target \"pentium\""));
  }
  SECTION("a bucket of a primitive the executable does not call") {
    options.buckets = {{"no_such_primitive", Bucket{{DimBucket{.exact = 4}}}}};
    CHECK_THROWS_WITH(export_executable(exe, dir.file("x.nimble"), options), Contains("no_such_primitive"));
  }
  SECTION("an opaque op the runtime has no kernel for") {
    const ir::Module m = ir::parse("entry def @g(%x: f32[?, 4]) -> i64[?, 2] { nonzero(%x) }");
    try {
      (void)export_executable(compile(m), dir.file("x.nimble"));
      FAIL("exported");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::not_supported);
      CHECK_THAT(e.message(), Contains("no compute rule") && Contains("nonzero"));
    }
  }
  CHECK_FALSE(fs::exists(dir.file("x.nimble")));
}

TEST_CASE("Corrupt, truncated and mismatched artifacts are refused", "[aot]") {
  const ScratchDir dir;
  const std::string good = read_bytes(exported_concat(dir));
  const std::string bad = dir.file("bad.nimble");
  const auto refused = [&](const std::string& bytes, ErrorKind kind, const std::string& says) {
    write_bytes(bad, bytes);
    try {
      (void)load_artifact(bad);
      FAIL("loaded");
    } catch (const Error& e) {
      CHECK(e.kind() == kind);
      CHECK_THAT(e.message(), Contains(says));
    }
  };
  SECTION("a good one records who wrote it") {
    const runtime::artifact::Contents contents = runtime::artifact::read(good, "good");
    CHECK(contents.nimble_version == kVersion);
    CHECK_THAT(contents.llvm_version, Catch::Matches("[0-9]+\\.[0-9]+.*"));
  }
  SECTION("a missing file") {
    CHECK_THROWS_WITH(load(dir.file("none.nimble")), Contains("cannot read artifact"));
  }
  SECTION("not an artifact") { refused("hello", ErrorKind::parse_error, "not a nimble artifact"); }
  SECTION("truncated, anywhere") {
    for (std::size_t size : {std::size_t{40}, good.size() / 2, good.size() - 1})
      refused(good.substr(0, size), ErrorKind::parse_error, "truncated");
  }
  SECTION("a flipped bit, anywhere in the body") {
    for (std::size_t at : {std::size_t{40}, good.size() / 3, good.size() / 2, good.size() - 1}) {
      std::string flipped = good;
      flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
      refused(flipped, ErrorKind::parse_error, "checksum");
    }
  }
  SECTION("another format") {
    std::string other = good;
    other[8] = static_cast<char>(runtime::artifact::kFormat + 1);
    refused(other, ErrorKind::parse_error, fmt::format("format {}", runtime::artifact::kFormat + 1));
  }
  SECTION("header flags this runtime does not know (outside the checksum)") {
    std::string flagged = good;
    flagged[15] = static_cast<char>(0xc4);
    refused(flagged, ErrorKind::parse_error, "header flags 0xc4000000");
  }

  runtime::artifact::Contents contents = runtime::artifact::read(good, "good");
  SECTION("another nimble version") {
    contents.nimble_version = "0.0.1";
    refused(runtime::artifact::write(contents), ErrorKind::not_supported, "exported by nimble 0.0.1");
  }
  SECTION("a CPU without the features of any variant") {
    contents.variants[0].required_features.push_back("nimble-test-feature");
    refused(runtime::artifact::write(contents), ErrorKind::not_supported, "nimble-test-feature");
  }
  SECTION("a shared object without a kernel's symbols") {
    contents.primitives[0].kernels.at(0).symbol_prefix = "nimble_aot_missing";
    refused(runtime::artifact::write(contents), ErrorKind::parse_error, "lacks the kernel symbol nimble_aot_missing");
  }
  SECTION("a shared object that does not load") {
    contents.variants[0].shared_object = "\x7f" "ELF but not really";
    refused(runtime::artifact::write(contents), ErrorKind::runtime_error, "does not load");
  }
  SECTION("a primitive without its kernel") {
    contents.primitives.pop_back();
    refused(runtime::artifact::write(contents), ErrorKind::parse_error, "no kernel for primitive");
  }
  SECTION("PTX for a primitive the executable runs on the CPU") {
    contents.primitives[0].kernels.at(0).ptx = {{80, ".version 7.0"}};
    refused(runtime::artifact::write(contents), ErrorKind::parse_error, "runs on cpu but a kernel of it is a GPU's");
  }
  SECTION("PTX out of order") {
    contents.primitives[0].kernels.at(0).ptx = {{90, ".version 7.8"}, {80, ".version 7.0"}};
    refused(runtime::artifact::write(contents), ErrorKind::parse_error, "out of order");
  }
  SECTION("a kernel table that does not fit its kernel") {
    contents.primitives[0].kernels.at(0).desc.bindings.push_back({"n", 99, 0});
    refused(runtime::artifact::write(contents), ErrorKind::parse_error, "malformed");
  }
}

TEST_CASE("The first variant this CPU can run is chosen", "[aot]") {
  const ScratchDir dir;
  ExportOptions options;
  options.cpu_targets = {"host", "x86-64"};
  runtime::artifact::Contents contents = runtime::artifact::read(read_bytes(exported_concat(dir, options)), "two");
  REQUIRE(contents.variants.size() == 2);
  contents.variants[0].required_features.push_back("nimble-test-feature");  // a CPU this one is not
  write_bytes(dir.file("fallback.nimble"), runtime::artifact::write(contents));
  ArtifactInfo info;
  vm::VirtualMachine aot = aot_machine(load(dir.file("fallback.nimble"), &info));
  CHECK(info.cpu_target == "x86-64");
  vm::VirtualMachine jit(compile(concat_module()));
  const std::vector<Value> args{ramp(20, 0.1f), ramp(3, 0.1f)};
  CHECK(testing::close_value(aot.invoke("f", args), jit.invoke("f", args), {.rtol = 1e-6, .atol = 1e-7}));
}

TEST_CASE("One artifact serves VMs on several threads", "[aot]") {
  const ScratchDir dir;
  const vm::Executable exe = compile(concat_module());
  const auto args_of = [](std::int64_t i, int t) {
    return std::vector<Value>{ramp(1 + (i * 7 + t) % 50, 0.03f), ramp(1 + i % 9, 0.2f)};
  };
  constexpr int kThreads = 4, kCalls = 30;
  // What the JIT computes, before the artifact is loaded.
  std::vector<std::vector<Value>> expected(kThreads);
  vm::VirtualMachine jit(exe);
  for (int t = 0; t < kThreads; ++t)
    for (std::int64_t i = 0; i < kCalls; ++i) expected[static_cast<std::size_t>(t)].push_back(jit.invoke("f", args_of(i, t)));
  (void)export_executable(exe, dir.file("f.nimble"));
  const vm::Executable loaded = load(dir.file("f.nimble"));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const auto k = static_cast<std::size_t>(t);
      try {
        vm::VirtualMachine aot = aot_machine(loaded);
        for (std::int64_t i = 0; i < kCalls; ++i)
          if (!testing::same_value(aot.invoke("f", args_of(i, t)), expected[k][static_cast<std::size_t>(i)]))
            ++mismatches[k];
      } catch (const Error& e) {
        errors[k] = e.message();
      }
    });
  for (std::thread& t : threads) t.join();
  CHECK(mismatches == std::vector<int>(kThreads, 0));
  CHECK(errors == std::vector<std::string>(kThreads));
}

TEST_CASE("Random programs run from their export exactly as under the JIT", "[aot]") {
  const ScratchDir dir;
  int exported = 0, declined = 0, runs = 0;
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    const testing::RandomProgram p = testing::random_program(seed);
    INFO("seed " << seed << ":\n" << p.text);
    const vm::Executable exe = compile(ir::parse(p.text, "random.nir"));
    // What the JIT (and, for shape functions and opaque ops, the reference
    // kernels) computes, before this export is loaded.
    vm::VirtualMachine jit(exe);
    std::vector<std::optional<Value>> expected;
    std::vector<std::optional<ErrorKind>> expected_error;
    for (const std::vector<Value>* args : {&p.args, &p.other_args}) {
      try {
        expected.emplace_back(jit.invoke(p.entry, *args));
        expected_error.emplace_back();
      } catch (const Error& e) {
        expected.emplace_back();
        expected_error.emplace_back(e.kind());
      }
    }
    const std::string path = dir.file(fmt::format("random{}.nimble", seed));
    try {
      (void)export_executable(exe, path);
    } catch (const Error& e) {
      // An opaque op without a built-in kernel (nonzero, unique, ...).
      CHECK(e.kind() == ErrorKind::not_supported);
      ++declined;
      continue;
    }
    ++exported;
    vm::VirtualMachine aot = aot_machine(load(path));
    std::size_t k = 0;
    for (const std::vector<Value>* args : {&p.args, &p.other_args}) {
      INFO((k == 0 ? "inputs that fit the program" : "inputs with redrawn extents"));
      ++runs;
      try {
        const Value got = aot.invoke(p.entry, *args);
        REQUIRE(expected[k].has_value());
        CHECK(testing::same_value(got, *expected[k]));
      } catch (const Error& e) {
        INFO("the export raised: " << e.what());
        REQUIRE(expected_error[k].has_value());
        CHECK(e.kind() == *expected_error[k]);
      }
      ++k;
    }
  }
  WARN(exported << " random programs exported and run " << runs << " times; " << declined
                << " declined (an opaque op)");
  CHECK(exported >= 40);
}
