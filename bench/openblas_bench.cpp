// The "openblas" rows of the bench: GEMM and SGEMM through OpenBLAS's
// cblas_sgemm, on the same operands and in the same layout as every other
// row (row-major, B not transposed: workloads.md's plain product A · B; the
// "MxKxN" rows with B transposed, as dense's weights).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cmath>
#include <memory>
#include <vector>

#include "harness.hpp"

namespace nimble::bench {
namespace {

Case sgemm_case(Tensor a, Tensor b, bool b_transposed = false) {
  struct State {
    Tensor a, b;
    std::vector<float> c;
  };
  const auto m = static_cast<int>(a.dim(0)), k = static_cast<int>(a.dim(1)),
             n = static_cast<int>(b.dim(b_transposed ? 0 : 1));
  auto s = std::make_shared<State>(State{std::move(a), std::move(b), {}});
  s->c.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(n));
  return {[s, m, k, n, b_transposed] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                        s->a.data<float>(), k, s->b.data<float>(), b_transposed ? k : n, 0.0f, s->c.data(), n);
          },
          [s] { return checksum_of(s->c.data(), static_cast<std::int64_t>(s->c.size())); }};
}

std::vector<CaseSpec> cases() {
  std::vector<CaseSpec> all;
  const double d = static_cast<double>(workloads::kGemmDim);
  for (std::int64_t l : workloads::kGemmSizes)
    all.push_back({"GEMM", "openblas", l, 2.0 * static_cast<double>(l) * d * d,
                   [=] { return sgemm_case(workloads::w4_gemm_a(l), workloads::w4_gemm_b()); }});
  for (std::int64_t n : workloads::kSgemmSizes)
    all.push_back({"SGEMM", "openblas", n, 2.0 * std::pow(static_cast<double>(n), 3),
                   [=] { return sgemm_case(workloads::sgemm_a(n), workloads::sgemm_b(n)); }});
  for (const workloads::DenseShape& shape : workloads::dense_shapes())
    all.push_back({"GEMM", "openblas", shape.m,
                   2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.k) * static_cast<double>(shape.n),
                   [=] { return sgemm_case(workloads::dense_a(shape), workloads::dense_b(shape), true); },
                   workloads::to_string(shape)});
  return all;
}

}  // namespace
}  // namespace nimble::bench

int main(int argc, char** argv) {
  using namespace nimble::bench;
  return bench_main(argc, argv,
                    {.cases = cases(),
                     .set_threads = [](int n) { openblas_set_num_threads(n); },
                     .reports_engine_stats = false,
                     .add_context = nullptr});
}
