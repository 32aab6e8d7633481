// Random calls of every op with a rule (see op_calls.hpp).
#include "support/op_calls.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops/ops.hpp"
#include "runtime/element.hpp"
#include "support/tensor_matchers.hpp"

namespace nimble::testing {

std::vector<te::Tensor> symbolic_matmul_inputs(te::SymbolTable& symbols) {
  const ir::Type a = ir::tensor_type({ir::Dim("m"), ir::Dim("k")}, DType::f32);
  const ir::Type b = ir::tensor_type({ir::Dim("k"), ir::Dim("n")}, DType::f32);
  return {te::placeholder_for(*a.as<ir::TensorTypeNode>(), "a", symbols),
          te::placeholder_for(*b.as<ir::TensorTypeNode>(), "b", symbols)};
}

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr DType kNumeric[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                              DType::i8,  DType::i32, DType::i64};


}  // namespace

// --- random inputs ---------------------------------------------------------------------

std::int64_t pick(Rng& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

static bool coin(Rng& rng, double p = 0.5) {
  return std::bernoulli_distribution(p)(rng);
}

static DType any_of(Rng& rng, std::span<const DType> dtypes) {
  return dtypes[static_cast<std::size_t>(pick(rng, 0, std::ssize(dtypes) - 1))];
}

static std::int64_t random_dim(Rng& rng) {
  static constexpr std::int64_t dims[] = {0, 1, 1, 2, 2, 3, 3, 4, 5, 1};
  return dims[static_cast<std::size_t>(pick(rng, 0, std::ssize(dims) - 1))];
}

Ints random_shape(Rng& rng, std::size_t min_rank, std::size_t max_rank) {
  const auto rank = static_cast<std::size_t>(
      pick(rng, static_cast<std::int64_t>(min_rank), static_cast<std::int64_t>(max_rank)));
  Ints shape;
  for (std::size_t i = 0; i < rank; ++i) shape.push_back(random_dim(rng));
  return shape;
}

static Tensor make_tensor(const Ints& shape, DType dtype, const std::function<double()>& element) {
  Tensor t = Tensor::empty(Shape(std::span<const std::int64_t>(shape)), dtype);
  auto* base = static_cast<std::byte*>(t.raw_data());
  for (std::int64_t i = 0; i < t.numel(); ++i)
    store_from_double(base + static_cast<std::size_t>(i) * dtype_size(dtype), dtype, element());
  return t;
}

Tensor from_values(const Ints& shape, DType dtype, const std::vector<double>& values) {
  std::size_t next = 0;
  Tensor t = make_tensor(shape, dtype, [&] { return values.at(next++); });
  REQUIRE(next == values.size());
  return t;
}

Tensor i64s(const std::vector<std::int64_t>& values) {
  return Tensor::from_data(Shape{static_cast<std::int64_t>(values.size())},
                           std::span<const std::int64_t>(values));
}

static Tensor scalar_of(DType dtype, double value) {
  return make_tensor({}, dtype, [&] { return value; });
}



/// Random elements of `dtype` in the range (clamped to integer dtypes'
/// limits); integers and bool are whole.
Tensor random_tensor(Rng& rng, const Ints& shape, DType dtype, Range range) {
  return make_tensor(shape, dtype, [&]() -> double {
    if (dtype == DType::boolean) return coin(rng) ? 1 : 0;
    if (is_integer(dtype)) {
      const double lo = dtype == DType::i8 ? std::max(range.lo, -128.0) : range.lo;
      const double hi = dtype == DType::i8 ? std::min(range.hi, 127.0) : range.hi;
      return static_cast<double>(
          pick(rng, static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)));
    }
    if (range.specials && coin(rng, 0.03)) {
      static constexpr double specials[] = {kNaN, kInf, -kInf};
      return specials[pick(rng, 0, 2)];
    }
    if (range.whole)
      return static_cast<double>(
          pick(rng, static_cast<std::int64_t>(range.lo), static_cast<std::int64_t>(range.hi)));
    return std::uniform_real_distribution<double>(range.lo, range.hi)(rng);
  });
}

