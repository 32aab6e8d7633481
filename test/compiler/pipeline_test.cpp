// The compiler's pipeline (lib/compiler/pipeline.cpp): its first step types
// a parsed module, dump_after names its steps, and a module compiled twice
// at once from two threads is left as it was.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "nimble/nimble.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using nimble::testing::IsCloseTo;

namespace {

constexpr const char* kScaleText = R"(
entry def @scale(%x: f32[?, 4]) {
  let %y = mul(%x, %x);
  let %z = add(%y, %x);
  %z
}
)";

// What `fn` writes to stderr.
template <class Fn>
std::string stderr_of(Fn&& fn) {
  std::fflush(stderr);
  char path[] = "/tmp/nimble_pipeline_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const int saved_fd = dup(fileno(stderr));
  dup2(fd, fileno(stderr));
  fn();
  std::fflush(stderr);
  dup2(saved_fd, fileno(stderr));
  close(saved_fd);
  std::string text;
  if (FILE* f = std::fopen(path, "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
  }
  close(fd);
  std::remove(path);
  return text;
}

}  // namespace

TEST_CASE("compile: a parsed module is verified and typed by the pipeline's first step", "[passes]") {
  const ir::Module m = ir::parse(kScaleText);  // no ir::infer_types here
  vm::VirtualMachine machine(compile(m));
  const Tensor x = Tensor::full({3, 4}, 2.0, DType::f32);
  const Tensor y = machine.invoke("scale", {x}).tensor();
  CHECK_THAT(y, IsCloseTo(Tensor::full({3, 4}, 6.0, DType::f32)));

  // An ill-typed text is the type error inference gives, from compile.
  CHECK_THROWS_AS(compile(ir::parse("def @f(%x: f32[2]) { matmul(%x, %x) }")), Error);
}

TEST_CASE("compile: dump_after prints the module after the step it names, and only that one", "[passes]") {
  const ir::Module m = ir::parse(kScaleText);
  const std::string fused = stderr_of([&] { (void)compile(m, {.dump_after = "fuse_ops"}); });
  CHECK(fused.find("// after fuse_ops\n") == 0);
  CHECK(fused.find("primitive fn") != std::string::npos);
  CHECK(fused.find("// after simplify") == std::string::npos);

  const std::string code = stderr_of([&] { (void)compile(m, {.dump_after = "allocate_registers"}); });
  CHECK(code.find("// after allocate_registers\n") == 0);
  CHECK(code.find("InvokePacked") != std::string::npos);

  const std::string all = stderr_of([&] { (void)compile(m, {.dump_after = "all"}); });
  std::size_t steps = 0;
  for (std::size_t at = all.find("// after "); at != std::string::npos; at = all.find("// after ", at + 1)) ++steps;
  CHECK(steps == 11);  // every step but place_devices, which a CPU target skips

  const std::string none = stderr_of([&] { (void)compile(m); });
  CHECK(none.empty());

  CHECK_NIMBLE_ERROR(compile(m, {.dump_after = "fusion"}), ErrorKind::invalid_argument,
                     "compile: dump_after names no step: 'fusion' (steps: infer_types, simplify, "
                     "pretranspose_weights, split_to_slices, fuse_ops, place_devices, lower_to_bytecode, "
                     "plan_memory, fuse_fresh_tensors, insert_kills, allocate_registers, link, or all)");
}

TEST_CASE("compile: two threads compile one typed module at once", "[passes]") {
  ir::Module m = ir::parse(kScaleText);
  ir::verify(m);
  ir::infer_types(m);
  const std::string before = ir::print(m, {.show_types = true});
  std::thread other([&] { (void)compile(m); });
  (void)compile(m);
  other.join();
  CHECK(ir::print(m, {.show_types = true}) == before);
}
