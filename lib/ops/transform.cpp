// Shape and data movement: reshape, transpose, expand_dims, squeeze,
// concatenate, split, strided_slice, dynamic_strided_slice, take, embedding.
// Extents that depend on run-time values are Any; extents the types determine
// (static dims, or a symbol that cancels out) are kept.
//
// Reference semantics (every result is a fresh copy; shapes that do not fit
// are Error(invalid_argument), bad index data Error(runtime_error)):
//  - reshape: -1 infers one dim from the element count (an error when the
//    count is not a multiple, or when the other dims hold a 0 so that -1 is
//    ambiguous); 0 copies x's dim at that position unless allow_zero.
//  - transpose permutes (axes [] reverses); expand_dims inserts a 1.
//  - squeeze with axes checks that each is 1 at run time; with axes []
//    it drops every dim that is 1 AT RUN TIME (the kernel sees no types: for
//    x of type f32[?, 3] holding [1, 3] that differs from the type relation,
//    which keeps the Any dim, so callers should pass explicit axes there).
//  - concatenate: fields agree on rank, dtype and every dim but the axis.
//  - split: sections must divide the axis at run time; indices (ascending,
//    >= 0) must not go past its extent; the last part runs to the end.
//  - strided_slice, dynamic_strided_slice: numpy/PyTorch slicing: negative
//    begin/end count from the end, then clamp to [0, extent]; strides must be
//    positive (a zero or negative stride is an error); an empty range gives
//    extent 0. dynamic_strided_slice slices the leading axes with stride 1.
//  - take, embedding: each index must lie in [0, extent); a negative index is
//    out of range (no wrap-around as in numpy), and so is every index into
//    an empty axis. The error names the index's position, value and the extent.
//
// Compute rules (pattern injective): each output element loads one input
// element at an index computed from its own: reshape through the row-major
// flat index (floordiv/floormod by the run-time dims); concatenate selects
// the field by the run-time offsets; split gives one stage per part; slices
// clamp their bounds against the run-time extent (dynamic_strided_slice loads
// them from its begin/end tensors); take and embedding load data at an index
// read from `indices`/`ids` with a checked load, so an index out of range is
// an error where it is read (when data's other dims leave the result empty,
// nothing is read and nothing is raised). Shape conditions the types leave
// open (element counts, squeezed dims of 1, equal dims, divisibility) are Checks.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "ops/compute.hpp"
#include "ops/ops.hpp"
#include "ops/reference_util.hpp"
#include "ops/relation_util.hpp"
#include "support/check.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kX[] = {"x"};
constexpr std::string_view kFields[] = {"fields"};
constexpr std::string_view kDynamicSliceArgs[] = {"x", "begin", "end"};
constexpr std::string_view kTakeArgs[] = {"data", "indices"};
constexpr std::string_view kEmbeddingArgs[] = {"table", "ids"};

// --- reshape -------------------------------------------------------------------------

// The element count of some dims as a product: a constant times symbols, or
// unknown (an Any dim, or a constant that overflows).
struct ElementCount {
  std::int64_t constant = 1;
  std::vector<Dim> symbols;
  bool unknown = false;

  void multiply(const Dim& d) {
    if (d.is_any())
      unknown = true;
    else if (d.is_symbol())
      symbols.push_back(d);
    else if (__builtin_mul_overflow(constant, d.value(), &constant))
      unknown = true;
  }
  [[nodiscard]] bool is_static() const noexcept { return !unknown && symbols.empty(); }
};

// The dim that -1 stands for, given the element counts of the input and of
// the other dims of the new shape: a constant, a symbol that does not cancel,
// or Any.
Dim infer_reshape_dim(ElementCount in, const ElementCount& rest, const TensorTypeNode& x,
                      std::span<const std::int64_t> newshape) {
  // With a zero extent the count says nothing about the other dims.
  if (in.unknown || rest.unknown || in.constant == 0 || rest.constant == 0) return ir::Any;
  for (const Dim& s : rest.symbols) {
    auto it = std::find_if(in.symbols.begin(), in.symbols.end(),
                           [&](const Dim& d) { return same_dim(d, s); });
    if (it == in.symbols.end()) return ir::Any;
    in.symbols.erase(it);
  }
  if (in.constant % rest.constant != 0) {
    if (in.symbols.empty() && rest.symbols.empty())
      throw_error(ErrorKind::type_error,
                  "x {} cannot be reshaped to {}: {} elements are not a multiple of {}",
                  to_string(x), to_string(newshape), in.constant, rest.constant);
    return ir::Any;
  }
  const std::int64_t quotient = in.constant / rest.constant;
  if (in.symbols.empty()) return Dim(quotient);
  if (in.symbols.size() == 1 && quotient == 1) return in.symbols[0];
  return ir::Any;
}

Type reshape_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, reshape());
  const std::vector<std::int64_t>& newshape = ints_attr(reshape(), attrs, "newshape");
  const bool allow_zero = bool_attr(reshape(), attrs, "allow_zero");
  Shape shape;
  std::optional<std::size_t> inferred;
  for (std::size_t i = 0; i < newshape.size(); ++i) {
    const std::int64_t v = newshape[i];
    if (v == -1) {
      if (inferred)
        throw_error(ErrorKind::type_error, "newshape {} has more than one -1", to_string(newshape));
      inferred = i;
      shape.push_back(ir::Any);
    } else if (v < -1) {
      throw_error(ErrorKind::type_error, "newshape {} has a negative dim {}", to_string(newshape),
                  v);
    } else if (v == 0 && !allow_zero) {
      if (i >= x.rank())
        throw_error(ErrorKind::type_error, "newshape {} copies dim {} but x {} has rank {}",
                    to_string(newshape), i, to_string(x), x.rank());
      shape.push_back(x.shape[i]);
    } else {
      shape.push_back(Dim(v));
    }
  }
  ElementCount in;
  for (const Dim& d : x.shape) in.multiply(d);
  ElementCount out;
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (i != inferred) out.multiply(shape[i]);
  if (inferred) {
    shape[*inferred] = infer_reshape_dim(in, out, x, newshape);
  } else if (in.is_static() && out.is_static() && in.constant != out.constant) {
    throw_error(ErrorKind::type_error, "x {} has {} elements but newshape {} has {}", to_string(x),
                in.constant, to_string(newshape), out.constant);
  }
  return ir::tensor_type(std::move(shape), x.dtype);
}

// --- transpose, expand_dims, squeeze ---------------------------------------------------

Type transpose_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, transpose());
  const std::vector<std::int64_t>& axes = ints_attr(transpose(), attrs, "axes");
  if (axes.empty()) return ir::tensor_type(Shape(x.shape.rbegin(), x.shape.rend()), x.dtype);
  if (axes.size() != x.rank())
    throw_error(ErrorKind::type_error, "axes {} is not a permutation of the {} axes of x",
                to_string(axes), x.rank());
  Shape shape;
  for (std::size_t axis : normalize_axes(axes, x.rank())) shape.push_back(x.shape[axis]);
  return ir::tensor_type(std::move(shape), x.dtype);
}

