// nimble::compile: the compiler's pipeline, every step in the order it runs
// (Halide's Lower.cpp is the model). Each step is an IR pass (Module ->
// Module, lib/passes/) or a named lowering of the bytecode compiler
// (lib/compiler/bytecode/); after each, debug builds verify the IR and
// CompileOptions::dump_after prints it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cstdio>
#include <mutex>

#include "codegen/jit/jit_provider.hpp"
#include "compiler/bytecode/compiler.hpp"
#include "eval/reference_provider.hpp"
#include "nimble/compile.hpp"
#include "passes/passes.hpp"
#include "support/check.hpp"
#include "support/out_of_memory.hpp"

namespace nimble {

namespace {

// The names dump_after accepts, in pipeline order.
constexpr std::array<std::string_view, 12> kSteps = {
    "infer_types",   "simplify",           "pretranspose_weights", "split_to_slices",
    "fuse_ops",      "place_devices",      "lower_to_bytecode",    "plan_memory",
    "fuse_fresh_tensors", "insert_kills", "allocate_registers",   "link"};

// What runs after each step: the checks and the dumps CompileOptions asks for.
class StepObserver {
 public:
  explicit StepObserver(const CompileOptions& options) : options_(options) {
    if (options.dump_after.empty() || options.dump_after == "all") return;
    for (std::string_view step : kSteps)
      if (step == options.dump_after) return;
    throw_error(ErrorKind::invalid_argument, "compile: dump_after names no step: '{}' (steps: {}, or all)",
                options.dump_after, fmt::join(kSteps, ", "));
  }

  void after(std::string_view step, const ir::Module& m) const {
#ifndef NDEBUG
    ir::verify(m);  // a pass that breaks the IR is caught where it does
#endif
    if (dumps(step))
      std::fprintf(stderr, "// after %.*s\n%s\n", static_cast<int>(step.size()), step.data(),
                   ir::print(m, {.show_types = true}).c_str());
  }

  void after(std::string_view step, const vm::BytecodeModule& m) const {
    if (!dumps(step)) return;
    // The functions' code as it stands, registers virtual until allocated.
    print_listing(step, vm::Executable(std::make_shared<vm::ExecutableData>(vm::link(m))));
  }

  void after(std::string_view step, const vm::Executable& executable) const {
    if (dumps(step)) print_listing(step, executable);
  }

 private:
  bool dumps(std::string_view step) const {
    return options_.dump_ir || options_.dump_after == "all" || options_.dump_after == step;
  }
  static void print_listing(std::string_view step, const vm::Executable& executable) {
    std::fprintf(stderr, "// after %.*s\n%s\n", static_cast<int>(step.size()), step.data(),
                 executable.disassemble().c_str());
  }
  const CompileOptions& options_;
};

void check_devices(const CompileOptions& options) {
  if (options.result_device != Device::cpu() && options.result_device != options.target)
    throw_error(ErrorKind::invalid_argument,
                "compile: result_device must be the CPU or the target ({}), got {}", to_string(options.target),
                to_string(options.result_device));
}

// The kernel counts the report compares fusion with: the module compiled
// without fusion or planning.
void count_unfused_kernels(const ir::Module& module, CompileReport& report) {
  CompileReport unfused;
  vm::fill_report(vm::lower_to_bytecode(module), unfused);
  for (CompileReport::Function& f : report.functions)
    for (const CompileReport::Function& u : unfused.functions)
      if (u.name == f.name) f.kernels_unfused = u.kernels;
}

}  // namespace

// compile(), less the translation of allocation failures.
static vm::Executable compile_checked(const ir::Module& module, const CompileOptions& options) {
  static std::once_flag providers;
  std::call_once(providers, [] {
    register_reference_provider();
    codegen::register_jit_provider();
  });
  check_devices(options);
  const StepObserver observe(options);

  // 1. infer_types: a parsed module gets its types (a built one has them).
  ir::Module m = passes::infer_types(module);
  observe.after("infer_types", m);
  const ir::Module typed = m;
  if (options.simplify) {
    // 2. simplify: folding and CSE leave fewer ops for fusion to group, and
    //    dead code goes before anything is allocated for it.
    m = passes::simplify(m);
    observe.after("simplify", m);
    // 3. pretranspose_weights: constant weights in the layout the faster
    //    product reads, once (after folding, which may make them constant;
    //    before fusion, which then takes the bias add as an epilogue).
    m = passes::pretranspose_weights(m);
    observe.after("pretranspose_weights", m);
  }
  if (options.fuse_ops) {
    // 4. split_to_slices: a split's parts become slices, which fuse into
    //    their readers (a split's tuple fuses with nothing).
    m = passes::split_to_slices(m);
    observe.after("split_to_slices", m);
    // 5. fuse_ops: each group becomes a primitive function, one kernel.
    m = passes::fuse_ops(m);
    observe.after("fuse_ops", m);
  }
  if (!options.target.is_cpu()) {
    // 6. place_devices: after fusion, so that a fused group is one kernel on
    //    one device and copies go only between kernels, never inside one;
    //    before lowering, which allocates each value where it was placed.
    //    No device is needed to compile: kernels are made for it on first use.
    m = passes::place_devices(m, options.target, options.result_device);
    observe.after("place_devices", m);
  }
  // 7. lower_to_bytecode: A-normal form, closures lifted, every kernel's
  //    outputs an explicit allocation shaped from the types or by a shape
  //    function, match as tag tests and jumps; registers still virtual.
  vm::BytecodeModule code = vm::lower_to_bytecode(m, options.target);
  observe.after("lower_to_bytecode", code);
  if (options.plan_memory) {
    // 8. plan_memory: static-size intermediates share an arena per stretch
    //    between calls, by liveness over the final instruction stream.
    vm::plan_memory(code);
    observe.after("plan_memory", code);
  }
  // 9. fuse_fresh_tensors: a storage only one tensor views is allocated
  //    with it (after planning, which decides which storages stay alone).
  vm::fuse_fresh_tensors(code);
  observe.after("fuse_fresh_tensors", code);
  // 10. insert_kills: a value's register is cleared after its last use in
  //     the planned stream.
  vm::insert_kills(code);
  observe.after("insert_kills", code);
  // 11. allocate_registers: last, since kills count as definitions there.
  vm::allocate_registers(code);
  observe.after("allocate_registers", code);
  if (options.report) {
    vm::fill_report(code, *options.report);
    count_unfused_kernels(typed, *options.report);
    options.report->dot = vm::fused_program_dot(m);
  }
  // 12. link: one instruction stream, checked by the VM's own verifier (a
  //     failure here is a compiler bug).
  auto data = std::make_shared<vm::ExecutableData>(vm::link(std::move(code)));
  vm::verify(*data);
  vm::Executable executable(std::move(data));
  observe.after("link", executable);
  return executable;
}

vm::Executable compile(const ir::Module& module, const CompileOptions& options) {
  return with_memory_errors("compile", [&] { return compile_checked(module, options); });
}

}  // namespace nimble
