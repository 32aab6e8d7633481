// Shape and data movement: reshape, transpose, expand_dims, squeeze,
// concatenate, split, strided_slice, dynamic_strided_slice, take, embedding.
// Extents that depend on run-time values are Any; extents the types determine
// (static dims, or a symbol that cancels out) are kept.
#include <algorithm>
#include <limits>
#include <numeric>

#include "ops/ops.hpp"
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
    if (stride == 0)
      throw_error(ErrorKind::type_error, "strides {} has a zero stride", to_string(strides));
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

}  // namespace

const OpDef& reshape() {
  static const ir::AttrSpec attrs[] = {{"newshape", ir::AttrKind::integers, std::nullopt},
                                       {"allow_zero", ir::AttrKind::boolean, false}};
  static const OpDef def{
      .name = "reshape", .arg_names = kX, .attrs = attrs, .type_relation = &reshape_relation};
  return def;
}

const OpDef& transpose() {
  static const ir::AttrSpec attrs[] = {
      {"axes", ir::AttrKind::integers, std::vector<std::int64_t>{}}};
  static const OpDef def{
      .name = "transpose", .arg_names = kX, .attrs = attrs, .type_relation = &transpose_relation};
  return def;
}

const OpDef& expand_dims() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::nullopt}};
  static const OpDef def{.name = "expand_dims",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &expand_dims_relation};
  return def;
}

const OpDef& squeeze() {
  static const ir::AttrSpec attrs[] = {
      {"axes", ir::AttrKind::integers, std::vector<std::int64_t>{}}};
  static const OpDef def{
      .name = "squeeze", .arg_names = kX, .attrs = attrs, .type_relation = &squeeze_relation};
  return def;
}

const OpDef& concatenate() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::nullopt}};
  static const OpDef def{.name = "concatenate",
                         .arg_names = kFields,
                         .attrs = attrs,
                         .type_relation = &concatenate_relation};
  return def;
}

const OpDef& split() {
  static const ir::AttrSpec attrs[] = {
      {"sections", ir::AttrKind::integer, std::int64_t{0}},
      {"indices", ir::AttrKind::integers, std::vector<std::int64_t>{}},
      {"axis", ir::AttrKind::integer, std::nullopt}};
  static const OpDef def{
      .name = "split", .arg_names = kX, .attrs = attrs, .type_relation = &split_relation};
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
                         .type_relation = &strided_slice_relation};
  return def;
}

const OpDef& dynamic_strided_slice() {
  static const OpDef def{.name = "dynamic_strided_slice",
                         .arg_names = kDynamicSliceArgs,
                         .attrs = {},
                         .type_relation = &dynamic_strided_slice_relation};
  return def;
}

const OpDef& take() {
  static const ir::AttrSpec attrs[] = {{"axis", ir::AttrKind::integer, std::int64_t{0}}};
  static const OpDef def{
      .name = "take", .arg_names = kTakeArgs, .attrs = attrs, .type_relation = &take_relation};
  return def;
}

const OpDef& embedding() {
  static const OpDef def{.name = "embedding",
                         .arg_names = kEmbeddingArgs,
                         .attrs = {},
                         .type_relation = &embedding_relation};
  return def;
}

}  // namespace nimble::ops
