// Chrome traces (nimble/runtime/trace.hpp): a trace of W3 (BERT) at 128
// tokens is valid JSON of the Trace Event Format, with one kernel event per
// launch engine_stats() counts, the invocation, and the compilations.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>

#include "models/bert.hpp"
#include "nimble/nimble.hpp"
#include "support/cache_scope.hpp"
#include "support/model_args.hpp"

using namespace nimble;

TEST_CASE("a trace of W3 at 128 tokens has every kernel call, the invocation and the compiles", "[vm]") {
  KernelCacheOptions options;
  options.background = false;  // the specialized compiles inside the invocation
  options.disk_cache_dir = "";
  const nimble::testing::ScopedCacheOptions scope(options);  // also resets the engine stats
  Builder b;
  models::build_bert(b);
  const ir::Module m = b.build();
  const std::vector<Value> args = nimble::testing::bert_args(m, 1, 128);
  vm::VirtualMachine machine(compile(m));

  start_trace();
  CHECK(trace_recording());
  (void)machine.invoke("bert", args);
  const EngineStats stats = engine_stats();
  const std::string text = stop_trace();
  CHECK_FALSE(trace_recording());

  const nlohmann::json trace = nlohmann::json::parse(text);  // throws if it is not JSON
  REQUIRE(trace.contains("traceEvents"));
  std::uint64_t kernels = 0, invocations = 0, compiles = 0, specialized = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    for (const char* field : {"name", "ph", "ts", "dur", "pid", "tid"}) REQUIRE(e.contains(field));
    if (e["ph"] == "M") continue;  // a thread's name
    CHECK(e["ph"] == "X");
    CHECK(e["dur"].get<double>() >= 0);
    const std::string category = e["cat"];
    if (category == "kernel") {
      ++kernels;
      CHECK(e["args"].contains("tensors"));
    }
    if (category == "vm") {
      ++invocations;
      CHECK(e["name"] == "invoke @bert");
    }
    if (category == "compile") {
      ++compiles;
      if (e["args"]["bucket"] != "generic") ++specialized;
    }
  }
  CHECK(kernels == stats.kernel_launches);
  CHECK(kernels > 0);
  CHECK(invocations == 1);
  CHECK(compiles == stats.kernels_compiled);
  CHECK(compiles > 0);
  CHECK(specialized == stats.specialized_compiled);

  // Stopped, nothing is recorded; a new trace starts empty.
  (void)machine.invoke("bert", args);
  start_trace();
  const nlohmann::json empty = nlohmann::json::parse(stop_trace());
  CHECK(empty["traceEvents"].empty());
}
