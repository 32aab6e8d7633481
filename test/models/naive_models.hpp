// Second, naive implementations of W1..W3 (plain loops, double accumulation),
// independent of nimble's ops: what the interpreter's results are checked
// against in models_test.cpp.
#pragma once

#include <cmath>
#include <vector>

#include "models/workloads.hpp"

namespace nimble::naive {

using Vec = std::vector<double>;

inline Vec row(const Tensor& t, std::int64_t r) {
  const std::int64_t n = t.dim(-1);
  const float* p = t.data<float>() + r * n;
  return Vec(p, p + n);
}

/// W x + b for W [out, in] (a PyTorch Linear).
inline Vec linear(const Vec& x, const Tensor& w, const Tensor& b) {
  const std::int64_t out = w.dim(0), in = w.dim(1);
  const float* wp = w.data<float>();
  Vec y(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    double acc = b.data<float>()[o];
    for (std::int64_t i = 0; i < in; ++i) acc += wp[o * in + i] * x[static_cast<std::size_t>(i)];
    y[static_cast<std::size_t>(o)] = acc;
  }
  return y;
}

inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

inline Vec slice(const Vec& v, std::size_t begin, std::size_t size) {
  return Vec(v.begin() + static_cast<std::ptrdiff_t>(begin),
             v.begin() + static_cast<std::ptrdiff_t>(begin + size));
}

inline Tensor to_tensor(const std::vector<Vec>& rows, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  float* p = t.data<float>();
  for (const Vec& r : rows)
    for (double v : r) *p++ = static_cast<float>(v);
  return t;
}

/// W1: outputs [L, 1, 512].
inline Tensor lstm(const Tensor& xs, const std::vector<Tensor>& w) {
  const std::size_t H = 512;
  Vec h[2] = {Vec(H), Vec(H)}, c[2] = {Vec(H), Vec(H)};
  std::vector<Vec> out;
  for (std::int64_t t = 0; t < xs.dim(0); ++t) {
    Vec x = row(xs, t);
    for (int l = 0; l < 2; ++l) {
      const Vec a = linear(x, w[4 * l], w[4 * l + 2]);
      const Vec b = linear(h[l], w[4 * l + 1], w[4 * l + 3]);
      for (std::size_t j = 0; j < H; ++j) {
        const double i = sigmoid(a[j] + b[j]), f = sigmoid(a[H + j] + b[H + j]);
        const double g = std::tanh(a[2 * H + j] + b[2 * H + j]);
        const double o = sigmoid(a[3 * H + j] + b[3 * H + j]);
        c[l][j] = f * c[l][j] + i * g;
        h[l][j] = o * std::tanh(c[l][j]);
      }
      x = h[l];
    }
    out.push_back(h[1]);
  }
  return to_tensor(out, {xs.dim(0), 1, 512});
}

/// W2: the root's (h, c), 150 each.
inline std::pair<Vec, Vec> tree_lstm(const workloads::TreeShape& t, const Tensor& x,
                                     const std::vector<Tensor>& w) {
  const std::size_t M = 150;
  Vec h(M), c(M);
  if (t.leaf >= 0) {
    const Vec g = linear(row(x, t.leaf), w[0], w[1]);
    for (std::size_t j = 0; j < M; ++j) {
      c[j] = sigmoid(g[j]) * std::tanh(g[2 * M + j]);
      h[j] = sigmoid(g[M + j]) * std::tanh(c[j]);
    }
    return {h, c};
  }
  const auto [hl, cl] = tree_lstm(*t.left, x, w);
  const auto [hr, cr] = tree_lstm(*t.right, x, w);
  Vec both = hl;
  both.insert(both.end(), hr.begin(), hr.end());
  const Vec g = linear(both, w[2], w[3]);
  for (std::size_t j = 0; j < M; ++j) {
    c[j] = sigmoid(g[j]) * std::tanh(g[4 * M + j]) + sigmoid(g[M + j]) * cl[j] +
           sigmoid(g[2 * M + j]) * cr[j];
    h[j] = sigmoid(g[3 * M + j]) * std::tanh(c[j]);
  }
  return {h, c};
}

inline Vec layer_norm(const Vec& x, const Tensor& gamma, const Tensor& beta) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  Vec y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    y[i] = (x[i] - mean) / std::sqrt(var + 1e-12) * gamma.data<float>()[i] + beta.data<float>()[i];
  return y;
}

/// W3 layers over x [L, 768] (weights: one 16-vector per layer).
inline Tensor bert(const Tensor& x0, const std::vector<std::vector<Tensor>>& layers) {
  const std::int64_t L = x0.dim(0);
  std::vector<Vec> x;
  for (std::int64_t r = 0; r < L; ++r) x.push_back(row(x0, r));
  for (const auto& w : layers) {
    std::vector<Vec> q, k, v, ctx(static_cast<std::size_t>(L), Vec(768));
    for (const Vec& r : x) {
      q.push_back(linear(r, w[0], w[1]));
      k.push_back(linear(r, w[2], w[3]));
      v.push_back(linear(r, w[4], w[5]));
    }
    for (std::size_t h = 0; h < 12; ++h) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(L); ++i) {
        Vec p(static_cast<std::size_t>(L));
        double max = -INFINITY, total = 0;
        for (std::size_t j = 0; j < p.size(); ++j) {
          double s = 0;
          for (std::size_t d = 0; d < 64; ++d) s += q[i][h * 64 + d] * k[j][h * 64 + d];
          p[j] = s * 0.125;
          max = std::max(max, p[j]);
        }
        for (double& e : p) total += (e = std::exp(e - max));
        for (std::size_t d = 0; d < 64; ++d) {
          double acc = 0;
          for (std::size_t j = 0; j < p.size(); ++j) acc += p[j] / total * v[j][h * 64 + d];
          ctx[i][h * 64 + d] = acc;
        }
      }
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
      Vec a = linear(ctx[i], w[6], w[7]);
      for (std::size_t d = 0; d < 768; ++d) a[d] += x[i][d];
      const Vec x1 = layer_norm(a, w[8], w[9]);
      Vec f = linear(x1, w[10], w[11]);
      for (double& e : f) e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0)));
      Vec y = linear(f, w[12], w[13]);
      for (std::size_t d = 0; d < 768; ++d) y[d] += x1[d];
      x[i] = layer_norm(y, w[14], w[15]);
    }
  }
  return to_tensor(x, {L, 768});
}

}  // namespace nimble::naive