Type expand_dims_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, expand_dims());
  // The axis numbers a dim of the result.
  const std::size_t axis = normalize_axis(int_attr(expand_dims(), attrs, "axis"), x.rank() + 1);
  Shape shape = x.shape;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(axis), Dim(1));
  return ir::tensor_type(std::move(shape), x.dtype);
}

Type squeeze_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, squeeze());
  const std::vector<std::int64_t>& axes = ints_attr(squeeze(), attrs, "axes");
  const std::vector<std::size_t> squeezed = normalize_axes(axes, x.rank());
  Shape shape;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    const Dim& d = x.shape[i];
    if (axes.empty()) {
      // The kernel drops every extent that is 1 at run time: with a dynamic
      // dim the result's rank would not be known, so the axes must be named.
      if (!d.is_fixed())
        throw_error(ErrorKind::type_error,
                    "x {} has a dynamic dim {}: name the axes to squeeze", to_string(x), i);
      if (!is_one(d)) shape.push_back(d);
      continue;
    }
    if (std::find(squeezed.begin(), squeezed.end(), i) == squeezed.end()) {
      shape.push_back(d);
    } else if (d.is_fixed() && d.value() != 1) {
      // Any and symbolic dims are checked to be 1 at run time.
      throw_error(ErrorKind::type_error, "axis {} of x {} is {}, not 1", i, to_string(x),
                  d.value());
    }
  }
  return ir::tensor_type(std::move(shape), x.dtype);
}

// --- concatenate, split -----------------------------------------------------------------

Type concatenate_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const auto* tuple = args[0].as<ir::TupleTypeNode>();
  if (!tuple || tuple->fields.empty())
    throw_error(ErrorKind::type_error, "fields must be a tuple of tensors, got {}",
                ir::to_string(args[0]));
  const auto field_name = [](std::size_t i) { return fmt::format("fields.{}", i); };
  std::vector<const TensorTypeNode*> fields;
  for (std::size_t i = 0; i < tuple->fields.size(); ++i) {
    const auto* t = tuple->fields[i].as<TensorTypeNode>();
    if (!t)
      throw_error(ErrorKind::type_error, "{} must be a tensor, got {}", field_name(i),
                  ir::to_string(tuple->fields[i]));
    fields.push_back(t);
  }
  const TensorTypeNode& first = *fields[0];
  const std::size_t axis = normalize_axis(int_attr(concatenate(), attrs, "axis"), first.rank());
  Shape shape = first.shape;
  // Per dim, the field whose constant the result holds (for messages).
  std::vector<std::size_t> source(shape.size(), 0);
  for (std::size_t i = 1; i < fields.size(); ++i) {
    const TensorTypeNode& t = *fields[i];
    if (t.rank() != first.rank())
      throw_error(ErrorKind::type_error, "{} has rank {} but fields.0 has rank {}", field_name(i),
                  t.rank(), first.rank());
    expect_same_dtype(first, "fields.0", t, field_name(i));
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (d == axis) continue;
      std::optional<Dim> merged = merge_equal_dim(shape[d], t.shape[d]);
      if (!merged)
        throw_error(ErrorKind::type_error, "{} has {} at dim {} but {} has {}", field_name(i),
                    ir::to_string(t.shape[d]), d, field_name(source[d]), ir::to_string(shape[d]));
      if (!shape[d].is_fixed()) source[d] = i;
      shape[d] = *merged;
    }
  }
  // The concatenated extent is static only when every part is.
  std::int64_t total = 0;
  for (const TensorTypeNode* t : fields) {
    const Dim& d = t->shape[axis];
    if (!d.is_fixed() || __builtin_add_overflow(total, d.value(), &total)) {
      total = -1;
      break;
    }
  }
  shape[axis] = total < 0 ? ir::Any : Dim(total);
  return ir::tensor_type(std::move(shape), first.dtype);
}

Type split_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, split());
  const std::int64_t sections = int_attr(split(), attrs, "sections");
  const std::vector<std::int64_t>& indices = ints_attr(split(), attrs, "indices");
  const std::size_t axis = normalize_axis(int_attr(split(), attrs, "axis"), x.rank());
  const Dim& extent = x.shape[axis];
  if (sections < 0) throw_error(ErrorKind::type_error, "sections must be > 0, got {}", sections);
  if ((sections > 0) == !indices.empty())
    throw_error(ErrorKind::type_error, "give either sections (> 0) or indices, got {}",
                sections > 0 ? "both" : "neither");
  std::vector<Dim> parts;
  if (sections > 0) {
    if (extent.is_fixed() && extent.value() % sections != 0)
      throw_error(ErrorKind::type_error, "axis {} of x {} has {} elements, not divisible into {}",
                  axis, to_string(x), extent.value(), sections);
    const Dim part = extent.is_fixed() ? Dim(extent.value() / sections)
                     : sections == 1   ? extent
                                       : ir::Any;
    parts.assign(static_cast<std::size_t>(sections), part);
  } else {
    if (indices.front() < 0 || !std::is_sorted(indices.begin(), indices.end()))
      throw_error(ErrorKind::type_error, "indices {} must be >= 0 and ascending",
                  to_string(indices));
    if (extent.is_fixed() && indices.back() > extent.value())
      throw_error(ErrorKind::type_error, "indices {} go past the {} elements of axis {} of x {}",
                  to_string(indices), extent.value(), axis, to_string(x));
    std::int64_t start = 0;
    for (std::int64_t index : indices) {
      parts.push_back(Dim(index - start));
      start = index;
    }
    // The last part runs to the end of the axis.
    parts.push_back(extent.is_fixed() ? Dim(extent.value() - start)
                    : start == 0      ? extent
                                      : ir::Any);
  }
  std::vector<Type> fields;
  for (const Dim& part : parts) {
    Shape shape = x.shape;
    shape[axis] = part;
    fields.push_back(ir::tensor_type(std::move(shape), x.dtype));
  }
  return ir::tuple_type(std::move(fields));
}

// --- slices ---------------------------------------------------------------------------

// The extent of x[begin:end:stride] along a dim of static extent d (numpy
// semantics: negative bounds count from the end, bounds clamp to the dim).
std::int64_t slice_extent(std::int64_t d, std::int64_t begin, std::int64_t end,
                          std::int64_t stride) {
  const auto bound = [d](std::int64_t v, std::int64_t lo, std::int64_t hi) {
    return std::clamp(v < 0 ? v + d : v, lo, hi);
  };
  if (stride > 0) {
    const std::int64_t b = bound(begin, 0, d);
    const std::int64_t e = bound(end, 0, d);
    return e > b ? (e - b - 1) / stride + 1 : 0;
  }
  const std::int64_t b = bound(begin, -1, d - 1);
  const std::int64_t e = bound(end, -1, d - 1);
  return b > e ? (b - e - 1) / -stride + 1 : 0;
}