/// `count` shapes that broadcast together: one shape with dims replaced by 1
/// and leading dims dropped at random.
static std::vector<Ints> broadcast_shapes(Rng& rng, std::size_t n) {
  const Ints out = random_shape(rng);
  std::vector<Ints> shapes(n, out);
  for (Ints& s : shapes) {
    for (std::int64_t& d : s)
      if (coin(rng, 0.3)) d = 1;
    if (coin(rng, 0.3)) s.erase(s.begin(), s.begin() + pick(rng, 0, std::ssize(s)));
  }
  return shapes;
}

// --- running a rule against the reference --------------------------------------------------



struct Input {  // a flattened tensor argument and its name
  std::string name;
  Tensor value;
};

static void flatten(const Value& v, const std::string& name, std::vector<Input>& out) {
  if (v.is_tensor()) {
    out.push_back({name, v.tensor()});
    return;
  }
  for (std::size_t i = 0; i < v.fields().size(); ++i)
    flatten(v.fields()[i], fmt::format("{}.{}", name, i), out);
}

static void flatten(const Value& v, std::vector<Tensor>& out) {
  if (v.is_tensor()) {
    out.push_back(v.tensor());
    return;
  }
  for (const Value& f : v.fields()) flatten(f, out);
}

static void flatten(const ir::Type& t, std::vector<const ir::TensorTypeNode*>& out) {
  if (const auto* tensor = t.as<ir::TensorTypeNode>()) {
    out.push_back(tensor);
    return;
  }
  for (const ir::Type& f : t.as<ir::TupleTypeNode>()->fields) flatten(f, out);
}

/// How the static types of a call's arguments are made from their run-time shapes.
class Typer {
 public:
  Typer(Rng& rng, const Call& call) : rng_(rng), call_(call) {
    dynamic_ = !call.all_static && coin(rng, 0.8);
  }

  /// A dim of extent `d`: static, Any, or the symbol "s<d>" (so that equal
  /// extents share one symbol, as a typed program would say).
  ir::Dim dim(std::int64_t d, bool keep_static) {
    if (!dynamic_ || keep_static) return d;
    switch (pick(rng_, 0, 3)) {
      case 0:
        return ir::Any;
      case 1:
        return ir::Dim(fmt::format("s{}", d));
      default:
        return d;
    }
  }

  ir::Type type_of(const Value& v) {
    if (v.is_tensor()) {
      const bool keep = call_.static_inputs.count(next_++) != 0;
      std::vector<ir::Dim> dims;
      for (std::int64_t d : v.tensor().shape()) dims.push_back(dim(d, keep));
      return ir::tensor_type(std::move(dims), v.tensor().dtype());
    }
    std::vector<ir::Type> fields;
    for (const Value& f : v.fields()) fields.push_back(type_of(f));
    return ir::tuple_type(std::move(fields));
  }

 private:
  Rng& rng_;
  const Call& call_;
  bool dynamic_ = false;
  std::size_t next_ = 0;
};


/// A few ulps elementwise; Σ|x|·n·ε (in the accumulator's ε) for reductions
/// and products, with |x| and n bounded by the inputs' largest finite
/// element and extent. Exact for integers and bool; NaN matches NaN. Code
/// that computes in the dtype (`in_dtype`: the JIT) rounds each step of a
/// composite op (gelu's 1 + erf(x) near -3): elementwise it may also be off
/// by a few ulps of the inputs' magnitude.
static Tolerance tolerance_for(const ir::OpDef& op, std::span<const Input> inputs, DType dtype,
                               bool in_dtype) {
  if (!is_floating(dtype)) return {.rtol = 0, .atol = 0, .equal_nan = true};
  const bool accumulates =
      op.pattern == ir::OpPattern::reduction || op.pattern == ir::OpPattern::out_elemwise_fusable;
  if (!accumulates && !in_dtype) return {.rtol = 4 * epsilon(dtype), .atol = 1e-300, .equal_nan = true};
  double max_abs = 1;
  double extent = 1;
  for (const Input& in : inputs) {
    for (std::int64_t d : in.value.shape()) extent = std::max(extent, static_cast<double>(d));
    if (!is_floating(in.value.dtype())) continue;
    for (std::int64_t i = 0; i < in.value.numel(); ++i) {
      const double v = std::fabs(in.value.element_as_double(i));
      if (std::isfinite(v)) max_abs = std::max(max_abs, v);
    }
  }
  if (!accumulates) return {.rtol = 4 * epsilon(dtype), .atol = 8 * epsilon(dtype) * max_abs, .equal_nan = true};
  return {.rtol = 4 * epsilon(dtype),
          .atol = 8 * epsilon(te::accumulator_dtype(dtype)) * max_abs * max_abs * extent,
          .equal_nan = true};
}

