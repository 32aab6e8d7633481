#include "nimble/runtime/tensor.hpp"

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <array>
#include <span>
#include <vector>

#include "support/tensor_matchers.hpp"

using namespace nimble;
using nimble::testing::IsCloseTo;

TEST_CASE("tensors are made zeroed, filled or from host data", "[runtime]") {
  const Tensor z = Tensor::zeros({2, 3}, DType::f32);
  CHECK(z.defined());
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == DType::f32);
  CHECK(z.device() == Device::cpu());
  CHECK(z.nbytes() == 24);
  CHECK(z.byte_offset() == 0);
  CHECK_FALSE(z.is_borrowed());
  for (float v : z.values<float>()) CHECK(v == 0.0f);
  // Every block is aligned for AVX-512.
  CHECK(reinterpret_cast<std::uintptr_t>(z.raw_data()) % 64 == 0);

  const Tensor f = Tensor::full({4}, 7, DType::i32);
  for (std::int32_t v : f.values<std::int32_t>()) CHECK(v == 7);
  CHECK(Tensor::full({2}, 2.5, DType::f16).values<Half>()[1].bits == Half(2.5f).bits);
  CHECK(Tensor::full({1}, 3.0, DType::boolean).values<bool>()[0]);
  CHECK(Tensor::full({1}, -1.75, DType::i8).values<std::int8_t>()[0] == -1);  // truncates

  const Tensor d = Tensor::from_data<float>({2, 2}, {1, 2, 3, 4});
  CHECK(d.at<float>({1, 0}) == 3.0f);
  CHECK(d.element_as_double(3) == 4.0);

  const Tensor s = Tensor::scalar<std::int64_t>(42);
  CHECK(s.rank() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.at<std::int64_t>({}) == 42);

  const Tensor e = Tensor::zeros({0, 3}, DType::f64);
  CHECK(e.numel() == 0);
  CHECK(e.values<double>().empty());
}

TEST_CASE("a tensor made from host data owns a copy", "[runtime]") {
  std::vector<float> host{1, 2, 3};
  Tensor t = Tensor::from_data<float>({3}, host);
  host[0] = 100;
  CHECK(t.at<float>({0}) == 1.0f);
  t.at<float>({2}) = 9;
  CHECK(host[2] == 3.0f);
}

TEST_CASE("borrowed memory is viewed, not copied, and never freed", "[runtime]") {
  std::array<float, 6> host{0, 1, 2, 3, 4, 5};
  const auto before = cpu_allocator().stats();
  {
    Tensor t = Tensor::borrow<float>({2, 3}, host);
    CHECK(t.is_borrowed());
    CHECK(t.raw_data() == host.data());
    t.at<float>({1, 2}) = 50;  // writes through to the host's memory
    CHECK(host[5] == 50.0f);
    host[0] = -1;
    CHECK(t.at<float>({0, 0}) == -1.0f);
    const Tensor view = t.reshape({3, 2});  // views share the borrowed memory
    CHECK(view.is_borrowed());
    CHECK(view.at<float>({2, 1}) == 50.0f);
    const Tensor copy = t.clone();  // a clone owns its memory
    CHECK_FALSE(copy.is_borrowed());
    CHECK(copy.raw_data() != host.data());
  }
  // Nothing of the borrowed block went through nimble's allocator; the clone
  // was returned to it. (AddressSanitizer would report a free of stack memory.)
  const auto after = cpu_allocator().stats();
  CHECK(after.live_bytes == before.live_bytes);
  CHECK(host[5] == 50.0f);

  // Const memory borrows too (for arguments, which nimble only reads).
  const std::vector<std::int32_t> constant{7, 8, 9};
  const Tensor c = Tensor::borrow({3}, std::span<const std::int32_t>(constant));
  CHECK(c.dtype() == DType::i32);
  CHECK(c.is_borrowed());
  CHECK(c.raw_data() == constant.data());
  CHECK(c.at<std::int32_t>({2}) == 9);
}

TEST_CASE("bad borrowed memory is an error", "[runtime]") {
  std::array<float, 4> host{};
  CHECK_NIMBLE_ERROR(Tensor::borrow<float>({2, 3}, host), ErrorKind::invalid_argument,
                     "borrowed memory: shape [2, 3] of f32 needs 6 elements (24 bytes), got 16 "
                     "bytes");
  alignas(8) std::array<std::byte, 16> bytes{};
  CHECK_NIMBLE_ERROR(Tensor::borrow_bytes({1}, DType::f32, bytes.data() + 1, 4),
                     ErrorKind::invalid_argument,
                     fmt::format("borrowed memory: a f32 tensor needs 4-byte alignment, got "
                                 "address {}",
                                 static_cast<void*>(bytes.data() + 1)));
  CHECK_NIMBLE_ERROR(Tensor::borrow_bytes({1}, DType::f32, nullptr, 4),
                     ErrorKind::invalid_argument,
                     "borrowed memory: expected a non-null pointer for 4 bytes, got nullptr");
}

TEST_CASE("wrong data sizes and values are errors", "[runtime]") {
  CHECK_NIMBLE_ERROR(Tensor::from_data<float>({2, 2}, {1, 2, 3}), ErrorKind::invalid_argument,
                     "tensor data: shape [2, 2] of f32 needs 4 elements (16 bytes), got 12 bytes");
  CHECK_NIMBLE_ERROR(Tensor::full({2}, 1e10, DType::i32), ErrorKind::invalid_argument,
                     "value 10000000000 is not representable as i32");
  CHECK_NIMBLE_ERROR(Tensor::full({2}, std::nan(""), DType::i64), ErrorKind::invalid_argument,
                     "value nan is not representable as i64");
  CHECK_NIMBLE_ERROR(Tensor::empty({std::int64_t{1} << 60, 4}, DType::f32),
                     ErrorKind::invalid_argument,
                     "tensor of shape [1152921504606846976, 4] and dtype f32 is too large");
}

