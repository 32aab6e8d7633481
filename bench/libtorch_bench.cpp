// The libtorch rows of the bench, in C++ through Debian's libtorch-dev, each
// call under at::InferenceMode, with at::set_num_threads (torch::set_num_threads)
// pinning the intra-op threads. The math is that of test/pytorch/workloads.py.
//   W1  libtorch_fused       at::lstm over the whole sequence (torch::nn::LSTM's kernel)
//       libtorch_cell_loop   at::lstm_cell per step and layer, outputs stacked
//   W2  libtorch_recursive   recursion over the tree in C++, libtorch ops per node
//   W3, CHAIN1000, GEMM, SGEMM   libtorch
// Weights are copied into libtorch tensors once; each call computes from them.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include <cmath>
#include <memory>
#include <utility>

#include "harness.hpp"

namespace nimble::bench {
namespace {

at::Tensor to_torch(const Tensor& t) {
  std::vector<std::int64_t> sizes;
  for (std::size_t i = 0; i < t.rank(); ++i) sizes.push_back(t.dim(static_cast<std::int64_t>(i)));
  return at::from_blob(const_cast<float*>(t.data<float>()), sizes, at::kFloat).clone();
}
std::vector<at::Tensor> to_torch(const std::vector<Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const Tensor& t : ts) out.push_back(to_torch(t));
  return out;
}

workloads::Checksum checksum_of(std::initializer_list<at::Tensor> outputs) {
  workloads::Checksum c;
  for (const at::Tensor& t : outputs) {
    const at::Tensor d = t.contiguous();
    const workloads::Checksum part = bench::checksum_of(d.data_ptr<float>(), d.numel());
    c.sum += part.sum;
    c.abs_sum += part.abs_sum;
  }
  return c;
}

// A case whose call maps fixed inputs to one output tensor.
template <class F>
Case tensor_case(F compute) {
  struct State {
    F compute;
    at::Tensor out;
  };
  auto s = std::make_shared<State>(State{std::move(compute), {}});
  return {.call =
              [s] {
                c10::InferenceMode guard;
                s->out = s->compute();
              },
          .checksum = [s] { return checksum_of({s->out}); },
          .release = [s] { s->out.reset(); }};
}

// --- W1
// -------------------------------------------------------------------------------------------
const std::vector<at::Tensor>& w1_weights() {  // w_ih0, w_hh0, b_ih0, b_hh0, then layer 1
  static const std::vector<at::Tensor> w = to_torch(workloads::w1_weights());
  return w;
}

Case w1_fused_case(std::int64_t length) {
  const at::Tensor x = to_torch(workloads::w1_input(length));
  const at::Tensor zeros = at::zeros({2, 1, 512});
  return tensor_case([x, zeros] {
    return std::get<0>(at::lstm(x, {zeros, zeros}, w1_weights(), /*has_biases=*/true,
                                /*num_layers=*/2, /*dropout=*/0.0, /*train=*/false,
                                /*bidirectional=*/false, /*batch_first=*/false));
  });
}

Case w1_cell_loop_case(std::int64_t length) {
  const at::Tensor x = to_torch(workloads::w1_input(length));
  return tensor_case([x] {
    const std::vector<at::Tensor>& w = w1_weights();
    at::Tensor h0 = at::zeros({1, 512}), c0 = h0, h1 = h0, c1 = h0;
    std::vector<at::Tensor> outputs;
    for (std::int64_t t = 0; t < x.size(0); ++t) {
      std::tie(h0, c0) = at::lstm_cell(x[t], {h0, c0}, w[0], w[1], w[2], w[3]);
      std::tie(h1, c1) = at::lstm_cell(h0, {h1, c1}, w[4], w[5], w[6], w[7]);
      outputs.push_back(h1);
    }
    return at::stack(outputs);
  });
}

// --- W2
// -------------------------------------------------------------------------------------------
struct TreeLstm {
  at::Tensor wx, bx, u, bu;