Type strided_slice_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& x = expect_tensor(args, 0, strided_slice());
  const std::vector<std::int64_t>& begin = ints_attr(strided_slice(), attrs, "begin");
  const std::vector<std::int64_t>& end = ints_attr(strided_slice(), attrs, "end");
  const std::vector<std::int64_t>& strides = ints_attr(strided_slice(), attrs, "strides");
  const std::vector<std::int64_t>& axes_attr = ints_attr(strided_slice(), attrs, "axes");
  const std::size_t k = begin.size();
  const auto expect_length = [&](std::string_view name, std::span<const std::int64_t> values) {
    if (values.size() != k)
      throw_error(ErrorKind::type_error, "begin {} and {} {} differ in length", to_string(begin),
                  name, to_string(values));
  };
  expect_length("end", end);
  if (!strides.empty()) expect_length("strides", strides);
  if (!axes_attr.empty()) expect_length("axes", axes_attr);
  if (axes_attr.empty() && k > x.rank())
    throw_error(ErrorKind::type_error, "begin {} slices {} axes but x {} has rank {}",
                to_string(begin), k, to_string(x), x.rank());
  std::vector<std::size_t> axes = normalize_axes(axes_attr, x.rank());
  if (axes_attr.empty()) {
    axes.resize(k);
    std::iota(axes.begin(), axes.end(), std::size_t{0});
  }
  Shape shape = x.shape;
  for (std::size_t i = 0; i < k; ++i) {
    const std::int64_t stride = strides.empty() ? 1 : strides[i];
    if (stride <= 0)  // (the reference supports positive strides only)
      throw_error(ErrorKind::type_error, "strides {} must all be positive", to_string(strides));
    Dim& d = shape[axes[i]];
    if (d.is_fixed()) {
      d = Dim(slice_extent(d.value(), begin[i], end[i], stride));
    } else {
      // A dynamic dim keeps its extent only when the slice takes all of it.
      const std::int64_t limit = d.upper_bound().value_or(std::numeric_limits<std::int64_t>::max());
      const bool whole = stride == 1 && begin[i] == 0 && end[i] >= limit;
      if (!whole) d = ir::Any;
    }
  }
  return ir::tensor_type(std::move(shape), x.dtype);
}

Type dynamic_strided_slice_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& x = expect_tensor(args, 0, dynamic_strided_slice());
  const TensorTypeNode& begin = expect_tensor(args, 1, dynamic_strided_slice());
  const TensorTypeNode& end = expect_tensor(args, 2, dynamic_strided_slice());
  const std::size_t k = expect_static_i64_vector(begin, "begin");
  if (expect_static_i64_vector(end, "end") != k)
    throw_error(ErrorKind::type_error, "begin {} and end {} differ in length", to_string(begin),
                to_string(end));
  if (k > x.rank())
    throw_error(ErrorKind::type_error, "begin {} slices {} axes but x {} has rank {}",
                to_string(begin), k, to_string(x), x.rank());
  Shape shape = x.shape;
  std::fill_n(shape.begin(), k, ir::Any);
  return ir::tensor_type(std::move(shape), x.dtype);
}

// --- gathers ----------------------------------------------------------------------------

Type take_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  const TensorTypeNode& data = expect_tensor(args, 0, take());
  const TensorTypeNode& indices = expect_tensor(args, 1, take());
  expect_index_dtype(indices, "indices");
  const std::size_t axis = normalize_axis(int_attr(take(), attrs, "axis"), data.rank());
  const auto at = [&](std::size_t i) {
    return data.shape.begin() + static_cast<std::ptrdiff_t>(i);
  };
  Shape shape(data.shape.begin(), at(axis));
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), at(axis + 1), data.shape.end());
  return ir::tensor_type(std::move(shape), data.dtype);
}

Type embedding_relation(std::span<const Type> args, const ir::Attrs&) {
  const TensorTypeNode& table = expect_tensor(args, 0, embedding());
  const TensorTypeNode& ids = expect_tensor(args, 1, embedding());
  expect_rank(table, "table", 2);
  expect_index_dtype(ids, "ids");
  Shape shape = ids.shape;
  shape.push_back(table.shape[1]);
  return ir::tensor_type(std::move(shape), table.dtype);
}

// --- reference kernels ------------------------------------------------------------------

std::string shape_string(const Tensor& t) {
  return nimble::to_string(t.shape());
}

// Row-major element strides of `shape`.
std::vector<std::int64_t> row_major_strides(const nimble::Shape& shape) {
  std::vector<std::int64_t> strides(shape.rank(), 1);
  for (std::size_t d = shape.rank(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// A fresh tensor of `shape` whose element at index i is src's element at
// offset + Σ i[d]·strides[d] (in elements).
Tensor gather_strided(const Tensor& src, const nimble::Shape& shape, std::int64_t offset,
                      std::span<const std::int64_t> strides) {
  Tensor out = ref::fresh(shape, src.dtype());
  if (out.numel() == 0) return out;
  const std::size_t size = dtype_size(src.dtype());
  const auto* in = static_cast<const std::byte*>(src.raw_data());
  auto* o = static_cast<std::byte*>(out.raw_data());
  std::vector<std::int64_t> index(shape.rank(), 0);
  std::int64_t at = offset;
  for (std::int64_t flat = 0; flat < out.numel(); ++flat) {
    std::memcpy(o + static_cast<std::size_t>(flat) * size, in + static_cast<std::size_t>(at) * size,
                size);
    for (std::size_t d = shape.rank(); d-- > 0;) {
      if (++index[d] < shape[d]) {
        at += strides[d];
        break;
      }
      at -= strides[d] * (shape[d] - 1);
      index[d] = 0;
    }
  }
  return out;
}

// A fresh copy of x with another shape of the same element count.
Tensor copy_as(const Tensor& x, const std::vector<std::int64_t>& dims) {
  return x.clone().reshape(ref::make_shape(dims));
}

Value reshape_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::vector<std::int64_t>& newshape = ints_attr(reshape(), attrs, "newshape");
  const bool allow_zero = bool_attr(reshape(), attrs, "allow_zero");
  std::vector<std::int64_t> dims;
  std::optional<std::size_t> inferred;
  std::int64_t known = 1;  // the product of the dims other than -1
  for (std::size_t i = 0; i < newshape.size(); ++i) {
    std::int64_t v = newshape[i];
    if (v == -1) {
      if (inferred)
        throw_error(ErrorKind::invalid_argument, "newshape {} has more than one -1",
                    to_string(newshape));
      inferred = i;
      dims.push_back(1);
      continue;
    }
    if (v < -1)
      throw_error(ErrorKind::invalid_argument, "newshape {} has a negative dim {}",
                  to_string(newshape), v);
    if (v == 0 && !allow_zero) {
      if (i >= x.rank())
        throw_error(ErrorKind::invalid_argument, "newshape {} copies dim {} but x {} has rank {}",
                    to_string(newshape), i, shape_string(x), x.rank());
      v = x.shape()[i];
    }
    if (__builtin_mul_overflow(known, v, &known))
      throw_error(ErrorKind::invalid_argument, "newshape {} has too many elements",
                  to_string(newshape));
    dims.push_back(v);
  }
  if (inferred) {
    if (known == 0 && x.numel() == 0)
      throw_error(ErrorKind::invalid_argument,
                  "x {} cannot be reshaped to {}: with a 0 among the other dims the -1 is "
                  "ambiguous",
                  shape_string(x), to_string(newshape));
    if (known == 0 || x.numel() % known != 0)
      throw_error(ErrorKind::invalid_argument,
                  "x {} cannot be reshaped to {}: {} elements are not a multiple of {}",
                  shape_string(x), to_string(newshape), x.numel(), known);
    dims[*inferred] = x.numel() / known;
  } else if (known != x.numel()) {
    throw_error(ErrorKind::invalid_argument, "x {} has {} elements but newshape {} has {}",
                shape_string(x), x.numel(), to_string(newshape), known);
  }
  return copy_as(x, dims);
}

Value transpose_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::vector<std::int64_t>& axes = ints_attr(transpose(), attrs, "axes");
  std::vector<std::size_t> perm(x.rank());
  if (axes.empty()) {
    for (std::size_t i = 0; i < x.rank(); ++i) perm[i] = x.rank() - 1 - i;
  } else {
    if (axes.size() != x.rank())
      throw_error(ErrorKind::invalid_argument, "axes {} is not a permutation of the {} axes of x",
                  to_string(axes), x.rank());
    perm = normalize_axes(axes, x.rank());
  }
  const std::vector<std::int64_t> in_strides = row_major_strides(x.shape());
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> strides;
  for (std::size_t axis : perm) {
    dims.push_back(x.shape()[axis]);
    strides.push_back(in_strides[axis]);
  }
  return gather_strided(x, ref::make_shape(dims), 0, strides);
}

Value expand_dims_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::size_t axis = normalize_axis(int_attr(expand_dims(), attrs, "axis"), x.rank() + 1);
  std::vector<std::int64_t> dims = ref::dims_of(x.shape());
  dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(axis), 1);
  return copy_as(x, dims);
}