TEST_CASE("element access checks dtype, rank and bounds", "[runtime]") {
  Tensor t = Tensor::zeros({2, 3}, DType::f32);
  CHECK_NIMBLE_ERROR(t.data<std::int32_t>(), ErrorKind::type_error,
                     "Tensor::data<i32>: expected a i32 tensor, got dtype f32");
  CHECK_NIMBLE_ERROR(t.at<double>({0, 0}), ErrorKind::type_error,
                     "Tensor::at<f64>: expected a f64 tensor, got dtype f32");
  CHECK_NIMBLE_ERROR(t.at<float>({0}), ErrorKind::out_of_range,
                     "Tensor::at: expected 2 indices for shape [2, 3], got 1");
  CHECK_NIMBLE_ERROR(t.at<float>({1, 3}), ErrorKind::out_of_range,
                     "Tensor::at: index 3 is out of range for dim 1 of size 3 (shape [2, 3])");
  CHECK_NIMBLE_ERROR(t.at<float>({-1, 0}), ErrorKind::out_of_range,
                     "Tensor::at: index -1 is out of range for dim 0 of size 2 (shape [2, 3])");
  CHECK_NIMBLE_ERROR(t.element_as_double(6), ErrorKind::out_of_range,
                     "Tensor::element_as_double: flat index 6 is out of range for 6 elements");
  const Tensor undefined;
  CHECK_FALSE(undefined.defined());
  CHECK_NIMBLE_ERROR(undefined.data<float>(), ErrorKind::invalid_argument,
                     "Tensor::data<f32>: the tensor is undefined (default-constructed)");
  CHECK_NIMBLE_ERROR(undefined.reshape({1}), ErrorKind::invalid_argument,
                     "Tensor::reshape: the tensor is undefined");
}

TEST_CASE("reshape views share storage; clone copies", "[runtime]") {
  Tensor t = Tensor::from_data<std::int32_t>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor v = t.reshape({3, 2});
  CHECK(v.storage() == t.storage());
  CHECK(t.storage()->use_count() == 2);
  v.at<std::int32_t>({2, 1}) = 50;
  CHECK(t.at<std::int32_t>({1, 2}) == 50);
  CHECK_NIMBLE_ERROR(t.reshape({4}), ErrorKind::invalid_argument,
                     "Tensor::reshape: cannot view shape [2, 3] (6 elements) as [4] (4 elements)");
  Tensor c = t.clone();
  c.at<std::int32_t>({0, 0}) = -7;
  CHECK(t.at<std::int32_t>({0, 0}) == 0);
  CHECK_THAT(c.reshape({6}), IsCloseTo(Tensor::from_data<std::int32_t>({6}, {-7, 1, 2, 3, 4, 50})));
}

TEST_CASE("views of a storage are bounds-checked", "[runtime]") {
  const Ref<Storage> storage = Storage::allocate(64, Device::cpu());
  const Tensor second_half = Tensor::view_of(storage, {8}, DType::f32, 32);
  CHECK(second_half.byte_offset() == 32);
  CHECK(second_half.raw_data() == static_cast<std::byte*>(storage->data()) + 32);
  CHECK_NIMBLE_ERROR(Tensor::view_of(storage, {9}, DType::f32, 32), ErrorKind::out_of_range,
                     "tensor view: 36 bytes at offset 32 do not fit in a storage of 64 bytes");
  CHECK_NIMBLE_ERROR(Tensor::view_of(storage, {1}, DType::f32, 66), ErrorKind::invalid_argument,
                     "tensor view: byte offset 66 is not a multiple of the f32 element size 4");
  CHECK_NIMBLE_ERROR(Tensor::view_of(storage, {1}, DType::f32, 128), ErrorKind::out_of_range,
                     "tensor view: 4 bytes at offset 128 do not fit in a storage of 64 bytes");
  CHECK_NIMBLE_ERROR(Tensor::view_of({}, {1}, DType::f32), ErrorKind::invalid_argument,
                     "tensor view: expected a storage, got null");
}

namespace {

// Memory the host cannot read, from an allocator without copies of its own.
class OpaqueMemory final : public Allocator {
 public:
  void* allocate(std::size_t nbytes) override { return nbytes == 0 ? nullptr : cpu_allocator().allocate(nbytes); }
  void deallocate(void* p, std::size_t nbytes) noexcept override { cpu_allocator().deallocate(p, nbytes); }
  [[nodiscard]] AllocatorStats stats() const noexcept override { return {}; }
  [[nodiscard]] Device device() const noexcept override { return Device::cuda(6); }
  [[nodiscard]] bool host_accessible() const noexcept override { return false; }
};

}  // namespace

TEST_CASE("a copy to memory whose allocator has no copies is refused, not a memcpy", "[runtime]") {
  OpaqueMemory memory;
  register_allocator(memory);
  const Tensor x = Tensor::from_data<float>({2}, {1, 2});
  CHECK_NIMBLE_ERROR(x.to(Device::cuda(6)), ErrorKind::not_supported,
                     "not supported: copying to or from cuda:6: its allocator has no copies");
  unregister_allocator(Device::cuda(6));
}

TEST_CASE("a device without an allocator is reported, not faked", "[runtime]") {
  // No driver here; on a machine with one, not that many GPUs.
  CHECK_NIMBLE_ERROR_CONTAINS(Tensor::zeros({2}, DType::f32, Device::cuda(99)), ErrorKind::not_supported,
                              "memory on cuda:99: not supported: ");
}