  std::pair<at::Tensor, at::Tensor> node(const workloads::TreeShape& t, const at::Tensor& x) const {
    if (t.leaf >= 0) {
      const std::vector<at::Tensor> g = at::linear(x[t.leaf], wx, bx).split(150);
      at::Tensor c = at::sigmoid(g[0]) * at::tanh(g[2]);
      return {at::sigmoid(g[1]) * at::tanh(c), c};
    }
    const auto [hl, cl] = node(*t.left, x);
    const auto [hr, cr] = node(*t.right, x);
    const std::vector<at::Tensor> g = at::linear(at::cat({hl, hr}), u, bu).split(150);
    at::Tensor c =
        at::sigmoid(g[0]) * at::tanh(g[4]) + at::sigmoid(g[1]) * cl + at::sigmoid(g[2]) * cr;
    return {at::sigmoid(g[3]) * at::tanh(c), c};
  }
};

Case w2_case(std::int64_t leaves) {
  static const TreeLstm model = [] {
    const std::vector<at::Tensor> w = to_torch(workloads::w2_weights());
    return TreeLstm{w[0], w[1], w[2], w[3]};
  }();
  struct State {
    std::unique_ptr<workloads::TreeShape> tree;
    at::Tensor x, h, c;
  };
  auto s = std::make_shared<State>(
      State{workloads::w2_tree(leaves), to_torch(workloads::w2_leaves(leaves)), {}, {}});
  return {.call =
              [s] {
                c10::InferenceMode guard;
                std::tie(s->h, s->c) = model.node(*s->tree, s->x);
              },
          .checksum =
              [s] {
                return checksum_of({s->h, s->c});
              },
          .release =
              [s] {
                s->h.reset();
                s->c.reset();
              }};
}

// --- W3
// -------------------------------------------------------------------------------------------
at::Tensor bert(at::Tensor x, const std::vector<std::vector<at::Tensor>>& layers) {
  const std::int64_t length = x.size(0);
  auto heads = [&](const at::Tensor& t) { return t.reshape({length, 12, 64}).transpose(0, 1); };
  for (const std::vector<at::Tensor>& w : layers) {
    const at::Tensor q = heads(at::linear(x, w[0], w[1]));
    const at::Tensor k = heads(at::linear(x, w[2], w[3]));
    const at::Tensor v = heads(at::linear(x, w[4], w[5]));
    const at::Tensor p = at::softmax(at::matmul(q, k.transpose(1, 2)) * 0.125, -1);
    const at::Tensor ctx = at::matmul(p, v).transpose(0, 1).reshape({length, 768});
    x = at::layer_norm(x + at::linear(ctx, w[6], w[7]), {768}, w[8], w[9], 1e-12);
    const at::Tensor ffn = at::linear(at::gelu(at::linear(x, w[10], w[11])), w[12], w[13]);
    x = at::layer_norm(x + ffn, {768}, w[14], w[15], 1e-12);
  }
  return x;
}

Case w3_case(std::int64_t length) {
  static const std::vector<std::vector<at::Tensor>> layers = [] {
    std::vector<std::vector<at::Tensor>> all;
    for (const std::vector<Tensor>& w : workloads::w3_weights()) all.push_back(to_torch(w));
    return all;
  }();
  const at::Tensor x = to_torch(workloads::w3_input(length));
  return tensor_case([x] { return bert(x, layers); });
}

// --- W4
// -------------------------------------------------------------------------------------------
Case chain_case() {
  const at::Tensor x = to_torch(workloads::w4_chain_input());
  return tensor_case([x] {
    at::Tensor y = x;
    for (int i = 0; i < workloads::kChainPairs; ++i) {
      y = y * static_cast<double>(workloads::kChainScale);
      y = y + static_cast<double>(workloads::kChainShift);
    }
    return y;
  });
}

Case mm_case(const Tensor& a, const Tensor& b) {
  return tensor_case([a = to_torch(a), b = to_torch(b)] { return at::mm(a, b); });
}

std::vector<CaseSpec> cases() {
  std::vector<CaseSpec> all;
  for (std::int64_t l : workloads::kW1Sizes) {
    all.push_back({"W1", "libtorch_fused", l, 0, [=] { return w1_fused_case(l); }});
    all.push_back({"W1", "libtorch_cell_loop", l, 0, [=] { return w1_cell_loop_case(l); }});
  }
  for (std::int64_t n : workloads::kW2Sizes)
    all.push_back({"W2", "libtorch_recursive", n, 0, [=] { return w2_case(n); }});
  for (std::int64_t l : workloads::kW3Sizes)
    all.push_back({"W3", "libtorch", l, 0, [=] { return w3_case(l); }});
  all.push_back({"CHAIN1000", "libtorch", workloads::kChainLength, 0, [] { return chain_case(); }});
  const double d = static_cast<double>(workloads::kGemmDim);
  for (std::int64_t l : workloads::kGemmSizes)
    all.push_back({"GEMM", "libtorch", l, 2.0 * static_cast<double>(l) * d * d,
                   [=] { return mm_case(workloads::w4_gemm_a(l), workloads::w4_gemm_b()); }});
  for (std::int64_t n : workloads::kSgemmSizes)
    all.push_back({"SGEMM", "libtorch", n, 2.0 * std::pow(static_cast<double>(n), 3),
                   [=] { return mm_case(workloads::sgemm_a(n), workloads::sgemm_b(n)); }});
  return all;
}

// at::get_parallel_info() on one line.
std::string parallel_info() {
  std::string info = at::get_parallel_info(), line;
  for (char ch : info) {
    if (ch == '\n') {
      if (!line.empty() && line.back() != ' ') line += "; ";
    } else if (ch != '\t') {
      line += ch;
    }
  }
  return line;
}

}  // namespace
}  // namespace nimble::bench

int main(int argc, char** argv) {
  using namespace nimble::bench;
  return bench_main(argc, argv,
                    {.cases = cases(),
                     .set_threads = [](int n) { at::set_num_threads(n); },
                     .reports_engine_stats = false,
                     .add_context =
                         [] {
                           benchmark::AddCustomContext("torch_version", TORCH_VERSION);
                           benchmark::AddCustomContext("torch_parallel_info", parallel_info());
                         }});
}