Value squeeze_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::vector<std::int64_t>& axes = ints_attr(squeeze(), attrs, "axes");
  const std::vector<std::size_t> squeezed = normalize_axes(axes, x.rank());
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < x.rank(); ++i) {
    const std::int64_t d = x.shape()[i];
    const bool named = std::find(squeezed.begin(), squeezed.end(), i) != squeezed.end();
    if (named && d != 1)
      throw_error(ErrorKind::invalid_argument, "axis {} of x {} is {}, not 1", i, shape_string(x),
                  d);
    if (!(axes.empty() ? d == 1 : named)) dims.push_back(d);
  }
  return copy_as(x, dims);
}

Value concatenate_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  NIMBLE_ASSERT(!args.empty(), "concatenate: missing argument");
  const std::span<const Value> values = args[0].fields();
  if (values.empty())
    throw_error(ErrorKind::invalid_argument, "fields must be a non-empty tuple of tensors");
  std::vector<const Tensor*> fields;
  for (const Value& v : values) fields.push_back(&v.tensor());
  const Tensor& first = *fields[0];
  const std::size_t axis = normalize_axis(int_attr(concatenate(), attrs, "axis"), first.rank());
  std::vector<std::int64_t> dims = ref::dims_of(first.shape());
  dims[axis] = 0;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const Tensor& t = *fields[i];
    if (t.dtype() != first.dtype())
      throw_error(ErrorKind::type_error, "fields.0 is {} but fields.{} is {}",
                  to_string(first.dtype()), i, to_string(t.dtype()));
    if (t.rank() != first.rank())
      throw_error(ErrorKind::invalid_argument,
                  "fields.{} {} has rank {} but fields.0 {} has rank {}", i, shape_string(t),
                  t.rank(), shape_string(first), first.rank());
    for (std::size_t d = 0; d < first.rank(); ++d)
      if (d != axis && t.shape()[d] != first.shape()[d])
        throw_error(ErrorKind::invalid_argument,
                    "fields.{} {} has {} at dim {} but fields.0 {} has {}", i, shape_string(t),
                    t.shape()[d], d, shape_string(first), first.shape()[d]);
    dims[axis] += t.shape()[axis];
  }
  Tensor out = ref::fresh(ref::make_shape(dims), first.dtype());
  if (out.numel() == 0) return out;
  const std::size_t size = dtype_size(first.dtype());
  const ref::AxisSplit s = ref::split_at(out.shape(), axis);
  auto* o = static_cast<std::byte*>(out.raw_data());
  for (std::int64_t outer = 0; outer < s.outer; ++outer) {
    for (const Tensor* t : fields) {
      const auto block = static_cast<std::size_t>(t->shape()[axis] * s.inner) * size;
      if (block == 0) continue;
      std::memcpy(
          o, static_cast<const std::byte*>(t->raw_data()) + static_cast<std::size_t>(outer) * block,
          block);
      o += block;
    }
  }
  return out;
}

// Elements [begin, end) of x along `axis`, as a fresh tensor.
Tensor axis_range(const Tensor& x, std::size_t axis, std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> dims = ref::dims_of(x.shape());
  dims[axis] = end - begin;
  const std::vector<std::int64_t> strides = row_major_strides(x.shape());
  const std::int64_t offset = x.numel() == 0 ? 0 : begin * strides[axis];
  return gather_strided(x, ref::make_shape(dims), offset, strides);
}

Value split_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::int64_t sections = int_attr(split(), attrs, "sections");
  const std::vector<std::int64_t>& indices = ints_attr(split(), attrs, "indices");
  const std::size_t axis = normalize_axis(int_attr(split(), attrs, "axis"), x.rank());
  const std::int64_t extent = x.shape()[axis];
  std::vector<std::int64_t> bounds{0};  // part i is [bounds[i], bounds[i + 1])
  if (sections > 0) {
    if (extent % sections != 0)
      throw_error(ErrorKind::invalid_argument,
                  "axis {} of x {} has {} elements, not divisible into {}", axis, shape_string(x),
                  extent, sections);
    for (std::int64_t i = 1; i <= sections; ++i) bounds.push_back(i * (extent / sections));
  } else {
    if (indices.empty() || indices.front() < 0 || !std::is_sorted(indices.begin(), indices.end()))
      throw_error(ErrorKind::invalid_argument, "indices {} must be >= 0 and ascending",
                  to_string(indices));
    if (indices.back() > extent)
      throw_error(ErrorKind::invalid_argument,
                  "indices {} go past the {} elements of axis {} of x {}", to_string(indices),
                  extent, axis, shape_string(x));
    bounds.insert(bounds.end(), indices.begin(), indices.end());
    bounds.push_back(extent);
  }
  std::vector<Value> parts;
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i)
    parts.emplace_back(axis_range(x, axis, bounds[i], bounds[i + 1]));
  return Value::tuple(std::move(parts));
}