void check_rule(const ir::OpDef& op, const Call& call, Rng& rng, const RuleRunner& runner,
                bool in_dtype) {
  std::vector<Input> inputs;
  for (std::size_t i = 0; i < call.args.size(); ++i)
    flatten(call.args[i], std::string(op.arg_names[i]), inputs);
  Typer typer(rng, call);
  std::vector<ir::Type> types;
  std::string type_text;
  for (const Value& arg : call.args) {
    types.push_back(typer.type_of(arg));
    type_text += fmt::format("{} ", ir::to_string(types.back()));
  }
  std::string attr_text;
  for (const auto& [name, value] : call.attrs.items())
    attr_text += fmt::format("{}={} ", name, ir::to_string(value));
  INFO(op.name << " on " << type_text << "with " << attr_text);

  // The call type-checks; the rule gives the types the relation gives.
  std::vector<const ir::TensorTypeNode*> result_types;
  const ir::Type result = op.type_relation(types, call.attrs);
  flatten(result, result_types);
  std::vector<const ir::TensorTypeNode*> input_types;
  for (const ir::Type& t : types) flatten(t, input_types);
  REQUIRE(input_types.size() == inputs.size());
  te::SymbolTable symbols;
  std::vector<te::Tensor> placeholders;
  std::vector<Tensor> values;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    placeholders.push_back(te::placeholder_for(*input_types[i], inputs[i].name, symbols));
    values.push_back(inputs[i].value);
  }
  const std::vector<te::Tensor> outputs = op.compute(placeholders, call.attrs);
  INFO("rule:\n" << te::to_string(outputs));
  REQUIRE(outputs.size() == result_types.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    CHECK(outputs[i].dtype() == result_types[i]->dtype);
    CHECK(outputs[i].ndim() == result_types[i]->rank());
  }

  std::vector<Tensor> expected;
  flatten(op.reference(call.args, call.attrs), expected);
  const std::vector<Tensor> actual = runner(op, outputs, placeholders, values, expected);
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i)
    CHECK_THAT(actual[i], IsCloseTo(expected[i], tolerance_for(op, inputs, expected[i].dtype(), in_dtype)));
}


// --- generators, one per op with a rule --------------------------------------------------------

static ir::AttrValue ints(Ints v) {
  return v;
}

static Generator unary_floating(Range range = {}) {
  return [range](Rng& rng) {
    return Call{{random_tensor(rng, random_shape(rng), any_of(rng, kFloats), range)}};
  };
}

static Generator binary_numeric(Range a_range = {}, Range b_range = {}, bool nonzero_b = false) {
  return [=](Rng& rng) {
    const std::vector<Ints> shapes = broadcast_shapes(rng, 2);
    const DType dtype = any_of(rng, kNumeric);
    Tensor b = random_tensor(rng, shapes[1], dtype, b_range);
    if (nonzero_b && is_integer(dtype))  // integer division by zero is an error path
      b = make_tensor(shapes[1], dtype, [&] { return static_cast<double>(pick(rng, 1, 3)); });
    return Call{{random_tensor(rng, shapes[0], dtype, a_range), b}};
  };
}

static Generator binary_of(std::span<const DType> dtypes) {
  return [dtypes](Rng& rng) {
    const std::vector<Ints> shapes = broadcast_shapes(rng, 2);
    const DType dtype = any_of(rng, dtypes);
    const Range whole{.lo = -2, .hi = 2, .whole = true};  // equal elements for comparisons
    return Call{
        {random_tensor(rng, shapes[0], dtype, whole), random_tensor(rng, shapes[1], dtype, whole)}};
  };
}

