// nimble's rows of the bench: every workload of bench/README.md on
//   nimble            the default engine (bench/engine.hpp),
//   nimble_reference  the reference interpreter,
//   nimble_prepacked  GEMM and SGEMM with B a constant of the module (the
//                     constant-weight case; the other rows pass B at run time).
// The models are examples/models/*.hpp and their arguments
// nimble_workloads.hpp's, from the generator in examples/models/workloads.hpp.
// Each model is built once per engine and shared by its sizes, as a host would.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <utility>

#include "engine.hpp"
#include "harness.hpp"
#include "nimble_workloads.hpp"

namespace nimble::bench {
namespace {

void add_outputs(workloads::Checksum& c, const Value& v) {
  if (v.is_tensor()) {
    c.add(v.tensor());
    return;
  }
  for (const Value& f : v.fields()) add_outputs(c, f);
}

// A runner and the arguments of one size; keeps the last call's outputs.
Case make_case(std::shared_ptr<const Runner> runner, std::vector<Value> args) {
  struct State {
    std::shared_ptr<const Runner> runner;
    std::vector<Value> args;
    Value out;
  };
  auto s = std::make_shared<State>(State{std::move(runner), std::move(args), {}});
  return {.call = [s] { s->out = (*s->runner)(s->args); },
          .checksum =
              [s] {
                workloads::Checksum c;
                add_outputs(c, s->out);
                return c;
              },
          .release = [s] { s->out = Value(); },
          .trace_memory = s->runner->engine() == Engine::nimble
                              ? std::function<vm::MemoryTrace()>([s] { return s->runner->trace_memory(s->args); })
                              : nullptr};
}

// One runner per model and engine, built on first use and shared by the
// model's sizes (a host compiles once and runs many shapes).
std::shared_ptr<const Runner> runner_for(Engine engine, const char* model, BuildFn build) {
  static std::map<std::pair<Engine, std::string>, std::shared_ptr<const Runner>> runners;
  std::shared_ptr<const Runner>& r = runners[{engine, model}];
  if (!r) {
    Builder b;
    const Function entry = build(b);
    r = std::make_shared<const Runner>(engine, b.build(), entry.name());
  }
  return r;
}

const Tensor& gemm_b() {
  static const Tensor b = workloads::w4_gemm_b();
  return b;
}

// `args` with those from `first_weight` on (the model's weights) moved to
// GPU 0 once, for the nimble_cuda rows — as a GPU user keeps a model's
// weights there; the inputs still come from the host on every call.
std::vector<Value> weights_placed(Engine engine, std::vector<Value> args, std::size_t first_weight) {
  if (engine == Engine::nimble_cuda)
    for (std::size_t i = first_weight; i < args.size(); ++i) args[i] = args[i].to(Device::cuda(0));
  return args;
}

Case w1_case(Engine engine, std::int64_t length) {
  return make_case(runner_for(engine, "lstm", models::build_lstm), weights_placed(engine, w1_args(length), 1));
}

Case w2_case(Engine engine, std::int64_t leaves) {
  auto runner = runner_for(engine, "tree_lstm", models::build_tree_lstm);
  std::vector<Value> args = weights_placed(engine, w2_args(runner->module(), leaves), 2);
  return make_case(std::move(runner), std::move(args));
}

// W2 over a left spine `depth` nodes deep (every right child a leaf; depth
// + 1 leaves): the deepest tree of its size, whose time per node shows
// whether a per-node cost grows with the tree.
Case w2_deep_case(std::int64_t depth) {
  auto runner = runner_for(Engine::nimble, "tree_lstm", models::build_tree_lstm);
  const Adt tree(runner->module().find_adt("Tree"));
  Value t = tree["Leaf"].value({Tensor::scalar<std::int64_t>(0)});
  for (std::int64_t j = 1; j <= depth; ++j)
    t = tree["Node"].value({t, tree["Leaf"].value({Tensor::scalar<std::int64_t>(j)})});
  std::vector<Value> args{t, workloads::w2_leaves(depth + 1)};
  args.insert(args.end(), w2_weights().begin(), w2_weights().end());
  Case c = make_case(std::move(runner), std::move(args));
  // The memory trace measures every live value before every instruction:
  // over a recursion this deep that is quadratic, hours at 100k.
  c.trace_memory = nullptr;
  return c;
}

Case w3_case(Engine engine, std::int64_t length) {
  auto runner = runner_for(engine, "bert", models::build_bert);
  std::vector<Value> args = weights_placed(engine, w3_args(runner->module(), length), 1);
  return make_case(std::move(runner), std::move(args));
}

// chain1000: 1000 elementwise ops, each its own op in the program.
Function build_chain(Builder& b) {
  Function chain = b.def("chain1000", {{"x", f32({workloads::kChainLength})}}, [](Expr x) {
    for (int i = 0; i < workloads::kChainPairs; ++i) {
      x = x * workloads::kChainScale;
      x = x + workloads::kChainShift;
    }
    return x;
  });
  b.entry(chain);
  return chain;
}

Case chain_case(Engine engine) {
  return make_case(runner_for(engine, "chain1000", build_chain), {workloads::w4_chain_input()});
}

// a · b with both operands inputs, in workloads.md's layout (row-major, b not
// transposed).
Function build_matmul(Builder& b) {
  const Dim k{"k"}, n{"n"};
  Function gemm = b.def("gemm", {{"a", f32({Any, k})}, {"b", f32({k, n})}},
                        [](Expr a, Expr w) { return matmul(a, w); });
  b.entry(gemm);
  return gemm;
}

// a · B with B a constant of the module.
std::shared_ptr<const Runner> prepacked_runner(const Tensor& weight) {
  Builder b;
  Function gemm = b.def("gemm", {{"a", f32({Any, weight.dim(0)})}},
                        [&](Expr a) { return matmul(a, constant(weight)); });
  b.entry(gemm);
  return std::make_shared<const Runner>(Engine::nimble, b.build(), gemm.name());
}

Case gemm_case(Engine engine, std::int64_t length) {
  return make_case(runner_for(engine, "matmul", build_matmul),
                   {workloads::w4_gemm_a(length), gemm_b()});
}
Case gemm_prepacked_case(std::int64_t length) {
  static const std::shared_ptr<const Runner> runner = prepacked_runner(gemm_b());
  return make_case(runner, {workloads::w4_gemm_a(length)});
}
Case sgemm_case(Engine engine, std::int64_t n) {
  return make_case(runner_for(engine, "matmul", build_matmul),
                   {workloads::sgemm_a(n), workloads::sgemm_b(n)});
}
Case sgemm_prepacked_case(std::int64_t n) {
  return make_case(prepacked_runner(workloads::sgemm_b(n)), {workloads::sgemm_a(n)});
}

// a · bᵀ (dense) with b [N, K] an input, or a constant of the module.
Function build_dense(Builder& b) {
  const Dim k{"k"}, n{"n"};
  Function f = b.def("dense", {{"a", f32({Any, k})}, {"b", f32({n, k})}},
                     [](Expr a, Expr w) { return matmul(a, w, false, true); });
  b.entry(f);
  return f;
}
Case dense_case(Engine engine, const workloads::DenseShape& shape) {
  return make_case(runner_for(engine, "dense", build_dense),
                   {workloads::dense_a(shape), workloads::dense_b(shape)});
}
Case dense_prepacked_case(const workloads::DenseShape& shape) {
  Builder b;
  const Tensor weight = workloads::dense_b(shape);
  Function f = b.def("dense", {{"a", f32({Any, weight.dim(1)})}},
                     [&](Expr a) { return matmul(a, constant(weight), false, true); });
  b.entry(f);
  return make_case(std::make_shared<const Runner>(Engine::nimble, b.build(), f.name()),
                   {workloads::dense_a(shape)});
}

double gemm_flops(std::int64_t m, std::int64_t k, std::int64_t n) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
}

std::vector<CaseSpec> cases() {
  std::vector<CaseSpec> all;
  for (Engine engine : {Engine::nimble, Engine::reference}) {
    const std::string impl(impl_name(engine));
    for (std::int64_t l : workloads::kW1Sizes)
      all.push_back({"W1", impl, l, 0, [=] { return w1_case(engine, l); }});
    for (std::int64_t n : workloads::kW2Sizes)
      all.push_back({"W2", impl, n, 0, [=] { return w2_case(engine, n); }});
    for (std::int64_t l : workloads::kW3Sizes)
      all.push_back({"W3", impl, l, 0, [=] { return w3_case(engine, l); }});
    all.push_back(
        {"CHAIN1000", impl, workloads::kChainLength, 0, [=] { return chain_case(engine); }});
    for (std::int64_t l : workloads::kGemmSizes)
      all.push_back({"GEMM", impl, l, gemm_flops(l, workloads::kGemmDim, workloads::kGemmDim),
                     [=] { return gemm_case(engine, l); }});
    for (std::int64_t n : workloads::kSgemmSizes)
      all.push_back({"SGEMM", impl, n, gemm_flops(n, n, n), [=] { return sgemm_case(engine, n); }});
    if (engine == Engine::nimble)  // the reference's products are too slow to time at these shapes
      for (const workloads::DenseShape& shape : workloads::dense_shapes())
        all.push_back({"GEMM", impl, shape.m, gemm_flops(shape.m, shape.k, shape.n),
                       [=] { return dense_case(engine, shape); }, workloads::to_string(shape)});
  }
  // On GPU 0 where there is one, the weights moved there once (a list of
  // tuples of tensors for BERT), the inputs passed from the host.
  if (const std::optional<std::string> why = cuda_unavailable()) {
    std::fprintf(stderr, "nimble_bench: the nimble_cuda rows are skipped: %s\n", why->c_str());
  } else {
    const std::string impl(impl_name(Engine::nimble_cuda));
    for (std::int64_t l : workloads::kW1Sizes)
      all.push_back({"W1", impl, l, 0, [=] { return w1_case(Engine::nimble_cuda, l); }});
    for (std::int64_t n : workloads::kW2Sizes)
      all.push_back({"W2", impl, n, 0, [=] { return w2_case(Engine::nimble_cuda, n); }});
    for (std::int64_t l : workloads::kW3Sizes)
      all.push_back({"W3", impl, l, 0, [=] { return w3_case(Engine::nimble_cuda, l); }});
  }
  for (std::int64_t depth : {1'000, 10'000, 100'000})
    all.push_back({"W2", "nimble_deep", depth, 0, [=] { return w2_deep_case(depth); }});
  for (const workloads::DenseShape& shape : workloads::dense_shapes())
    all.push_back({"GEMM", "nimble_prepacked", shape.m, gemm_flops(shape.m, shape.k, shape.n),
                   [=] { return dense_prepacked_case(shape); }, workloads::to_string(shape)});
  for (std::int64_t l : workloads::kGemmSizes)
    all.push_back({"GEMM", "nimble_prepacked", l,
                   gemm_flops(l, workloads::kGemmDim, workloads::kGemmDim),
                   [=] { return gemm_prepacked_case(l); }});
  for (std::int64_t n : workloads::kSgemmSizes)
    all.push_back({"SGEMM", "nimble_prepacked", n, gemm_flops(n, n, n),
                   [=] { return sgemm_prepacked_case(n); }});
  return all;
}

}  // namespace
}  // namespace nimble::bench

int main(int argc, char** argv) {
  using namespace nimble::bench;
  return bench_main(argc, argv,
                    {.cases = cases(),
                     .set_threads = [](int n) { nimble::set_num_threads(n); },
                     .reports_engine_stats = true,
                     .add_context =
                         [] {
                           benchmark::AddCustomContext("nimble_version", nimble::kVersion);
                           benchmark::AddCustomContext("nimble_engine", kNimbleEngineDescription);
                         }});
}
