// nimble's demo (script/demo). For now it shows the runtime core: the host
// target the JIT will compile for, tensors of several dtypes, host memory
// borrowed without a copy, the pooled allocator at work, and an error that
// says what was expected. Later it becomes the LSTM over sentences of varying
// length.
#include <nimble/nimble.hpp>

#include <numeric>
#include <vector>

int main() {
  using namespace nimble;
  const HostTarget& target = host_target();
  fmt::print("nimble {} (LLVM {}) on {}, cpu {}, AVX-512: {}\n\n", kVersion, llvm_version(),
             target.triple, target.cpu, target.has("avx512f") ? "yes" : "no");

  // Sentences of varying length: one [L, 300] embedding matrix each.
  for (std::int64_t length : {3, 17, 64}) {
    Tensor sentence = Tensor::zeros({length, 300}, DType::f32);
    for (std::int64_t i = 0; i < length; ++i) sentence.at<float>({i, 0}) = static_cast<float>(i);
    fmt::print("sentence of {:>2} words: shape {}, {} bytes\n", length, sentence.shape(),
               sentence.nbytes());
  }
  const AllocatorStats warm_before = cpu_allocator().stats();
  for (std::int64_t length : {3, 17, 64}) (void)Tensor::zeros({length, 300}, DType::f32);
  const AllocatorStats warm_after = cpu_allocator().stats();
  fmt::print("again with the same lengths: {} allocations, {} from the pool, {} from the system\n\n",
             warm_after.allocations - warm_before.allocations,
             warm_after.pool_hits - warm_before.pool_hits,
             warm_after.system_allocations - warm_before.system_allocations);

  std::vector<std::int32_t> ids(12);
  std::iota(ids.begin(), ids.end(), 100);
  const Tensor borrowed = Tensor::borrow<std::int32_t>({3, 4}, ids);
  fmt::print("token ids borrowed from the host (no copy: {}):\n{}\n\n",
             borrowed.raw_data() == ids.data(), borrowed);
  fmt::print("{}\n\n", Tensor::full({2, 2}, 0.1, DType::bf16));

  try {
    (void)Tensor::from_data<float>({2, 3}, {1, 2, 3, 4});
  } catch (const Error& e) {
    fmt::print("a bad input gives nimble::Error ({}): {}\n", to_string(e.kind()), e.what());
  }
  return 0;
}