/// A reduction over random axes (all for []), numbered from either end;
/// reduced extents are not empty when `nonempty`.
static Call reduction_call(Rng& rng, std::span<const DType> dtypes, bool nonempty) {
  Ints shape = random_shape(rng);
  Ints axes;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (coin(rng, 0.4))
      axes.push_back(coin(rng) ? static_cast<std::int64_t>(d)
                               : std::int64_t(d) - std::ssize(shape));
  std::shuffle(axes.begin(), axes.end(), rng);
  if (nonempty)
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const bool reduced =
          axes.empty() ||
          std::find_if(axes.begin(), axes.end(), [&](std::int64_t a) {
            return (a < 0 ? a + std::ssize(shape) : a) == static_cast<std::int64_t>(d);
          }) != axes.end();
      if (reduced && shape[d] == 0) shape[d] = pick(rng, 1, 3);
    }
  const DType dtype = any_of(rng, dtypes);
  return {{random_tensor(rng, shape, dtype, {.lo = -3, .hi = 3, .whole = coin(rng)})},
          {{"axes", ints(axes)}, {"keepdims", coin(rng)}}};
}

/// An axis of a rank-`rank` tensor, numbered from either end.
static std::int64_t random_axis(Rng& rng, std::size_t rank) {
  const std::int64_t axis = pick(rng, 0, static_cast<std::int64_t>(rank) - 1);
  return coin(rng) ? axis : axis - static_cast<std::int64_t>(rank);
}

static Call reshape_call(Rng& rng) {
  const Ints shape = random_shape(rng);
  // The target regroups x's dims (products of consecutive runs), plus 1s.
  Ints target;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!target.empty() && coin(rng, 0.4))
      target.back() *= shape[d];
    else
      target.push_back(shape[d]);
  }
  if (coin(rng, 0.3))
    target.insert(target.begin() + pick(rng, 0, std::ssize(target)), std::int64_t{1});
  bool allow_zero = coin(rng, 0.2);
  // Without allow_zero a 0 in newshape copies x's dim: a literal 0 needs it.
  for (std::size_t i = 0; i < target.size(); ++i)
    if (target[i] == 0 && !(i < shape.size() && shape[i] == 0)) allow_zero = true;
  Ints newshape = target;
  if (!allow_zero)
    for (std::size_t i = 0; i < std::min(shape.size(), target.size()); ++i)
      if (target[i] == shape[i] && coin(rng, 0.3)) newshape[i] = 0;  // copy x's dim
  if (!target.empty() && coin(rng, 0.6)) {
    const auto j = static_cast<std::size_t>(pick(rng, 0, std::ssize(target) - 1));
    std::int64_t rest = 1;
    for (std::size_t i = 0; i < target.size(); ++i)
      if (i != j) rest *= target[i];
    if (rest != 0) newshape[j] = -1;  // a 0 among the others makes -1 ambiguous
  }
  return {{random_tensor(rng, shape, any_of(rng, kAllDTypes))},
          {{"newshape", ints(newshape)}, {"allow_zero", allow_zero}}};
}

static Call squeeze_call(Rng& rng) {
  Ints shape = random_shape(rng);
  if (coin(rng, 0.3)) {
    return {{random_tensor(rng, shape, DType::f32)}, {{"axes", ints({})}}, {}, true};
  }
  Ints axes;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (coin(rng, 0.4)) {
      shape[d] = 1;
      axes.push_back(coin(rng) ? std::int64_t(d) : std::int64_t(d) - std::ssize(shape));
    }
  // No axis named is axes []: every dim then stays static.
  return {
      {random_tensor(rng, shape, any_of(rng, kNumeric))}, {{"axes", ints(axes)}}, {}, axes.empty()};
}

static Call concatenate_call(Rng& rng) {
  const Ints shape = random_shape(rng, 1);
  const std::int64_t axis = random_axis(rng, shape.size());
  const std::size_t a = static_cast<std::size_t>(axis < 0 ? axis + std::ssize(shape) : axis);
  const DType dtype = any_of(rng, kAllDTypes);
  std::vector<Value> fields;
  for (std::int64_t f = pick(rng, 1, 3); f > 0; --f) {
    Ints s = shape;
    s[a] = random_dim(rng);
    fields.emplace_back(random_tensor(rng, s, dtype));
  }
  return {{Value::tuple(std::move(fields))}, {{"axis", axis}}};
}