// One axis of a slice: x[begin:end:stride] along `axis`, numpy semantics.
struct AxisSlice {
  std::size_t axis;
  std::int64_t begin, end, stride;
};

Tensor slice(const Tensor& x, std::span<const AxisSlice> slices) {
  std::vector<std::int64_t> dims = ref::dims_of(x.shape());
  std::vector<std::int64_t> strides = row_major_strides(x.shape());
  std::int64_t offset = 0;
  for (const AxisSlice& s : slices) {
    const std::int64_t d = dims[s.axis];
    const auto bound = [d](std::int64_t v) {
      return std::clamp(v < 0 ? v + d : v, std::int64_t{0}, d);
    };
    const std::int64_t b = bound(s.begin);
    const std::int64_t e = bound(s.end);
    dims[s.axis] = e > b ? (e - b - 1) / s.stride + 1 : 0;
    offset += b * strides[s.axis];
    strides[s.axis] *= s.stride;
  }
  const nimble::Shape shape = ref::make_shape(dims);
  return gather_strided(x, shape, shape.numel() == 0 ? 0 : offset, strides);
}

Value strided_slice_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::vector<std::int64_t>& begin = ints_attr(strided_slice(), attrs, "begin");
  const std::vector<std::int64_t>& end = ints_attr(strided_slice(), attrs, "end");
  const std::vector<std::int64_t>& strides = ints_attr(strided_slice(), attrs, "strides");
  const std::vector<std::int64_t>& axes = ints_attr(strided_slice(), attrs, "axes");
  const std::size_t k = begin.size();
  if (end.size() != k || (!strides.empty() && strides.size() != k) ||
      (!axes.empty() && axes.size() != k) || (axes.empty() && k > x.rank()))
    throw_error(ErrorKind::invalid_argument,
                "begin {}, end {}, strides {} and axes {} do not describe a slice of x {}",
                to_string(begin), to_string(end), to_string(strides), to_string(axes),
                shape_string(x));
  const std::vector<std::size_t> normalized = normalize_axes(axes, x.rank());
  std::vector<AxisSlice> slices;
  for (std::size_t i = 0; i < k; ++i) {
    const std::int64_t stride = strides.empty() ? 1 : strides[i];
    if (stride <= 0)
      throw_error(ErrorKind::invalid_argument, "strides {} has a non-positive stride {}",
                  to_string(strides), stride);
    slices.push_back({axes.empty() ? i : normalized[i], begin[i], end[i], stride});
  }
  return slice(x, slices);
}

Value dynamic_strided_slice_kernel(std::span<const Value> args, const ir::Attrs&) {
  const Tensor& x = ref::tensor_arg(args, 0);
  const std::vector<std::int64_t> begin = ref::i64_values(ref::tensor_arg(args, 1), "begin");
  const std::vector<std::int64_t> end = ref::i64_values(ref::tensor_arg(args, 2), "end");
  if (ref::tensor_arg(args, 1).rank() != 1 || ref::tensor_arg(args, 2).rank() != 1 ||
      begin.size() != end.size() || begin.size() > x.rank())
    throw_error(ErrorKind::invalid_argument,
                "begin {} and end {} must be vectors of one length <= the rank of x {}",
                to_string(begin), to_string(end), shape_string(x));
  std::vector<AxisSlice> slices;
  for (std::size_t i = 0; i < begin.size(); ++i) slices.push_back({i, begin[i], end[i], 1});
  return slice(x, slices);
}

// Index i of an i32 or i64 tensor.
std::int64_t index_at(const Tensor& indices, std::int64_t i) {
  if (indices.dtype() == DType::i32) return indices.data<std::int32_t>()[i];
  return indices.data<std::int64_t>()[i];
}

// data.shape[:axis] + indices.shape + data.shape[axis+1:], each index in
// [0, extent) along axis; `describe(position, index)` words the error.
template <class Describe>
Tensor gather(const Tensor& data, const Tensor& indices, std::size_t axis, Describe describe) {
  if (indices.dtype() != DType::i32 && indices.dtype() != DType::i64)
    throw_error(ErrorKind::type_error, "indices must be i32 or i64, got {}",
                to_string(indices.dtype()));
  const ref::AxisSplit s = ref::split_at(data.shape(), axis);
  for (std::int64_t j = 0; j < indices.numel(); ++j) {
    const std::int64_t index = index_at(indices, j);
    if (index < 0 || index >= s.extent)
      throw_error(ErrorKind::runtime_error, "{}",
                  describe(ref::index_string(indices.shape(), j), index));
  }
  std::vector<std::int64_t> dims(data.shape().begin(),
                                 data.shape().begin() + static_cast<std::ptrdiff_t>(axis));
  dims.insert(dims.end(), indices.shape().begin(), indices.shape().end());
  dims.insert(dims.end(), data.shape().begin() + static_cast<std::ptrdiff_t>(axis) + 1,
              data.shape().end());
  Tensor out = ref::fresh(ref::make_shape(dims), data.dtype());
  if (out.numel() == 0) return out;
  const std::size_t row = static_cast<std::size_t>(s.inner) * dtype_size(data.dtype());
  const auto* in = static_cast<const std::byte*>(data.raw_data());
  auto* o = static_cast<std::byte*>(out.raw_data());
  for (std::int64_t outer = 0; outer < s.outer; ++outer)
    for (std::int64_t j = 0; j < indices.numel(); ++j, o += row)
      std::memcpy(o, in + static_cast<std::size_t>(outer * s.extent + index_at(indices, j)) * row,
                  row);
  return out;
}

Value take_kernel(std::span<const Value> args, const ir::Attrs& attrs) {
  const Tensor& data = ref::tensor_arg(args, 0);
  const Tensor& indices = ref::tensor_arg(args, 1);
  if (data.rank() == 0)
    throw_error(ErrorKind::invalid_argument, "data must have rank >= 1, got []");
  const std::size_t axis = normalize_axis(int_attr(take(), attrs, "axis"), data.rank());
  return gather(data, indices, axis, [&](const std::string& position, std::int64_t index) {
    return fmt::format("indices{} = {} is out of range for axis {} of data {} (extent {})",
                       position, index, axis, shape_string(data), data.shape()[axis]);
  });
}

Value embedding_kernel(std::span<const Value> args, const ir::Attrs&) {
  const Tensor& table = ref::tensor_arg(args, 0);
  const Tensor& ids = ref::tensor_arg(args, 1);
  if (table.rank() != 2)
    throw_error(ErrorKind::invalid_argument, "table must have rank 2, got {}", shape_string(table));
  return gather(table, ids, 0, [&](const std::string& position, std::int64_t index) {
    return fmt::format("ids{} = {} is out of range for table {} ({} rows)", position, index,
                       shape_string(table), table.shape()[0]);
  });
}

