// The "handwritten" rows of the bench: what a careful C++ programmer writes
// for each workload without a framework — Eigen for the products (its OpenMP
// parallel GEMM for threads), plain loops and recursion for the rest, buffers
// allocated once where the model allows, compiled for the host CPU. No nimble
// runs here: only the generator of examples/models/workloads.hpp is used, so
// that the data is the same as every other row's. The line without framework
// overhead.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <Eigen/Core>

#include <cmath>
#include <memory>
#include <utility>

#include "harness.hpp"

namespace nimble::bench {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Row = Eigen::RowVectorXf;

Matrix to_matrix(const Tensor& t) {
  const std::int64_t cols = t.dim(static_cast<std::int64_t>(t.rank()) - 1);
  return Eigen::Map<const Matrix>(t.data<float>(), t.numel() / cols, cols);
}
Row to_row(const Tensor& t) {
  return Eigen::Map<const Row>(t.data<float>(), t.numel());
}

template <class Derived>
workloads::Checksum checksum_of(const Eigen::PlainObjectBase<Derived>& m) {
  return bench::checksum_of(m.data(), m.size());
}

template <class A>
auto sigmoid(const A& x) {
  return (1.0f + (-x).exp()).inverse();
}

// --- W1: two LSTM layers, one after the other ------------------------------------------------
// Per layer the input projection of every step is one GEMM; the recurrence is
// a GEMV and a few elementwise loops per step.
class Lstm {
 public:
  explicit Lstm(const std::vector<Tensor>& w) {
    for (int l = 0; l < 2; ++l) {
      layers_[l].w_ih = to_matrix(w[4 * l]);
      layers_[l].w_hh = to_matrix(w[4 * l + 1]);
      layers_[l].b_ih = to_row(w[4 * l + 2]);
      layers_[l].b_hh = to_row(w[4 * l + 3]);
    }
  }

  // x [L, 300] -> the top layer's h for every step, [L, 512].
  void run(const Matrix& x, Matrix& out) {
    const Eigen::Index steps = x.rows(), hidden = 512;
    const Matrix* in = &x;
    for (Layer& layer : layers_) {
      projected_.noalias() = *in * layer.w_ih.transpose();
      projected_.rowwise() += layer.b_ih;
      Matrix& result = &layer == &layers_[1] ? out : between_;
      result.resize(steps, hidden);
      h_.setZero(hidden);
      c_.setZero(hidden);
      for (Eigen::Index t = 0; t < steps; ++t) {
        gates_.noalias() = h_ * layer.w_hh.transpose();
        gates_ += layer.b_hh;
        gates_ += projected_.row(t);
        const auto g = gates_.array();
        c_.array() = sigmoid(g.segment(hidden, hidden)) * c_.array() +
                     sigmoid(g.segment(0, hidden)) * g.segment(2 * hidden, hidden).tanh();
        h_.array() = sigmoid(g.segment(3 * hidden, hidden)) * c_.array().tanh();
        result.row(t) = h_;
      }
      in = &between_;
    }
  }

 private:
  struct Layer {
    Matrix w_ih, w_hh;
    Row b_ih, b_hh;
  };
  Layer layers_[2];
  Matrix projected_, between_;
  Row gates_, h_, c_;
};

Case w1_case(std::int64_t length) {
  static const std::vector<Tensor> weights = workloads::w1_weights();
  struct State {
    Lstm lstm{weights};
    Matrix x, out;
  };
  auto s = std::make_shared<State>();
  s->x = to_matrix(workloads::w1_input(length));
  return {[s] { s->lstm.run(s->x, s->out); }, [s] { return checksum_of(s->out); }};
}

// --- W2: the Tree-LSTM by recursion ----------------------------------------------------------
// The leaves' input projections are one GEMM; each internal node is a GEMV.
class TreeLstm {
 public:
  explicit TreeLstm(const std::vector<Tensor>& w)
      : wx_(to_matrix(w[0])), bx_(to_row(w[1])), u_(to_matrix(w[2])), bu_(to_row(w[3])) {}

  struct State {
    Row h, c;
  };

  State run(const workloads::TreeShape& tree, const Matrix& leaves) {
    projected_.noalias() = leaves * wx_.transpose();
    projected_.rowwise() += bx_;
    return node(tree);
  }

 private:
  static constexpr Eigen::Index kM = 150;

