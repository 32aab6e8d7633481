#include "elemwise_loops.hpp"

#include <cmath>

namespace nimble::bench {

void add_loop(const float* __restrict x, const float* __restrict y, float* __restrict out,
              std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

void sigmoid_loop(const float* __restrict x, float* __restrict out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

void gelu_loop(const float* __restrict x, float* __restrict out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678f));
}

}  // namespace nimble::bench