static Call split_call(Rng& rng) {
  Ints shape = random_shape(rng, 1);
  const std::int64_t axis = random_axis(rng, shape.size());
  const std::size_t a = static_cast<std::size_t>(axis < 0 ? axis + std::ssize(shape) : axis);
  ir::Attrs attrs{{"axis", axis}};
  if (coin(rng)) {
    const std::int64_t sections = pick(rng, 1, 3);
    shape[a] = sections * pick(rng, 0, 2);
    attrs.set("sections", sections);
  } else {
    Ints indices;
    for (std::int64_t n = pick(rng, 1, 3); n > 0; --n) indices.push_back(pick(rng, 0, shape[a]));
    std::sort(indices.begin(), indices.end());
    attrs.set("indices", ints(indices));
  }
  return {{random_tensor(rng, shape, any_of(rng, kNumeric))}, attrs};
}

/// A slice bound: small values from either end, or beyond any extent.
static std::int64_t random_bound(Rng& rng) {
  if (coin(rng, 0.1))
    return coin(rng) ? std::numeric_limits<std::int64_t>::max()
                     : std::numeric_limits<std::int64_t>::min();
  return pick(rng, -6, 6);
}

static Call strided_slice_call(Rng& rng) {
  const Ints shape = random_shape(rng, 1);
  const auto k = static_cast<std::size_t>(pick(rng, 1, std::ssize(shape)));
  Ints begin, end, strides, axes;
  std::vector<std::int64_t> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const bool named = coin(rng);
  const bool strided = coin(rng);
  for (std::size_t i = 0; i < k; ++i) {
    begin.push_back(random_bound(rng));
    end.push_back(random_bound(rng));
    if (strided) strides.push_back(pick(rng, 1, 3));
    if (named) axes.push_back(order[i]);
  }
  return {{random_tensor(rng, shape, any_of(rng, kNumeric))},
          {{"begin", ints(begin)},
           {"end", ints(end)},
           {"strides", ints(strides)},
           {"axes", ints(axes)}}};
}

static Call take_call(Rng& rng, bool embedding) {
  Ints data_shape = embedding ? Ints{pick(rng, 1, 5), random_dim(rng)} : random_shape(rng, 1);
  const std::int64_t axis = embedding ? 0 : random_axis(rng, data_shape.size());
  const std::size_t a = static_cast<std::size_t>(axis < 0 ? axis + std::ssize(data_shape) : axis);
  Ints index_shape = random_shape(rng, 0, 2);
  if (data_shape[a] == 0) {  // no index is in range: only an empty set of indices
    index_shape.push_back(0);
  }
  const std::int64_t extent = data_shape[a];
  const DType index_dtype = coin(rng) ? DType::i32 : DType::i64;
  Tensor indices = make_tensor(index_shape, index_dtype,
                               [&] { return static_cast<double>(pick(rng, 0, extent - 1)); });
  Call call{{random_tensor(rng, data_shape, any_of(rng, kAllDTypes)), indices}};
  if (!embedding) call.attrs.set("axis", axis);
  return call;
}

static Call arange_call(Rng& rng) {
  const DType dtype = any_of(rng, kNumeric);
  if (is_floating(dtype)) {
    const auto quarter = [&](std::int64_t lo, std::int64_t hi) {
      return static_cast<double>(pick(rng, lo, hi)) / 4;
    };
    double step = 0;
    while (step == 0) step = quarter(-8, 8);
    return {{scalar_of(dtype, quarter(-20, 20)), scalar_of(dtype, quarter(-20, 20)),
             scalar_of(dtype, step)}};
  }
  std::int64_t step = 0;
  while (step == 0) step = pick(rng, -5, 5);
  return {{scalar_of(dtype, static_cast<double>(pick(rng, -20, 20))),
           scalar_of(dtype, static_cast<double>(pick(rng, -20, 20))),
           scalar_of(dtype, static_cast<double>(step))}};
}