  State node(const workloads::TreeShape& t) {
    State s;
    if (t.leaf >= 0) {
      const auto p = projected_.row(t.leaf).array();
      s.c = sigmoid(p.segment(0, kM)) * p.segment(2 * kM, kM).tanh();
      s.h = sigmoid(p.segment(kM, kM)) * s.c.array().tanh();
      return s;
    }
    const State l = node(*t.left), r = node(*t.right);
    Row hh(2 * kM);
    hh << l.h, r.h;
    Row gates = bu_;
    gates.noalias() += hh * u_.transpose();
    const auto g = gates.array();
    s.c = sigmoid(g.segment(0, kM)) * g.segment(4 * kM, kM).tanh() +
          sigmoid(g.segment(kM, kM)) * l.c.array() + sigmoid(g.segment(2 * kM, kM)) * r.c.array();
    s.h = sigmoid(g.segment(3 * kM, kM)) * s.c.array().tanh();
    return s;
  }

  Matrix wx_;
  Row bx_;
  Matrix u_;
  Row bu_;
  Matrix projected_;
};

Case w2_case(std::int64_t leaves) {
  static const std::vector<Tensor> weights = workloads::w2_weights();
  struct State {
    TreeLstm model{weights};
    std::unique_ptr<workloads::TreeShape> tree;
    Matrix x;
    TreeLstm::State out;
  };
  auto s = std::make_shared<State>();
  s->tree = workloads::w2_tree(leaves);
  s->x = to_matrix(workloads::w2_leaves(leaves));
  return {[s] { s->out = s->model.run(*s->tree, s->x); },
          [s] {
            workloads::Checksum c = checksum_of(s->out.h);
            const workloads::Checksum cc = checksum_of(s->out.c);
            c.sum += cc.sum;
            c.abs_sum += cc.abs_sum;
            return c;
          }};
}

// --- W3: BERT encoder layers ------------------------------------------------------------------
struct BertLayer {
  Matrix wq, wk, wv, wo, w1, w2;
  Row bq, bk, bv, bo, ln1_gamma, ln1_beta, b1, b2, ln2_gamma, ln2_beta;

  explicit BertLayer(const std::vector<Tensor>& w)
      : wq(to_matrix(w[0])),
        wk(to_matrix(w[2])),
        wv(to_matrix(w[4])),
        wo(to_matrix(w[6])),
        w1(to_matrix(w[10])),
        w2(to_matrix(w[12])),
        bq(to_row(w[1])),
        bk(to_row(w[3])),
        bv(to_row(w[5])),
        bo(to_row(w[7])),
        ln1_gamma(to_row(w[8])),
        ln1_beta(to_row(w[9])),
        b1(to_row(w[11])),
        b2(to_row(w[13])),
        ln2_gamma(to_row(w[14])),
        ln2_beta(to_row(w[15])) {}
};

// y = x Wᵀ + b
void linear(const Matrix& x, const Matrix& w, const Row& b, Matrix& y) {
  y.noalias() = x * w.transpose();
  y.rowwise() += b;
}

// Each row: (x - mean) / sqrt(var + eps) * gamma + beta.
void layer_norm(Matrix& x, const Row& gamma, const Row& beta) {
  const float n = static_cast<float>(x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    auto row = x.row(r).array();
    const float mean = row.sum() / n;
    const float var = (row - mean).square().sum() / n;
    row = (row - mean) * (1.0f / std::sqrt(var + 1e-12f)) * gamma.array() + beta.array();
  }
}

class Bert {
 public:
  explicit Bert(const std::vector<std::vector<Tensor>>& weights) {
    for (const auto& w : weights) layers_.emplace_back(w);
  }