// --- compute rules ------------------------------------------------------------------------

std::vector<te::Tensor> reshape_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const std::vector<std::int64_t>& newshape = ints_attr(reshape(), attrs, "newshape");
  const bool allow_zero = bool_attr(reshape(), attrs, "allow_zero");
  std::vector<te::Expr> dims;
  std::vector<te::Expr> known;  // every dim but the -1
  std::optional<std::size_t> inferred;
  for (std::size_t i = 0; i < newshape.size(); ++i) {
    const std::int64_t v = newshape[i];
    if (v == -1) {
      if (inferred)
        throw_error(ErrorKind::type_error, "newshape {} has more than one -1", to_string(newshape));
      inferred = i;
      dims.emplace_back(1);  // replaced below
      continue;
    }
    if (v < -1)
      throw_error(ErrorKind::type_error, "newshape {} has a negative dim {}", to_string(newshape),
                  v);
    if (v == 0 && !allow_zero && i >= x.ndim())
      throw_error(ErrorKind::type_error, "newshape {} copies dim {} but x has rank {}",
                  to_string(newshape), i, x.ndim());
    dims.push_back(v == 0 && !allow_zero ? x.shape()[i] : te::Expr(v));
    known.push_back(dims.back());
  }
  const te::Expr count = te::product(x.shape());
  const te::Expr rest = te::product(known);
  std::vector<te::Check> checks;
  if (inferred) {
    te::add_check(checks, !(te::eq(rest, 0) && te::eq(count, 0)), ErrorKind::invalid_argument,
                  "with a 0 among the other dims of newshape the -1 is ambiguous");
    te::add_check(checks,
                  te::select(te::eq(rest, 0), te::int_imm(0, DType::boolean),
                             te::eq(te::floormod(count, rest), 0)),
                  ErrorKind::invalid_argument,
                  "x's elements are not a multiple of newshape's other dims");
    dims[*inferred] = te::floordiv(count, rest);  // the checks make rest > 0
  } else {
    te::add_check(checks, te::eq(rest, count), ErrorKind::invalid_argument,
                  "x's elements do not match newshape's");
  }
  return {te::compute(
      dims, "reshape",
      [&](std::span<const te::Var> i) {
        const std::vector<te::Expr> index = te::as_indices(i);
        return x(te::unravel(te::ravel(index, dims), x.shape()));
      },
      std::move(checks))};
}

std::vector<te::Tensor> transpose_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const std::vector<std::int64_t>& axes = ints_attr(transpose(), attrs, "axes");
  std::vector<std::size_t> perm(x.ndim());
  if (axes.empty()) {
    for (std::size_t i = 0; i < x.ndim(); ++i) perm[i] = x.ndim() - 1 - i;
  } else {
    if (axes.size() != x.ndim())
      throw_error(ErrorKind::type_error, "axes {} is not a permutation of the {} axes of x",
                  to_string(axes), x.ndim());
    perm = normalize_axes(axes, x.ndim());
  }
  std::vector<te::Expr> shape;
  for (std::size_t axis : perm) shape.push_back(x.shape()[axis]);
  return {te::compute(shape, "transpose", [&](std::span<const te::Var> i) {
    std::vector<te::Expr> index(x.ndim());
    for (std::size_t k = 0; k < perm.size(); ++k) index[perm[k]] = i[k];
    return x(std::move(index));
  })};
}

std::vector<te::Tensor> expand_dims_rule(std::span<const te::Tensor> inputs,
                                         const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const std::size_t axis = normalize_axis(int_attr(expand_dims(), attrs, "axis"), x.ndim() + 1);
  std::vector<te::Expr> shape = x.shape();
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(axis), te::Expr(1));
  return {te::compute(shape, "expand_dims", [&](std::span<const te::Var> i) {
    std::vector<te::Expr> index = te::as_indices(i);
    index.erase(index.begin() + static_cast<std::ptrdiff_t>(axis));
    return x(std::move(index));
  })};
}

std::vector<te::Tensor> squeeze_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const std::vector<std::int64_t>& axes = ints_attr(squeeze(), attrs, "axes");
  const std::vector<std::size_t> named = normalize_axes(axes, x.ndim());
  std::vector<bool> squeezed(x.ndim(), false);
  std::vector<te::Check> checks;
  std::vector<te::Expr> shape;
  for (std::size_t d = 0; d < x.ndim(); ++d) {
    const te::Expr& extent = x.shape()[d];
    if (axes.empty()) {
      // As the type relation: without axes only static dims may be dropped.
      if (!te::as_int(extent))
        throw_error(ErrorKind::type_error, "x has a dynamic dim {}: name the axes to squeeze", d);
      squeezed[d] = te::as_int(extent) == 1;
    } else if (std::find(named.begin(), named.end(), d) != named.end()) {
      squeezed[d] = true;
      te::add_check(checks, te::eq(extent, 1), ErrorKind::invalid_argument,
                    fmt::format("axis {} of x is not 1", d));
    }
    if (!squeezed[d]) shape.push_back(extent);
  }
  return {te::compute(
      shape, "squeeze",
      [&](std::span<const te::Var> i) {
        std::vector<te::Expr> index;
        std::size_t o = 0;
        for (std::size_t d = 0; d < x.ndim(); ++d)
          index.push_back(squeezed[d] ? te::Expr(0) : te::Expr(i[o++]));
        return x(std::move(index));
      },
      std::move(checks))};
}

std::vector<te::Tensor> concatenate_rule(std::span<const te::Tensor> fields,
                                         const ir::Attrs& attrs) {
  NIMBLE_ASSERT(!fields.empty(), "concatenate: fields is a non-empty tuple");
  const te::Tensor& first = fields[0];
  const std::size_t axis = normalize_axis(int_attr(concatenate(), attrs, "axis"), first.ndim());
  std::vector<te::Expr> shape = first.shape();
  std::vector<te::Check> checks;
  std::vector<te::Expr> offsets{te::Expr(0)};  // where each field starts along the axis
  for (std::size_t f = 0; f < fields.size(); ++f) {
    const te::Tensor& t = fields[f];
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (d == axis || f == 0) continue;
      te::add_check(checks, te::eq(t.shape()[d], first.shape()[d]), ErrorKind::invalid_argument,
                    fmt::format("fields.{} does not match fields.0 at dim {}", f, d));
      if (te::as_int(t.shape()[d])) shape[d] = t.shape()[d];  // the most specific extent
    }
    offsets.push_back(offsets.back() + t.shape()[axis]);
  }
  shape[axis] = offsets.back();
  return {te::compute(
      shape, "concatenate",
      [&](std::span<const te::Var> i) {
        // The field that holds i along the axis: the last whose offset is <= i.
        const auto load_field = [&](std::size_t f) {
          std::vector<te::Expr> index = te::as_indices(i);
          index[axis] = index[axis] - offsets[f];
          return fields[f](std::move(index));
        };
        te::Expr element = load_field(fields.size() - 1);
        for (std::size_t f = fields.size() - 1; f-- > 0;)
          element = te::select(i[axis] < offsets[f + 1], load_field(f), element);
        return element;
      },
      std::move(checks))};
}

