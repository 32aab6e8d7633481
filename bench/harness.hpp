// The harness every bench program shares: one Google Benchmark per workload,
// implementation and size, named <workload>/<impl>/<size>/t<threads>, timed
// the way bench/README.md ("Measuring") asks, with the checksum of the
// outputs and the engine counters in each benchmark's counters.
//
// A bench program lists the cases it can run (CaseSpec) and how to pin its
// thread count, and calls bench_main. One process runs one implementation at
// one thread count (script/bench starts one per pair, see bench/README.md):
//
//   <program> --impl=<name> --threads=<n> [--quick] [--budget=<s>] [--list]
//             [--exclude=<name>,...] [Google Benchmark flags: --benchmark_filter, ...]
//
// Timing of a case (full mode): its data is generated and its model built
// when it is registered, then two calls estimate the cost c of one call; the
// benchmark then warms up 3 more calls when c <= 0.2 s, and times
// clamp(budget / c, 5, 20) calls, each alone, as Google Benchmark
// repetitions of one iteration; the JSON gets their median, mean, min, p10 and
// p90. --quick times one call and nothing else.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nimble/vm/virtual_machine.hpp>

#include "models/workloads.hpp"

namespace nimble::bench {

/// A workload at one size, ready to run on one implementation: its inputs are
/// generated and its model built.
struct Case {
  /// One call: computes the workload on the case's inputs and keeps the
  /// outputs. Throws on failure.
  std::function<void()> call;
  /// The checksum of the outputs of the last call (not timed).
  std::function<workloads::Checksum()> checksum;
  /// Optional: drops the last call's outputs, before each timed call and
  /// outside its time, so that every call allocates its outputs afresh, as a
  /// host's call would (a program that reuses its buffers has none).
  std::function<void()> release = nullptr;
  /// Optional (nimble): one more call with the VM's memory tracing on,
  /// outside the timed ones; its result becomes `act_peak_bytes` and
  /// `act_lower_bound_bytes`.
  std::function<vm::MemoryTrace()> trace_memory = nullptr;
};

/// A case a program can run: the parts of its name, and how to set it up.
/// Programs list every case; only those selected are set up.
struct CaseSpec {
  std::string workload;  ///< "W1", "W2", "W3", "CHAIN1000", "GEMM", "SGEMM"
  std::string impl;      ///< "nimble", "libtorch_fused", "handwritten", ...
  std::int64_t size;     ///< the workload's size: L, leaves, n
  double flops = 0;      ///< floating-point operations per call, where meaningful (GEMM)
  std::function<Case()> make;
  std::string label = {};  ///< the name's size part when not `size` (GEMM's "MxKxN")
};

/// What a bench program provides to bench_main.
struct Program {
  std::vector<CaseSpec> cases;
  /// Pins the implementation's thread count (called once, before any case is set up).
  std::function<void(int threads)> set_threads;
  /// Whether the cases run on nimble, whose EngineStats the counters then
  /// report; peers report those counters as 0.
  bool reports_engine_stats = false;
  /// Extra JSON context (benchmark::AddCustomContext), e.g. the peer's version
  /// and threading configuration; called after set_threads.
  std::function<void()> add_context;
};

/// Parses the flags above, sets up and registers the selected cases, runs
/// them, and returns the process exit status: 0, or 1 when a case failed (its
/// error is printed and the benchmark is marked as skipped with the error),
/// or 2 for bad flags.
int bench_main(int argc, char** argv, Program program);

/// The q-quantile (0 <= q <= 1) of `values`, interpolated linearly between
/// the closest ranks (numpy's default); 0 for no values.
double percentile(std::vector<double> values, double q);

/// Σ and Σ|·| of `n` floats, as workloads.md's checksum line has them.
workloads::Checksum checksum_of(const float* values, std::int64_t n);

}  // namespace nimble::bench