  void run(Matrix& x) {
    constexpr Eigen::Index kHeads = 12, kHeadDim = 64;
    for (const BertLayer& l : layers_) {
      linear(x, l.wq, l.bq, q_);
      linear(x, l.wk, l.bk, k_);
      linear(x, l.wv, l.bv, v_);
      ctx_.resize(x.rows(), x.cols());
      for (Eigen::Index h = 0; h < kHeads; ++h) {
        const auto cols = Eigen::seqN(h * kHeadDim, kHeadDim);
        scores_.noalias() = q_(Eigen::all, cols) * k_(Eigen::all, cols).transpose();
        scores_ *= 0.125f;
        for (Eigen::Index r = 0; r < scores_.rows(); ++r) {  // softmax of each row
          auto row = scores_.row(r).array();
          row = (row - row.maxCoeff()).exp();
          row /= row.sum();
        }
        ctx_(Eigen::all, cols).noalias() = scores_ * v_(Eigen::all, cols);
      }
      linear(ctx_, l.wo, l.bo, attn_);
      x += attn_;
      layer_norm(x, l.ln1_gamma, l.ln1_beta);
      linear(x, l.w1, l.b1, ffn_);
      ffn_ = ffn_.unaryExpr([](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678f)); });
      linear(ffn_, l.w2, l.b2, attn_);
      x += attn_;
      layer_norm(x, l.ln2_gamma, l.ln2_beta);
    }
  }

 private:
  std::vector<BertLayer> layers_;
  Matrix q_, k_, v_, scores_, ctx_, attn_, ffn_;
};

Case w3_case(std::int64_t length) {
  static const auto bert = std::make_shared<Bert>(workloads::w3_weights());
  struct State {
    Matrix x, out;
  };
  auto s = std::make_shared<State>();
  s->x = to_matrix(workloads::w3_input(length));
  return {[s] {
            s->out = s->x;
            bert->run(s->out);
          },
          [s] { return checksum_of(s->out); }};
}

// --- W4 -----------------------------------------------------------------------------------------
Case chain_case() {
  struct State {
    Row x, out;
  };
  auto s = std::make_shared<State>();
  s->x = to_row(workloads::w4_chain_input());
  s->out.resize(s->x.size());
  return {[s] {
            for (Eigen::Index j = 0; j < s->x.size(); ++j) {
              float v = s->x[j];
              for (int i = 0; i < workloads::kChainPairs; ++i) {
                v = v * workloads::kChainScale;
                v = v + workloads::kChainShift;
              }
              s->out[j] = v;
            }
          },
          [s] { return checksum_of(s->out); }};
}

Case matmul_case(Tensor a, Tensor b) {
  struct State {
    Matrix a, b, c;
  };
  auto s = std::make_shared<State>(State{to_matrix(a), to_matrix(b), {}});
  s->c.resize(s->a.rows(), s->b.cols());
  return {[s] { s->c.noalias() = s->a * s->b; }, [s] { return checksum_of(s->c); }};
}

std::vector<CaseSpec> cases() {
  std::vector<CaseSpec> all;
  const std::string impl = "handwritten";
  for (std::int64_t l : workloads::kW1Sizes)
    all.push_back({"W1", impl, l, 0, [=] { return w1_case(l); }});
  for (std::int64_t n : workloads::kW2Sizes)
    all.push_back({"W2", impl, n, 0, [=] { return w2_case(n); }});
  for (std::int64_t l : workloads::kW3Sizes)
    all.push_back({"W3", impl, l, 0, [=] { return w3_case(l); }});
  all.push_back({"CHAIN1000", impl, workloads::kChainLength, 0, [] { return chain_case(); }});
  const double d = static_cast<double>(workloads::kGemmDim);
  for (std::int64_t l : workloads::kGemmSizes)
    all.push_back({"GEMM", impl, l, 2.0 * static_cast<double>(l) * d * d,
                   [=] { return matmul_case(workloads::w4_gemm_a(l), workloads::w4_gemm_b()); }});
  for (std::int64_t n : workloads::kSgemmSizes)
    all.push_back({"SGEMM", impl, n, 2.0 * std::pow(static_cast<double>(n), 3),
                   [=] { return matmul_case(workloads::sgemm_a(n), workloads::sgemm_b(n)); }});
  return all;
}

}  // namespace
}  // namespace nimble::bench

int main(int argc, char** argv) {
  using namespace nimble::bench;
  return bench_main(
      argc, argv,
      {.cases = cases(),
       .set_threads =
           [](int n) {
             omp_set_num_threads(n);
             Eigen::setNbThreads(n);
           },
       .reports_engine_stats = false,
       .add_context =
           [] {
             benchmark::AddCustomContext("eigen_version",
                                         std::to_string(EIGEN_WORLD_VERSION) + "." +
                                             std::to_string(EIGEN_MAJOR_VERSION) + "." +
                                             std::to_string(EIGEN_MINOR_VERSION));
             benchmark::AddCustomContext("eigen_threads", std::to_string(Eigen::nbThreads()));
             benchmark::AddCustomContext("eigen_simd", Eigen::SimdInstructionSetsInUse());
           }});
}
