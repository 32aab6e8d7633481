// The `cpp` rows of elemwise_bench: plain C++ loops over f32 arrays, in their
// own translation unit (elemwise_loops.cpp, built with -O3 -march=native and
// no -ffast-math) so that the compiler cannot specialize them to the bench's
// data. Each writes out[i] for i in [0, n); `out` may not alias the inputs.
#pragma once

#include <cstdint>

namespace nimble::bench {

/// out[i] = x[i] + y[i]
void add_loop(const float* x, const float* y, float* out, std::int64_t n);
/// out[i] = 1 / (1 + exp(-x[i]))
void sigmoid_loop(const float* x, float* out, std::int64_t n);
/// out[i] = 0.5 x[i] (1 + erf(x[i] / √2))
void gelu_loop(const float* x, float* out, std::int64_t n);

}  // namespace nimble::bench
