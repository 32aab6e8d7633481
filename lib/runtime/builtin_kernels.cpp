#include "runtime/builtin_kernels.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "runtime/copy.hpp"
#include "support/check.hpp"

namespace nimble::runtime {

namespace {

// Calls f(element, index) on each element of a List value, first element
// first, walking it iteratively (no recursion: a list may be long); returns
// the count.
template <class F>
std::size_t for_each_element(const Value& list, F&& f) {
  std::size_t count = 0;
  for (const Value* node = &list;;) {
    const std::uint32_t tag = node->tag();
    if (tag == 0 && node->fields().empty()) return count;
    if (tag != 1 || node->fields().size() != 2)
      throw_error(ErrorKind::type_error,
                  "list must be a List value (Nil, or Cons with 2 fields), got constructor {} "
                  "with {} fields",
                  tag, node->fields().size());
    f((*node)[0].tensor(), count++);
    node = &(*node)[1];
  }
}

struct Stacked {
  const Tensor* first = nullptr;
  std::size_t count = 0;
  std::size_t axis = 0;
};

// Checks the elements agree; the first, the count and the normalized axis.
Stacked check_stack(const Value& list, std::int64_t axis) {
  Stacked s;
  s.count = for_each_element(list, [&](const Tensor& t, std::size_t i) {
    if (s.first == nullptr) {
      s.first = &t;
      return;
    }
    if (t.dtype() != s.first->dtype())
      throw_error(ErrorKind::type_error, "element {} is {} but element 0 is {}", i, to_string(t.dtype()),
                  to_string(s.first->dtype()));
    if (t.shape() != s.first->shape())
      throw_error(ErrorKind::invalid_argument, "element {} has shape {} but element 0 has {}", i,
                  to_string(t.shape()), to_string(s.first->shape()));
  });
  if (s.first == nullptr)
    throw_error(ErrorKind::invalid_argument, "cannot stack an empty list: the element shape is unknown");
  const auto rank = static_cast<std::int64_t>(s.first->rank()) + 1;
  if (axis < -rank || axis >= rank)
    throw_error(ErrorKind::out_of_range, "axis {} is out of range for a result of rank {}", axis, rank);
  s.axis = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
  return s;
}

// No heap array for the dims (up to Shape's inline rank): stack runs once
// per inference of a model that collects its steps, and again as its own
// shape function; a warm inference makes no system allocation.
Shape shape_of(const Stacked& s) {
  const std::size_t rank = s.first->rank() + 1;
  std::array<std::int64_t, Shape::kInlineRank + 1> inline_dims{};
  std::vector<std::int64_t> heap_dims;
  std::span<std::int64_t> dims(inline_dims.data(), rank);
  if (rank > inline_dims.size()) {
    heap_dims.resize(rank);
    dims = heap_dims;
  }
  for (std::size_t d = 0, k = 0; d < rank; ++d)
    dims[d] = d == s.axis ? static_cast<std::int64_t>(s.count) : s.first->shape()[k++];
  return Shape(std::span<const std::int64_t>(dims.data(), rank));
}

// stack, or its shape function, writing into the VM's output.
class StackKernel final : public Kernel {
 public:
  StackKernel(PrimitiveKind kind, std::int64_t axis) : kind_(kind), axis_(axis) {}

  void run(TensorRefs, TensorRefs) const override {
    throw_error(ErrorKind::type_error, "stack: list must be a List value, got tensors");
  }

  void run_values(std::span<const Value> inputs, TensorRefs outputs) const override {
    if (inputs.size() != 1 || outputs.size() != 1)
      throw_error(ErrorKind::invalid_argument, "stack: expected 1 input and 1 output, got {} and {}",
                  inputs.size(), outputs.size());
    Tensor out = *outputs[0];
    try {
      if (kind_ == PrimitiveKind::shape_function) {
        const Shape shape = stacked_shape(inputs[0], axis_);
        if (out.dtype() != DType::i64 || out.numel() != static_cast<std::int64_t>(shape.rank()))
          throw_error(ErrorKind::runtime_error, "the shape function gave rank {}, its output is {}{}",
                      shape.rank(), to_string(out.dtype()), to_string(out.shape()));
        std::copy(shape.begin(), shape.end(), out.data<std::int64_t>());
        return;
      }
      const Tensor result = stack_list(inputs[0], axis_);
      if (result.dtype() != out.dtype() || result.shape() != out.shape())
        throw_error(ErrorKind::runtime_error, "the kernel made {}{} but its output was allocated as {}{}",
                    to_string(result.dtype()), to_string(result.shape()), to_string(out.dtype()),
                    to_string(out.shape()));
      if (result.nbytes() != 0) std::memcpy(out.raw_data(), result.raw_data(), result.nbytes());
    } catch (Error& e) {
      throw e.with_context("stack");
    }
  }

 private:
  PrimitiveKind kind_;
  std::int64_t axis_;
};

}  // namespace

Shape stacked_shape(const Value& list, std::int64_t axis) { return shape_of(check_stack(list, axis)); }

Tensor stack_list(const Value& list, std::int64_t axis) {
  const Stacked s = check_stack(list, axis);
  Tensor out = Tensor::empty(shape_of(s), s.first->dtype());
  if (out.numel() == 0) return out;
  // Element e's block b (of `inner` elements: the dims after the axis) goes
  // to (b * count + e) * inner.
  std::size_t inner = dtype_size(s.first->dtype());
  for (std::size_t d = s.axis; d < s.first->rank(); ++d) inner *= static_cast<std::size_t>(s.first->shape()[d]);
  std::size_t outer = 1;
  for (std::size_t d = 0; d < s.axis; ++d) outer *= static_cast<std::size_t>(s.first->shape()[d]);
  // The elements may be on a GPU (a program placed there stacks its steps
  // on the CPU): copied wherever they are.
  std::byte* o = address_of(out);
  for_each_element(list, [&](const Tensor& t, std::size_t e) {
    const std::byte* in = address_of(t);
    for (std::size_t b = 0; b < outer; ++b)
      copy_bytes(*out.storage(), o + (b * s.count + e) * inner, *t.storage(), in + b * inner, inner);
  });
  return out;
}

Ref<Kernel> make_builtin_kernel(std::string_view op, PrimitiveKind kind, std::span<const std::int64_t> attrs) {
  if (op == "stack" && attrs.size() == 1) return make_ref<StackKernel>(kind, attrs[0]);
  return {};
}

}  // namespace nimble::runtime
