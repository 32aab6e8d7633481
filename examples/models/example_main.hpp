// The command line shared by the model examples:
//   <model> [--reference] [--print-ir] [--dump-after=<step>] [--profile] [--trace <file.json>] [--report] [--dot]
//           [size ...]
// builds the model, and for every size (all of the workload's sizes when
// none is given) generates its inputs, runs it and prints the checksum line
// of bench/README.md. The model runs on the bytecode VM;
// --reference selects the reference interpreter instead; --print-ir prints
// the typed IR first; --dump-after=<step> prints the module after that
// step of the compiler's pipeline (CompileOptions::dump_after: a pass's IR,
// or a bytecode step's listing; `all` for every step) to stderr; --profile prints the VM's profile (time per primitive
// function, count per instruction) after the runs; --trace writes a Chrome
// trace of everything from the compile on (nimble/runtime/trace.hpp: open it
// in ui.perfetto.dev or chrome://tracing); --report prints the
// compile report (per function: kernels before and after fusion, the fused
// kernels, allocations, the planned arena against its lower bound); --dot
// prints the fused program as a Graphviz digraph.
#pragma once

#include <nimble/nimble.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/workloads.hpp"

namespace nimble::models {

struct ExampleSpec {
  const char* workload;                          ///< "W1"
  Function (*build)(Builder&);                   ///< defines the model, returns its entry
  std::span<const std::int64_t> default_sizes;  ///< workloads.md's sizes
  /// The entry's arguments for one size (the module gives access to its ADTs).
  std::function<std::vector<Value>(const ir::Module&, std::int64_t size)> inputs;
};

inline void add_outputs(workloads::Checksum& c, const Value& v) {
  if (v.is_tensor()) {
    c.add(v.tensor());
    return;
  }
  for (const Value& f : v.fields()) add_outputs(c, f);
}

inline int example_main(int argc, char** argv, const ExampleSpec& spec) {
  bool print_ir = false;
  bool reference = false;
  bool profile = false;
  bool report = false;
  bool dot = false;
  const std::pair<const char*, bool*> flags[] = {{"--print-ir", &print_ir},
                                                 {"--reference", &reference},
                                                 {"--profile", &profile},
                                                 {"--report", &report},
                                                 {"--dot", &dot}};
  std::string dump_after;
  std::string trace_file;
  constexpr std::string_view kDumpAfter = "--dump-after=";
  std::vector<std::int64_t> sizes;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
      trace_file = argv[++i];
      continue;
    }
    if (std::string_view(argv[i]).starts_with(kDumpAfter)) {
      dump_after = std::string_view(argv[i]).substr(kDumpAfter.size());
      continue;
    }
    bool* flag = nullptr;
    for (const auto& [name, target] : flags)
      if (std::strcmp(argv[i], name) == 0) flag = target;
    if (flag) {
      *flag = true;
      continue;
    }
    char* end = nullptr;
    const long long size = std::strtoll(argv[i], &end, 10);
    if (*end != '\0' || size <= 0) {
      std::fprintf(stderr, "usage: %s [--reference] [--print-ir] [--dump-after=<step>] [--profile] "
                   "[--trace <file.json>] [--report] [--dot] [size ...]\n",
                   argv[0]);
      return 2;
    }
    sizes.push_back(size);
  }
  if (sizes.empty()) sizes.assign(spec.default_sizes.begin(), spec.default_sizes.end());
  try {
    if (!trace_file.empty()) start_trace();
    Builder b;
    const Function entry = spec.build(b);
    const ir::Module module = b.build();
    if (print_ir) std::fputs(ir::print(module, {.show_types = true}).c_str(), stdout);
    std::optional<vm::VirtualMachine> machine;
    CompileReport compile_report;
    if (!reference) {
      machine.emplace(
          compile(module, {.dump_after = dump_after, .report = report || dot ? &compile_report : nullptr}));
      if (report) std::fputs(compile_report.table().c_str(), stdout);
      if (dot) std::fputs(compile_report.dot.c_str(), stdout);
    }
    if (machine && profile) machine->set_profiling(true);
    for (std::int64_t size : sizes) {
      const Value out = reference ? evaluate(module, entry.name(), spec.inputs(module, size))
                                  : machine->invoke(entry.name(), spec.inputs(module, size));
      workloads::Checksum c;
      add_outputs(c, out);
      std::printf("%s\n", workloads::checksum_line(spec.workload, size, c).c_str());
      std::fflush(stdout);
    }
    if (machine && profile) std::fputs(machine->profile().table().c_str(), stdout);
    if (!trace_file.empty()) {
      KernelCache::global().wait_for_background();  // its compilations in the trace
      stop_trace(trace_file);
      std::fprintf(stderr, "trace: %s (open it in ui.perfetto.dev or chrome://tracing)\n", trace_file.c_str());
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace nimble::models
