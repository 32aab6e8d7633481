// The deterministic generator of bench/README.md — splitmix64 and
// uniform floats in [-0.1, 0.1) — and the weights, inputs and trees of
// W1..W4 drawn from it, so that nimble, PyTorch and a hand-written baseline
// compute on bit-identical data. Shared by the examples, benches and tests.
#pragma once

#include <nimble/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace nimble::workloads {

/// splitmix64, exactly as workloads.md states it.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// One double multiply, then a round to float.
  float uniform() {
    const std::int64_t k = static_cast<std::int64_t>(next() >> 40) - 8388608;
    return static_cast<float>(static_cast<double>(k) * (0.1 / 8388608.0));
  }

 private:
  std::uint64_t state_;
};

/// prod(shape) consecutive uniform() draws, row-major.
inline Tensor uniform_tensor(SplitMix64& rng, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  for (float& v : t.values<float>()) v = rng.uniform();
  return t;
}

/// LayerNorm gamma: float32(1.0f + uniform()).
inline Tensor gamma_tensor(SplitMix64& rng, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  for (float& v : t.values<float>()) v = 1.0f + rng.uniform();
  return t;
}

// --- W1: 2-layer LSTM -----------------------------------------------------------------
inline constexpr std::int64_t kW1Sizes[] = {1, 8, 37, 64, 100, 128};

/// For layer 0 then 1: W_ih [2048, in], W_hh [2048, 512], b_ih [2048], b_hh [2048].
inline std::vector<Tensor> w1_weights() {
  SplitMix64 rng(1);
  std::vector<Tensor> w;
  for (std::int64_t in : {300, 512}) {
    w.push_back(uniform_tensor(rng, {2048, in}));
    w.push_back(uniform_tensor(rng, {2048, 512}));
    w.push_back(uniform_tensor(rng, {2048}));
    w.push_back(uniform_tensor(rng, {2048}));
  }
  return w;
}
inline Tensor w1_input(std::int64_t length) {
  SplitMix64 rng(1000 + static_cast<std::uint64_t>(length));
  return uniform_tensor(rng, {length, 1, 300});
}

// --- W2: binary Tree-LSTM ------------------------------------------------------------------
inline constexpr std::int64_t kW2Sizes[] = {8, 19, 32, 50};

/// A binary tree over leaves lo..hi-1 (a leaf has `leaf` >= 0 and no children).
struct TreeShape {
  std::int64_t leaf = -1;
  std::unique_ptr<TreeShape> left, right;
};

namespace detail {
inline std::unique_ptr<TreeShape> build_tree(SplitMix64& rng, std::int64_t lo, std::int64_t hi) {
  auto t = std::make_unique<TreeShape>();
  if (hi - lo == 1) {
    t->leaf = lo;
    return t;
  }
  const auto span = static_cast<std::uint64_t>(hi - lo - 1);
  const std::int64_t k = lo + 1 + static_cast<std::int64_t>(rng.next() % span);
  t->left = build_tree(rng, lo, k);  // the left subtree is drawn first
  t->right = build_tree(rng, k, hi);
  return t;
}
}  // namespace detail

/// The tree for n leaves: build(0, n) with the stream of seed 2500 + n.
inline std::unique_ptr<TreeShape> w2_tree(std::int64_t n) {
  SplitMix64 rng(2500 + static_cast<std::uint64_t>(n));
  return detail::build_tree(rng, 0, n);
}
inline std::string to_string(const TreeShape& t) {
  if (t.leaf >= 0) return std::to_string(t.leaf);
  std::string out = "(";
  out += to_string(*t.left);
  out += ", ";
  out += to_string(*t.right);
  out += ")";
  return out;
}
/// Edges on the longest root-to-leaf path (a lone leaf has depth 0).
inline int depth(const TreeShape& t) {
  return t.leaf >= 0 ? 0 : 1 + std::max(depth(*t.left), depth(*t.right));
}
/// Wx [450, 300], bx [450], U [750, 300], bU [750].
inline std::vector<Tensor> w2_weights() {
  SplitMix64 rng(2);
  return {uniform_tensor(rng, {450, 300}), uniform_tensor(rng, {450}),
          uniform_tensor(rng, {750, 300}), uniform_tensor(rng, {750})};
}
/// Leaf embeddings X [n, 300] (leaf i = row i).
inline Tensor w2_leaves(std::int64_t n) {
  SplitMix64 rng(2000 + static_cast<std::uint64_t>(n));
  return uniform_tensor(rng, {n, 300});
}

// --- W3: BERT-base encoder ------------------------------------------------------------------
inline constexpr std::int64_t kW3Sizes[] = {16, 37, 64, 128, 200};