std::vector<te::Tensor> split_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const std::int64_t sections = int_attr(split(), attrs, "sections");
  const std::vector<std::int64_t>& indices = ints_attr(split(), attrs, "indices");
  const std::size_t axis = normalize_axis(int_attr(split(), attrs, "axis"), x.ndim());
  const te::Expr& extent = x.shape()[axis];
  if (sections < 0 || (sections > 0) == !indices.empty())
    throw_error(ErrorKind::type_error, "give either sections (> 0) or indices");
  std::vector<te::Check> checks;
  std::vector<te::Expr> bounds{te::Expr(0)};  // part p is [bounds[p], bounds[p + 1])
  if (sections > 0) {
    te::add_check(checks, te::eq(te::floormod(extent, sections), 0), ErrorKind::invalid_argument,
                  fmt::format("axis {} of x is not divisible into {} sections", axis, sections));
    const te::Expr part = te::floordiv(extent, sections);
    for (std::int64_t p = 1; p <= sections; ++p) bounds.push_back(part * p);
  } else {
    if (indices.front() < 0 || !std::is_sorted(indices.begin(), indices.end()))
      throw_error(ErrorKind::type_error, "indices {} must be >= 0 and ascending",
                  to_string(indices));
    te::add_check(checks, te::Expr(indices.back()) <= extent, ErrorKind::invalid_argument,
                  fmt::format("indices {} go past axis {} of x", to_string(indices), axis));
    bounds.insert(bounds.end(), indices.begin(), indices.end());
    bounds.push_back(extent);
  }
  std::vector<te::Tensor> parts;
  for (std::size_t p = 0; p + 1 < bounds.size(); ++p) {
    std::vector<te::Expr> shape = x.shape();
    shape[axis] = bounds[p + 1] - bounds[p];
    parts.push_back(te::compute(
        shape, fmt::format("split.{}", p),
        [&](std::span<const te::Var> i) {
          std::vector<te::Expr> index = te::as_indices(i);
          index[axis] = index[axis] + bounds[p];
          return x(std::move(index));
        },
        checks));
  }
  return parts;
}

// One sliced axis: x[begin:end:stride] along `axis`, numpy semantics, with
// begin and end clamped against the run-time extent.
struct TeAxisSlice {
  std::size_t axis;
  te::Expr begin;   // clamped to [0, extent]
  te::Expr extent;  // of the result
  std::int64_t stride;
};

// `v` (a bound, possibly negative) counted from the end when negative and
// clamped to [0, d].
te::Expr clamp_bound(const te::Expr& v, const te::Expr& d) {
  if (const auto c = te::as_int(v)) return *c < 0 ? te::maximum(d + *c, 0) : te::minimum(v, d);
  return te::select(v < 0, te::maximum(v + d, 0), te::minimum(v, d));
}

TeAxisSlice slice_axis(const te::Tensor& x, std::size_t axis, const te::Expr& begin,
                       const te::Expr& end, std::int64_t stride) {
  const te::Expr& d = x.shape()[axis];
  const te::Expr b = clamp_bound(begin, d);
  const te::Expr e = clamp_bound(end, d);
  te::Expr extent =
      stride == 1 ? te::maximum(e - b, 0) : te::maximum(te::floordiv(e - b - 1, stride) + 1, 0);
  return {axis, b, std::move(extent), stride};
}

std::vector<te::Tensor> slice_stage(const te::Tensor& x, std::span<const TeAxisSlice> slices,
                                    std::string name) {
  std::vector<te::Expr> shape = x.shape();
  for (const TeAxisSlice& s : slices) shape[s.axis] = s.extent;
  return {te::compute(shape, std::move(name), [&](std::span<const te::Var> i) {
    std::vector<te::Expr> index = te::as_indices(i);
    for (const TeAxisSlice& s : slices) index[s.axis] = s.begin + index[s.axis] * s.stride;
    return x(std::move(index));
  })};
}

std::vector<te::Tensor> strided_slice_rule(std::span<const te::Tensor> inputs,
                                           const ir::Attrs& attrs) {
  const te::Tensor& x = inputs[0];
  const std::vector<std::int64_t>& begin = ints_attr(strided_slice(), attrs, "begin");
  const std::vector<std::int64_t>& end = ints_attr(strided_slice(), attrs, "end");
  const std::vector<std::int64_t>& strides = ints_attr(strided_slice(), attrs, "strides");
  const std::vector<std::int64_t>& axes = ints_attr(strided_slice(), attrs, "axes");
  const std::size_t k = begin.size();
  if (end.size() != k || (!strides.empty() && strides.size() != k) ||
      (!axes.empty() && axes.size() != k) || (axes.empty() && k > x.ndim()))
    throw_error(ErrorKind::type_error,
                "begin {}, end {}, strides {} and axes {} do not describe a slice of x",
                to_string(begin), to_string(end), to_string(strides), to_string(axes));
  const std::vector<std::size_t> normalized = normalize_axes(axes, x.ndim());
  std::vector<TeAxisSlice> slices;
  for (std::size_t i = 0; i < k; ++i) {
    const std::int64_t stride = strides.empty() ? 1 : strides[i];
    if (stride <= 0)
      throw_error(ErrorKind::type_error, "strides {} must all be positive", to_string(strides));
    slices.push_back(slice_axis(x, axes.empty() ? i : normalized[i], begin[i], end[i], stride));
  }
  return slice_stage(x, slices, "strided_slice");
}

std::vector<te::Tensor> dynamic_strided_slice_rule(std::span<const te::Tensor> inputs,
                                                   const ir::Attrs&) {
  const te::Tensor& x = inputs[0];
  const te::Tensor& begin = inputs[1];
  const te::Tensor& end = inputs[2];
  const std::optional<std::int64_t> k = te::as_int(begin.shape()[0]);
  NIMBLE_ASSERT(k && *k <= static_cast<std::int64_t>(x.ndim()),
                "dynamic_strided_slice: begin has a static length <= x's rank");
  std::vector<TeAxisSlice> slices;
  for (std::int64_t a = 0; a < *k; ++a)
    slices.push_back(slice_axis(x, static_cast<std::size_t>(a), begin({a}), end({a}), 1));
  return slice_stage(x, slices, "dynamic_strided_slice");
}

