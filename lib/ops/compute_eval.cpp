#include "ops/compute_eval.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "ops/reference_util.hpp"
#include "runtime/element.hpp"
#include "support/check.hpp"

namespace nimble::te {

namespace {

// A scalar during evaluation: `f` (in double) for floating dtypes, `i` for
// integers (wrapped to their dtype) and bool (0 or 1). The dtype is the
// expression's, so it is not stored.
struct Scalar {
  double f = 0;
  std::int64_t i = 0;
};

Scalar of_int(std::int64_t v) {
  return {0, v};
}
Scalar of_float(double v) {
  return {v, 0};
}
Scalar of_bool(bool v) {
  return {0, v ? 1 : 0};
}

std::int64_t wrap(std::uint64_t bits, DType dtype) noexcept {
  const auto v = static_cast<std::int64_t>(bits);  // modular since C++20
  switch (dtype) {
    case DType::i8:
      return static_cast<std::int8_t>(v);
    case DType::i32:
      return static_cast<std::int32_t>(v);
    default:
      return v;
  }
}

std::int64_t int_min(DType dtype) noexcept {
  switch (dtype) {
    case DType::i8:
      return std::numeric_limits<std::int8_t>::min();
    case DType::i32:
      return std::numeric_limits<std::int32_t>::min();
    default:
      return std::numeric_limits<std::int64_t>::min();
  }
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// A typed element as a Scalar.
template <class T>
Scalar scalar_of(T v) {
  if constexpr (ops::ref::is_float_v<T>)
    return of_float(to_double(v));
  else
    return of_int(static_cast<std::int64_t>(v));
}

// `v` (of dtype `from`) converted as the cast op converts (ref::convert):
// floating values convert from their double, integers from int64.
Scalar convert(Scalar v, DType from, DType to) {
  return visit_dtype(to, [&](auto tag) {
    using To = decltype(tag);
    if (is_floating(from)) return scalar_of(ops::ref::convert<To>(v.f));
    if (from == DType::boolean) return scalar_of(ops::ref::convert<To>(v.i != 0));
    return scalar_of(ops::ref::convert<To>(v.i));
  });
}

Scalar read(const nimble::Tensor& t, std::int64_t flat) {
  return visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return scalar_of(static_cast<const T*>(t.raw_data())[flat]);
  });
}

// Stores `v` rounded (floating point) or wrapped (integers) to t's dtype.
void store(nimble::Tensor& t, std::int64_t flat, Scalar v) {
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* data = static_cast<T*>(t.raw_data());
    if constexpr (ops::ref::is_float_v<T>)
      data[flat] = ops::ref::from_double<T>(v.f);
    else if constexpr (std::is_same_v<T, bool>)
      data[flat] = v.i != 0;
    else
      data[flat] = static_cast<T>(v.i);
  });
}