/// The 16 weights of each of the 12 layers, in workloads.md order.
inline std::vector<std::vector<Tensor>> w3_weights(int layers = 12) {
  SplitMix64 rng(3);
  std::vector<std::vector<Tensor>> all;
  for (int l = 0; l < layers; ++l) {
    std::vector<Tensor> w;
    for (int i = 0; i < 4; ++i) {  // q, k, v, o
      w.push_back(uniform_tensor(rng, {768, 768}));
      w.push_back(uniform_tensor(rng, {768}));
    }
    w.push_back(gamma_tensor(rng, {768}));
    w.push_back(uniform_tensor(rng, {768}));
    w.push_back(uniform_tensor(rng, {3072, 768}));
    w.push_back(uniform_tensor(rng, {3072}));
    w.push_back(uniform_tensor(rng, {768, 3072}));
    w.push_back(uniform_tensor(rng, {768}));
    w.push_back(gamma_tensor(rng, {768}));
    w.push_back(uniform_tensor(rng, {768}));
    all.push_back(std::move(w));
  }
  return all;
}
inline Tensor w3_input(std::int64_t length) {
  SplitMix64 rng(3000 + static_cast<std::uint64_t>(length));
  return uniform_tensor(rng, {length, 768});
}

// --- W4: micro ------------------------------------------------------------------------------
/// chain1000: 500 × (x = x * 1.0001; x = x + 0.001) on x [16], constants in f32.
inline constexpr int kChainPairs = 500;
inline constexpr std::int64_t kChainLength = 16;
inline constexpr float kChainScale = 1.0001f;
inline constexpr float kChainShift = 0.001f;
/// gemm: A [L, 768] · B [768, 768] (B not transposed).
inline constexpr std::int64_t kGemmSizes[] = {1, 37, 128};
inline constexpr std::int64_t kGemmDim = 768;
/// sgemm: A [n, n] · B [n, n].
inline constexpr std::int64_t kSgemmSizes[] = {1024, 2048};

/// chain1000's input x [16].
inline Tensor w4_chain_input() {
  SplitMix64 rng(4);
  return uniform_tensor(rng, {kChainLength});
}
/// gemm's right matrix B [768, 768].
inline Tensor w4_gemm_b() {
  SplitMix64 rng(5);
  return uniform_tensor(rng, {kGemmDim, kGemmDim});
}
/// gemm's left matrix A [L, 768].
inline Tensor w4_gemm_a(std::int64_t length) {
  SplitMix64 rng(4000 + static_cast<std::uint64_t>(length));
  return uniform_tensor(rng, {length, kGemmDim});
}
/// sgemm's operands, which workloads.md leaves open (bench/README.md states
/// them): A [n, n] from seed 10000 + n, B [n, n] from seed 20000 + n.
inline Tensor sgemm_a(std::int64_t n) {
  SplitMix64 rng(10000 + static_cast<std::uint64_t>(n));
  return uniform_tensor(rng, {n, n});
}
inline Tensor sgemm_b(std::int64_t n) {
  SplitMix64 rng(20000 + static_cast<std::uint64_t>(n));
  return uniform_tensor(rng, {n, n});
}

/// BERT's products as GEMMs, `A [M, K] · B [N, K]ᵀ` (B transposed: dense's
/// layout, OpenBLAS's CblasTrans), for M = L ∈ {16, 37, 128, 200}: QKV and
/// output projections (K = N = 768), FFN1 (K = 768, N = 3072), FFN2 (K = 3072,
/// N = 768). Operands chosen by the bench: A from seed 30000 + M, B from seed
/// 40000 + N (uniform draws, row-major).
struct DenseShape {
  std::int64_t m, k, n;
};
inline std::vector<DenseShape> dense_shapes() {
  std::vector<DenseShape> all;
  for (std::int64_t m : {16, 37, 128, 200})
    for (auto [k, n] : {std::pair<std::int64_t, std::int64_t>{768, 768}, {768, 3072}, {3072, 768}})
      all.push_back({m, k, n});
  return all;
}
inline std::string to_string(const DenseShape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
}
inline Tensor dense_a(const DenseShape& s) {
  SplitMix64 rng(30000 + static_cast<std::uint64_t>(s.m));
  return uniform_tensor(rng, {s.m, s.k});
}
inline Tensor dense_b(const DenseShape& s) {
  SplitMix64 rng(40000 + static_cast<std::uint64_t>(s.n));
  return uniform_tensor(rng, {s.n, s.k});
}

// --- Checksums -------------------------------------------------------------------------------

/// Σ outputs and Σ|outputs| in double, over f32 tensors.
struct Checksum {
  double sum = 0;
  double abs_sum = 0;
  void add(const Tensor& t) {
    for (float v : t.values<float>()) {
      sum += v;
      abs_sum += std::fabs(v);
    }
  }
};

/// "<workload> <size> checksum=%.10g abssum=%.10g".
inline std::string checksum_line(const char* workload, std::int64_t size, const Checksum& c) {
  char line[160];
  std::snprintf(line, sizeof line, "%s %lld checksum=%.10g abssum=%.10g", workload,
                static_cast<long long>(size), c.sum, c.abs_sum);
  return line;
}

}  // namespace nimble::workloads