// data[..., index, ...] with index = indices[j] along `axis`, checked.
te::Tensor gather_stage(const te::Tensor& data, const te::Tensor& indices, std::size_t axis,
                        std::string name) {
  std::vector<te::Expr> shape(data.shape().begin(),
                              data.shape().begin() + static_cast<std::ptrdiff_t>(axis));
  shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
  shape.insert(shape.end(), data.shape().begin() + static_cast<std::ptrdiff_t>(axis) + 1,
               data.shape().end());
  return te::compute(shape, std::move(name), [&](std::span<const te::Var> i) {
    const auto at = [&](std::size_t n) { return i.begin() + static_cast<std::ptrdiff_t>(n); };
    const std::size_t m = indices.ndim();
    const te::Expr index =
        te::cast(DType::i64, indices(std::vector<te::Expr>(at(axis), at(axis + m))));
    std::vector<te::Expr> data_index(at(0), at(axis));
    data_index.push_back(index);
    data_index.insert(data_index.end(), at(axis + m), i.end());
    return te::checked_load(data, std::move(data_index));
  });
}

std::vector<te::Tensor> take_rule(std::span<const te::Tensor> inputs, const ir::Attrs& attrs) {
  const te::Tensor& data = inputs[0];
  const std::size_t axis = normalize_axis(int_attr(take(), attrs, "axis"), data.ndim());
  return {gather_stage(data, inputs[1], axis, "take")};
}

std::vector<te::Tensor> embedding_rule(std::span<const te::Tensor> inputs, const ir::Attrs&) {
  return {gather_stage(inputs[0], inputs[1], 0, "embedding")};
}

}  // namespace

const OpDef& reshape() {
  static const ir::AttrSpec attrs[] = {{"newshape", ir::AttrKind::integers, std::nullopt},
                                       {"allow_zero", ir::AttrKind::boolean, false}};
  static const OpDef def{.name = "reshape",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &reshape_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &reshape_rule,
                         .reference = &reshape_kernel,
                         .summary = "The same elements in `newshape` (-1 infers one dim, 0 copies "
                                    "the input dim).",
                         .example = {"%x: f32[n, 768]", "reshape(%x, newshape=[0, 12, 64])"}};
  return def;
}

const OpDef& transpose() {
  static const ir::AttrSpec attrs[] = {
      {"axes", ir::AttrKind::integers, std::vector<std::int64_t>{}}};
  static const OpDef def{.name = "transpose",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &transpose_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &transpose_rule,
                         .reference = &transpose_kernel,
                         .summary = "Dims permuted by `axes` (reversed if empty).",
                         .example = {"%x: f32[n, 12, 64]", "transpose(%x, axes=[1, 0, 2])"}};
  return def;
}

const OpDef& expand_dims() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::nullopt}};
  static const OpDef def{.name = "expand_dims",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &expand_dims_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &expand_dims_rule,
                         .reference = &expand_dims_kernel,
                         .summary = "A dim of extent 1 inserted at `axis`.",
                         .example = {"%x: f32[n]", "expand_dims(%x, axis=1)"}};
  return def;
}

const OpDef& squeeze() {
  static const ir::AttrSpec attrs[] = {
      {"axes", ir::AttrKind::integers, std::vector<std::int64_t>{}}};
  static const OpDef def{.name = "squeeze",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &squeeze_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &squeeze_rule,
                         .reference = &squeeze_kernel,
                         .summary = "Dims of extent 1 at `axes` removed (every static 1 if empty).",
                         .example = {"%x: f32[n, 1, 4]", "squeeze(%x, axes=[1])"}};
  return def;
}

const OpDef& concatenate() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::nullopt}};
  static const OpDef def{.name = "concatenate",
                         .arg_names = kFields,
                         .attrs = attrs,
                         .type_relation = &concatenate_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &concatenate_rule,
                         .reference = &concatenate_kernel,
                         .summary = "The tensors of a tuple joined along `axis`.",
                         .example = {"%a: f32[n, 4], %b: f32[n, 2]",
                                     "concatenate((%a, %b), axis=1)"}};
  return def;
}

const OpDef& split() {
  static const ir::AttrSpec attrs[] = {
      {"sections", ir::AttrKind::integer, std::int64_t{0}},
      {"indices", ir::AttrKind::integers, std::vector<std::int64_t>{}},
      {"axis", ir::AttrKind::integer, std::nullopt}};
  static const OpDef def{.name = "split",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &split_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &split_rule,
                         .reference = &split_kernel,
                         .summary = "`sections` equal parts (or parts at `indices`) along `axis`: "
                                    "a tuple.",
                         .example = {"%x: f32[n, 12]", "split(%x, sections=3, axis=1)"}};
  return def;
}

const OpDef& strided_slice() {
  static const ir::AttrSpec attrs[] = {
      {"begin", ir::AttrKind::integers, std::nullopt},
      {"end", ir::AttrKind::integers, std::nullopt},
      {"strides", ir::AttrKind::integers, std::vector<std::int64_t>{}},
      {"axes", ir::AttrKind::integers, std::vector<std::int64_t>{}}};
  static const OpDef def{.name = "strided_slice",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &strided_slice_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &strided_slice_rule,
                         .reference = &strided_slice_kernel,
                         .summary = "x[begin:end:strides] with static bounds.",
                         .example = {"%x: f32[n, 8]",
                                     "strided_slice(%x, begin=[0, 2], end=[1, 6])"}};
  return def;
}

const OpDef& dynamic_strided_slice() {
  static const OpDef def{.name = "dynamic_strided_slice",
                         .arg_names = kDynamicSliceArgs,
                         .attrs = {},
                         .type_relation = &dynamic_strided_slice_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &dynamic_strided_slice_rule,
                         .reference = &dynamic_strided_slice_kernel,
                         .summary = "x[begin:end] with bounds known at run time: the sliced dims "
                                    "are Any.",
                         .example = {"%x: f32[n, 8], %begin: i64[2], %end: i64[2]",
                                     "dynamic_strided_slice(%x, %begin, %end)"}};
  return def;
}

const OpDef& take() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::int64_t{0}}};
  static const OpDef def{.name = "take",
                         .arg_names = kTakeArgs,
                         .attrs = attrs,
                         .type_relation = &take_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &take_rule,
                         .reference = &take_kernel,
                         .summary = "The elements of data at indices along `axis` (a scalar index "
                                    "drops the axis).",
                         .example = {"%data: f32[n, 4], %indices: i64[k]",
                                     "take(%data, %indices, axis=0)"}};
  return def;
}

const OpDef& embedding() {
  static const OpDef def{.name = "embedding",
                         .arg_names = kEmbeddingArgs,
                         .attrs = {},
                         .type_relation = &embedding_relation,
                         .pattern = ir::OpPattern::injective,
                         .compute = &embedding_rule,
                         .reference = &embedding_kernel,
                         .summary = "Rows of table at ids: [V, D] at [...] -> [..., D].",
                         .example = {"%table: f32[30522, 768], %ids: i64[n]",
                                     "embedding(%table, %ids)"}};
  return def;
}

}  // namespace nimble::ops