double sigmoid_of(double x) {
  // As the reference: neither branch overflows.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

double unary_float(UnaryOp op, double x) {
  switch (op) {
#define NIMBLE_UNARY(name, operands, cost, value) \
  case UnaryOp::name:                              \
    return value;
#include "ops/unary_ops.def"
#undef NIMBLE_UNARY
  }
  NIMBLE_ASSERT(false, "unary_float: not a unary op");
  return 0;
}

// Comparisons and NaN-propagating extrema, on doubles or int64.
template <class V>
std::optional<bool> compare(BinaryOp op, V a, V b) {
  switch (op) {
    case BinaryOp::eq:
      return a == b;
    case BinaryOp::ne:
      return a != b;
    case BinaryOp::lt:
      return a < b;
    case BinaryOp::le:
      return a <= b;
    case BinaryOp::gt:
      return a > b;
    case BinaryOp::ge:
      return a >= b;
    default:
      return std::nullopt;
  }
}

double extremum(bool is_max, double a, double b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return (is_max ? a < b : b < a) ? b : a;
}

Scalar binary_float(BinaryOp op, double a, double b) {
  if (const auto c = compare(op, a, b)) return of_bool(*c);
  switch (op) {
    case BinaryOp::add:
      return of_float(a + b);
    case BinaryOp::sub:
      return of_float(a - b);
    case BinaryOp::mul:
      return of_float(a * b);
    case BinaryOp::div:
      return of_float(a / b);
    case BinaryOp::rem:
      return of_float(std::fmod(a, b));
    case BinaryOp::maximum:
      return of_float(extremum(true, a, b));
    case BinaryOp::minimum:
      return of_float(extremum(false, a, b));
    case BinaryOp::pow:
      return of_float(std::pow(a, b));
    default:
      break;
  }
  NIMBLE_ASSERT(false, "binary_float: not a floating-point op");
  return {};
}

std::uint64_t power(std::uint64_t base, std::uint64_t exponent) noexcept {
  std::uint64_t result = 1;
  for (; exponent != 0; exponent >>= 1) {
    if (exponent & 1) result *= base;
    base *= base;
  }
  return result;
}

// An element-level failure; the evaluator adds the stage and the index.
struct ElementError {
  std::string what;
};

// `op` on integers of `dtype`; a failed condition throws ElementError when
// `checked`, and is a bug in the rule otherwise.
Scalar binary_int(BinaryOp op, std::int64_t a, std::int64_t b, DType dtype, bool checked) {
  if (const auto c = compare(op, a, b)) return of_bool(*c);
  const auto fail = [checked](const char* what) {
    NIMBLE_ASSERT(checked, "an unchecked integer operation failed: the rule is missing a check");
    throw ElementError{what};
  };
  const auto ua = static_cast<std::uint64_t>(a);
  const auto ub = static_cast<std::uint64_t>(b);
  const bool overflows = a == int_min(dtype) && b == -1;
  switch (op) {
    case BinaryOp::add:
      return of_int(wrap(ua + ub, dtype));
    case BinaryOp::sub:
      return of_int(wrap(ua - ub, dtype));
    case BinaryOp::mul:
      return of_int(wrap(ua * ub, dtype));
    case BinaryOp::div:
    case BinaryOp::floordiv:
      if (b == 0) fail("integer division by zero");
      if (overflows) fail("integer overflow: INT_MIN / -1");
      return of_int(op == BinaryOp::div ? a / b : floor_div(a, b));
    case BinaryOp::rem:
    case BinaryOp::floormod:
      if (b == 0) fail("integer division by zero");
      if (overflows)
        return of_int(0);  // defined, but a trap on x86: generated code special-cases it
      return of_int(op == BinaryOp::rem ? a % b : a - floor_div(a, b) * b);
    case BinaryOp::maximum:
      return of_int(std::max(a, b));
    case BinaryOp::minimum:
      return of_int(std::min(a, b));
    case BinaryOp::pow:
      if (b < 0) fail("negative exponent in integer power");
      return of_int(wrap(power(ua, ub), dtype));
    case BinaryOp::logical_and:
      return of_bool(a != 0 && b != 0);
    case BinaryOp::logical_or:
      return of_bool(a != 0 || b != 0);
    default:
      break;
  }
  NIMBLE_ASSERT(false, "binary_int: not an integer op");
  return {};
}

std::string index_string(std::span<const std::int64_t> index) {
  return fmt::format("[{}]", fmt::join(index, ", "));
}

class Evaluator {
 public:
  Evaluator(std::span<const Tensor> placeholders, std::span<const nimble::Tensor> inputs) {
    NIMBLE_ASSERT(placeholders.size() == inputs.size(), "evaluate: one input per placeholder");
    for (std::size_t i = 0; i < placeholders.size(); ++i) bind(placeholders[i], inputs[i]);
    // Dims that are not a bare Var (constants, expressions of Vars) are
    // checked once every Var has its value.
    for (std::size_t i = 0; i < placeholders.size(); ++i) check_dims(placeholders[i], inputs[i]);
  }

  void materialize(const Tensor& t) {
    if (values_.count(t.get()) != 0) return;
    NIMBLE_ASSERT(!t.is_placeholder(), "evaluate: a placeholder the outputs read has no input");
    stage_ = t.get();
    index_.clear();
    for (const Check& c : t->checks)
      if (eval(c.condition).i == 0) throw_error(c.kind, "{}: {}", t.name(), c.message);
    std::vector<std::int64_t> dims;
    for (const Expr& d : t.shape()) {
      dims.push_back(eval(d).i);
      NIMBLE_ASSERT(dims.back() >= 0, "a negative extent: the rule is missing a check");
    }
    nimble::Tensor out =
        nimble::Tensor::empty(nimble::Shape(std::span<const std::int64_t>(dims)), t.dtype());
    std::vector<std::int64_t*> slots;
    for (const Var& axis : t->axes) slots.push_back(&vars_[axis.node()]);
    index_.assign(dims.size(), 0);
    for (std::int64_t flat = 0; flat < out.numel(); ++flat) {
      for (std::size_t d = 0; d < dims.size(); ++d) *slots[d] = index_[d];
      store(out, flat, eval_element(t->body));
      for (std::size_t d = dims.size(); d-- > 0;) {  // advance the odometer
        if (++index_[d] < dims[d]) break;
        index_[d] = 0;
      }
    }
    values_.emplace(t.get(), std::move(out));
  }

  [[nodiscard]] const nimble::Tensor& value(const Tensor& t) const { return values_.at(t.get()); }

 private:
  // A Var's value and, for shape Vars, which placeholder dim bound it.
  struct Binding {
    std::string source;
  };

  void bind(const Tensor& p, const nimble::Tensor& input) {
    NIMBLE_ASSERT(p.is_placeholder(), "evaluate: placeholders must be placeholders");
    if (input.dtype() != p.dtype())
      throw_error(ErrorKind::type_error, "{} must be {}, got {}", p.name(), to_string(p.dtype()),
                  to_string(input.dtype()));
    if (input.rank() != p.ndim())
      throw_error(ErrorKind::invalid_argument, "{} must have rank {}, got {}", p.name(), p.ndim(),
                  to_string(input.shape()));
    for (std::size_t d = 0; d < p.ndim(); ++d) {
      const auto* var = p.shape()[d].as<VarNode>();
      if (!var) continue;
      const std::int64_t extent = input.shape()[d];
      const auto [it, fresh] = vars_.emplace(var, extent);
      if (fresh) {
        sources_.emplace(var, fmt::format("{} dim {}", p.name(), d));
      } else if (it->second != extent) {
        throw_error(ErrorKind::invalid_argument, "{} {} has {} at dim {} but {} is {} (from {})",
                    p.name(), to_string(input.shape()), extent, d, var->name, it->second,
                    sources_.at(var));
      }
    }
    values_.emplace(p.get(), input);
  }

  void check_dims(const Tensor& p, const nimble::Tensor& input) {
    for (std::size_t d = 0; d < p.ndim(); ++d) {
      const Expr& dim = p.shape()[d];
      if (dim.as<VarNode>()) continue;
      const std::int64_t expected = eval(dim).i;
      if (input.shape()[d] == expected) continue;
      if (dim.kind() == ExprKind::int_imm)
        throw_error(ErrorKind::invalid_argument, "{} {} has {} at dim {}, expected {}", p.name(),
                    to_string(input.shape()), input.shape()[d], d, expected);
      throw_error(ErrorKind::invalid_argument, "{} {} has {} at dim {} but {} is {}", p.name(),
                  to_string(input.shape()), input.shape()[d], d, to_string(dim), expected);
    }
  }

  // The body at the current index; element errors name the stage and index.
  Scalar eval_element(const Expr& body) {
    try {
      return eval(body);
    } catch (const ElementError& e) {
      throw_error(ErrorKind::runtime_error, "{}: {} at index {}", stage_->name, e.what,
                  index_string(index_));
    }
  }

  Scalar eval(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::int_imm:
        return of_int(e.as<IntImmNode>()->value);
      case ExprKind::float_imm:
        return of_float(e.as<FloatImmNode>()->value);
      case ExprKind::var: {
        const auto it = vars_.find(e.as<VarNode>());
        NIMBLE_ASSERT(it != vars_.end(), "evaluate: a Var with no value");
        return of_int(it->second);
      }
      case ExprKind::unary:
        return eval_unary(*e.as<UnaryNode>());
      case ExprKind::binary:
        return eval_binary(*e.as<BinaryNode>());
      case ExprKind::select: {
        const auto* s = e.as<SelectNode>();
        return eval(s->cond).i != 0 ? eval(s->a) : eval(s->b);
      }
      case ExprKind::cast: {
        const Expr& value = e.as<CastNode>()->value;
        return convert(eval(value), value.dtype(), e.dtype());
      }
      case ExprKind::load:
        return eval_load(*e.as<LoadNode>());
      case ExprKind::reduce:
        return eval_reduce(*e.as<ReduceNode>());
    }
    return {};
  }

  Scalar eval_unary(const UnaryNode& u) {
    const Scalar x = eval(u.a);
    const DType dtype = u.a.dtype();
    if (is_floating(dtype)) return of_float(unary_float(u.op, x.f));
    switch (u.op) {
      case UnaryOp::neg:
        return of_int(wrap(0 - static_cast<std::uint64_t>(x.i), dtype));
      case UnaryOp::abs:
        return of_int(x.i < 0 ? wrap(0 - static_cast<std::uint64_t>(x.i), dtype) : x.i);
      case UnaryOp::logical_not:
        return of_bool(x.i == 0);
      default:
        break;
    }
    NIMBLE_ASSERT(false, "eval_unary: a floating-point op on integers");
    return {};
  }

  Scalar eval_binary(const BinaryNode& b) {
    const Scalar x = eval(b.a);
    const Scalar y = eval(b.b);
    const DType dtype = b.a.dtype();
    if (is_floating(dtype)) return binary_float(b.op, x.f, y.f);
    return binary_int(b.op, x.i, y.i, dtype, b.checked);
  }

  Scalar eval_load(const LoadNode& l) {
    const nimble::Tensor& t = values_.at(l.tensor.get());
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < l.indices.size(); ++d) {
      const std::int64_t i = eval(l.indices[d]).i;
      const std::int64_t extent = t.shape()[d];
      if (i < 0 || i >= extent) {
        NIMBLE_ASSERT(l.checked, "an unchecked load is out of bounds: the rule is missing a check");
        throw ElementError{fmt::format("index {} is out of range for axis {} of {} (extent {})", i,
                                       d, l.tensor.name(), extent)};
      }
      flat = flat * extent + i;
    }
    return read(t, flat);
  }

  Scalar eval_reduce(const ReduceNode& r) {
    std::vector<std::int64_t> extents;
    std::vector<std::int64_t*> slots;
    std::int64_t count = 1;
    for (const IterVar& axis : r.axes) {
      extents.push_back(eval(axis.extent).i);
      count *= extents.back();
      slots.push_back(&vars_[axis.var.node()]);
    }
    const DType dtype = r.source.dtype();
    const bool floating = is_floating(dtype);
    Scalar acc = eval(r.init);
    std::int64_t best = 0;  // argmax
    std::vector<std::int64_t> point(extents.size(), 0);
    for (std::int64_t n = 0; n < count; ++n) {
      for (std::size_t d = 0; d < point.size(); ++d) *slots[d] = point[d];
      const Scalar v = eval(r.source);
      switch (r.reduce_kind) {
        case ReduceKind::sum:
          acc = floating ? of_float(acc.f + v.f)
                         : binary_int(BinaryOp::add, acc.i, v.i, dtype, false);
          break;
        case ReduceKind::max:
        case ReduceKind::min: {
          const bool is_max = r.reduce_kind == ReduceKind::max;
          if (floating) {
            if (!std::isnan(acc.f)) acc.f = extremum(is_max, acc.f, v.f);  // NaN sticks
          } else {
            acc.i = is_max ? std::max(acc.i, v.i) : std::min(acc.i, v.i);
          }
          break;
        }
        case ReduceKind::argmax:
          if (floating ? !std::isnan(acc.f) && (std::isnan(v.f) || acc.f < v.f) : acc.i < v.i) {
            acc = v;
            best = point[0];
          }
          break;
      }
      for (std::size_t d = point.size(); d-- > 0;) {
        if (++point[d] < extents[d]) break;
        point[d] = 0;
      }
    }
    return r.reduce_kind == ReduceKind::argmax ? of_int(best) : acc;
  }

  std::unordered_map<const TensorNode*, nimble::Tensor> values_;
  std::unordered_map<const VarNode*, std::int64_t> vars_;
  std::unordered_map<const VarNode*, std::string> sources_;  // "x dim 0": what bound a shape Var
  const TensorNode* stage_ = nullptr;  // the stage being computed, for messages
  std::vector<std::int64_t> index_;    // and the element
};

}  // namespace

std::vector<nimble::Tensor> evaluate(std::span<const Tensor> outputs,
                                     std::span<const Tensor> placeholders,
                                     std::span<const nimble::Tensor> inputs) {
  Evaluator evaluator(placeholders, inputs);
  for (const Tensor& t : stages(outputs)) evaluator.materialize(t);
  std::vector<nimble::Tensor> results;
  for (const Tensor& t : outputs) {
    const nimble::Tensor& value = evaluator.value(t);
    // Fresh results: an output that is an input (or listed twice) is copied.
    results.push_back(t.is_placeholder() ? value.clone() : value);
  }
  for (std::size_t i = 0; i < results.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (outputs[i].same_as(outputs[j])) results[i] = results[i].clone();
  return results;
}

}  // namespace nimble::te