std::map<const ir::OpDef*, Generator> generators() {
  std::map<const ir::OpDef*, Generator> g;
  // elementwise
  // Element-wise ops of one floating-point operand, from the registry.
  for (const ir::OpDef* op : ir::all_ops())
    if (op->float_inputs) g[op] = unary_floating({.lo = op->float_inputs->lo, .hi = op->float_inputs->hi});
  for (const ir::OpDef* op : {&ops::neg(), &ops::abs()})
    g[op] = [](Rng& rng) {
      return Call{
          {random_tensor(rng, random_shape(rng), any_of(rng, kNumeric), {.lo = -1e6, .hi = 1e6})}};
    };
  g[&ops::cast()] = [](Rng& rng) {
    return Call{
        {random_tensor(rng, random_shape(rng), any_of(rng, kAllDTypes), {.lo = -300, .hi = 300})},
        {{"dtype", any_of(rng, kAllDTypes)}}};
  };
  g[&ops::logical_not()] = [](Rng& rng) {
    return Call{{random_tensor(rng, random_shape(rng), DType::boolean)}};
  };
  // binary
  for (const ir::OpDef* op :
       {&ops::add(), &ops::sub(), &ops::mul(), &ops::maximum(), &ops::minimum()})
    g[op] = binary_numeric({.lo = -100, .hi = 100}, {.lo = -100, .hi = 100});
  g[&ops::div()] = binary_numeric({.lo = -100, .hi = 100}, {}, true);
  g[&ops::power()] = binary_numeric({.lo = -3, .hi = 3}, {.lo = 0, .hi = 3});
  static constexpr DType kAll[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                   DType::i8,  DType::i32, DType::i64, DType::boolean};
  for (const ir::OpDef* op : {&ops::equal(), &ops::not_equal(), &ops::less(), &ops::less_equal(),
                              &ops::greater(), &ops::greater_equal()})
    g[op] = binary_of(kAll);
  static constexpr DType kBool[] = {DType::boolean};
  for (const ir::OpDef* op : {&ops::logical_and(), &ops::logical_or()}) g[op] = binary_of(kBool);
  g[&ops::where()] = [](Rng& rng) {
    const std::vector<Ints> shapes = broadcast_shapes(rng, 3);
    const DType dtype = any_of(rng, kAllDTypes);
    return Call{{random_tensor(rng, shapes[0], DType::boolean),
                 random_tensor(rng, shapes[1], dtype), random_tensor(rng, shapes[2], dtype)}};
  };
  // reductions
  g[&ops::sum()] = [](Rng& rng) { return reduction_call(rng, kNumeric, false); };
  g[&ops::mean()] = [](Rng& rng) { return reduction_call(rng, kFloats, false); };
  g[&ops::max()] = [](Rng& rng) { return reduction_call(rng, kNumeric, true); };
  g[&ops::min()] = [](Rng& rng) { return reduction_call(rng, kNumeric, true); };
  g[&ops::argmax()] = [](Rng& rng) {
    Ints shape = random_shape(rng, 1);
    const std::int64_t axis = random_axis(rng, shape.size());
    std::int64_t& extent =
        shape[static_cast<std::size_t>(axis < 0 ? axis + std::ssize(shape) : axis)];
    extent = std::max<std::int64_t>(extent, 1);
    const Range ties{.lo = -2, .hi = 2, .whole = true};  // equal maxima: the first wins
    return Call{{random_tensor(rng, shape, any_of(rng, kNumeric), ties)},
                {{"axis", axis}, {"keepdims", coin(rng)}}};
  };
  for (const ir::OpDef* op : {&ops::softmax(), &ops::log_softmax()})
    g[op] = [](Rng& rng) {
      const Ints shape = random_shape(rng, 1);
      return Call{{random_tensor(rng, shape, any_of(rng, kFloats))},
                  {{"axis", random_axis(rng, shape.size())}}};
    };
  g[&ops::layer_norm()] = [](Rng& rng) {
    const Ints shape = random_shape(rng, 1);
    const std::int64_t axis = random_axis(rng, shape.size());
    const std::int64_t n =
        shape[static_cast<std::size_t>(axis < 0 ? axis + std::ssize(shape) : axis)];
    const DType dtype = any_of(rng, kFloats);
    return Call{{random_tensor(rng, shape, dtype), random_tensor(rng, {n}, dtype),
                 random_tensor(rng, {n}, dtype)},
                {{"axis", axis}, {"epsilon", coin(rng) ? 1e-5 : 0.5}}};
  };
  // linear algebra
  g[&ops::dense()] = [](Rng& rng) {
    Ints x_shape = random_shape(rng, 1, 3);
    const std::int64_t k = x_shape.back();
    const std::int64_t n = random_dim(rng);
    const DType dtype = any_of(rng, kNumeric);
    return Call{{random_tensor(rng, x_shape, dtype), random_tensor(rng, {n, k}, dtype),
                 random_tensor(rng, {n}, dtype)}};
  };
  for (const ir::OpDef* op : {&ops::matmul(), &ops::batch_matmul()})
    g[op] = [op](Rng& rng) {
      const bool batched = op == &ops::batch_matmul();
      const bool ta = coin(rng), tb = coin(rng);
      const std::int64_t m = random_dim(rng), k = random_dim(rng), n = random_dim(rng);
      Ints a = ta ? Ints{k, m} : Ints{m, k};
      Ints b = tb ? Ints{n, k} : Ints{k, n};
      if (batched) {
        const std::int64_t batch = random_dim(rng);
        a.insert(a.begin(), coin(rng, 0.3) ? 1 : batch);
        b.insert(b.begin(), coin(rng, 0.3) ? 1 : batch);
      }
      const DType dtype = any_of(rng, kNumeric);
      return Call{{random_tensor(rng, a, dtype), random_tensor(rng, b, dtype)},
                  {{"transpose_a", ta}, {"transpose_b", tb}}};
    };
  // shape and data movement
  g[&ops::reshape()] = reshape_call;
  g[&ops::transpose()] = [](Rng& rng) {
    const Ints shape = random_shape(rng);
    Ints axes;
    if (coin(rng, 0.7)) {
      for (std::size_t d = 0; d < shape.size(); ++d) axes.push_back(std::int64_t(d));
      std::shuffle(axes.begin(), axes.end(), rng);
      for (std::int64_t& a : axes)
        if (coin(rng, 0.3)) a -= std::ssize(shape);
    }
    return Call{{random_tensor(rng, shape, any_of(rng, kAllDTypes))}, {{"axes", ints(axes)}}};
  };
  g[&ops::expand_dims()] = [](Rng& rng) {
    const Ints shape = random_shape(rng, 0, 3);
    return Call{{random_tensor(rng, shape, any_of(rng, kNumeric))},
                {{"axis", random_axis(rng, shape.size() + 1)}}};
  };
  g[&ops::squeeze()] = squeeze_call;
  g[&ops::concatenate()] = concatenate_call;
  g[&ops::split()] = split_call;
  g[&ops::strided_slice()] = strided_slice_call;
  g[&ops::dynamic_strided_slice()] = [](Rng& rng) {
    const Ints shape = random_shape(rng);
    const auto k = static_cast<std::size_t>(pick(rng, 0, std::ssize(shape)));
    Ints begin, end;
    for (std::size_t i = 0; i < k; ++i) {
      begin.push_back(random_bound(rng));
      end.push_back(random_bound(rng));
    }
    return Call{
        {random_tensor(rng, shape, any_of(rng, kNumeric)), i64s(begin), i64s(end)}, {}, {1, 2}};
  };
  g[&ops::take()] = [](Rng& rng) { return take_call(rng, false); };
  g[&ops::embedding()] = [](Rng& rng) { return take_call(rng, true); };
  // creation
  for (const ir::OpDef* op : {&ops::zeros(), &ops::ones()})
    g[op] = [](Rng& rng) {
      return Call{{i64s(random_shape(rng))}, {{"dtype", any_of(rng, kAllDTypes)}}, {0}};
    };
  g[&ops::full()] = [](Rng& rng) {
    const DType value_dtype = any_of(rng, kAllDTypes);
    return Call{
        {i64s(random_shape(rng)), random_tensor(rng, {}, value_dtype, {.lo = -200, .hi = 200})},
        {{"dtype", any_of(rng, kAllDTypes)}},
        {0}};
  };
  g[&ops::arange()] = arange_call;
  // collecting loop results
  g[&ops::dynamic_update_slice()] = [](Rng& rng) {
    Ints dest = random_shape(rng, 1);
    Ints update = dest;
    update[0] = pick(rng, 0, dest[0]);
    const DType dtype = any_of(rng, kAllDTypes);
    const std::int64_t offset = pick(rng, 0, dest[0] - update[0]);
    return Call{{random_tensor(rng, dest, dtype), random_tensor(rng, update, dtype),
                 Tensor::scalar<std::int64_t>(offset)}};
  };
  return g;
}


}  // namespace nimble::testing
