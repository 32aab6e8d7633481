// Exact equality of runtime values, for tests where the same kernels run on
// two engines: tensors bit for bit (dtype, shape, bytes), tuples and ADT
// values field by field; and closeness, where the kernels differ.
#pragma once

#include <cstring>

#include "nimble/runtime/tensor_compare.hpp"
#include "nimble/runtime/value.hpp"

namespace nimble::testing {

/// Whether `a` and `b` have the same structure (tuples, ADT tags, field
/// counts) and `same_tensor` holds for each pair of tensors in it.
template <class SameTensor>
bool same_structure(const Value& a, const Value& b, const SameTensor& same_tensor) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::tensor: return same_tensor(a.tensor(), b.tensor());
    case Value::Kind::adt:
      if (a.tag() != b.tag()) return false;
      [[fallthrough]];
    case Value::Kind::tuple: {
      if (a.fields().size() != b.fields().size()) return false;
      for (std::size_t i = 0; i < a.fields().size(); ++i)
        if (!same_structure(a[i], b[i], same_tensor)) return false;
      return true;
    }
    case Value::Kind::object: return false;
  }
  return false;
}

inline bool same_value(const Value& a, const Value& b) {
  return same_structure(a, b, [](const Tensor& x, const Tensor& y) {
    return x.dtype() == y.dtype() && x.shape() == y.shape() &&
           (x.nbytes() == 0 || std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0);
  });
}

/// Equality within `tol` (NaN matches NaN): for results of two engines that
/// run different kernels (the JIT's and the reference's).
inline bool close_value(const Value& a, const Value& b, Tolerance tol) {
  tol.equal_nan = true;
  return same_structure(a, b, [&](const Tensor& x, const Tensor& y) { return allclose(x, y, tol); });
}

}  // namespace nimble::testing
