#include "nimble/ir/type.hpp"

#include <fmt/format.h>

#include "support/check.hpp"

namespace nimble::ir {

Dim::Dim(std::int64_t value) : kind_(Kind::fixed), value_(value) {
  if (value < 0)
    throw_error(ErrorKind::invalid_argument, "a dim must be >= 0 (or Any, or a symbol), got {}",
                value);
}

Dim::Dim(std::string name, std::optional<std::int64_t> upper_bound)
    : kind_(Kind::symbol), value_(upper_bound.value_or(-1)), name_(std::move(name)) {
  if (name_.empty())
    throw_error(ErrorKind::invalid_argument, "a symbolic dim needs a name, got \"\"");
  if (upper_bound && *upper_bound < 0)
    throw_error(ErrorKind::invalid_argument,
                "the upper bound of dim '{}' must be >= 0, got {}", name_, *upper_bound);
}

std::optional<std::int64_t> Dim::upper_bound() const noexcept {
  if (kind_ == Kind::symbol && value_ >= 0) return value_;
  return std::nullopt;
}

bool operator==(const Dim& a, const Dim& b) noexcept {
  return a.kind_ == b.kind_ && a.value_ == b.value_ && a.name_ == b.name_;
}

std::string to_string(const Dim& dim) {
  switch (dim.kind()) {
    case Dim::Kind::fixed: return std::to_string(dim.value());
    case Dim::Kind::any: return "?";
    case Dim::Kind::symbol:
      if (auto bound = dim.upper_bound()) return fmt::format("{}<={}", dim.name(), *bound);
      return dim.name();
  }
  return "";
}

namespace {
bool same_types(const std::vector<Type>& a, const std::vector<Type>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}
}  // namespace

bool operator==(const Type& a, const Type& b) noexcept {
  if (a.node_ == b.node_) return true;
  if (!a.defined() || !b.defined() || a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case TypeKind::tensor: {
      const auto* x = a.as<TensorTypeNode>();
      const auto* y = b.as<TensorTypeNode>();
      return x->dtype == y->dtype && x->shape == y->shape;
    }
    case TypeKind::tuple:
      return same_types(a.as<TupleTypeNode>()->fields, b.as<TupleTypeNode>()->fields);
    case TypeKind::func: {
      const auto* x = a.as<FuncTypeNode>();
      const auto* y = b.as<FuncTypeNode>();
      return same_types(x->params, y->params) && x->ret == y->ret;
    }
    case TypeKind::adt: {
      const auto* x = a.as<AdtTypeNode>();
      const auto* y = b.as<AdtTypeNode>();
      return x->name == y->name && same_types(x->args, y->args);
    }
    case TypeKind::type_var: return a.as<TypeVarNode>()->name == b.as<TypeVarNode>()->name;
    case TypeKind::incomplete: return false;  // distinct nodes are distinct unknowns
  }
  return false;
}

namespace {
Type checked_depth(Type type) {
  if (type.get()->depth > kMaxTypeDepth)
    throw_error(ErrorKind::resource_exhausted, "a type may nest at most {} levels, this one nests {}",
                kMaxTypeDepth, type.get()->depth);
  return type;
}
}  // namespace

Type tensor_type(std::vector<Dim> shape, DType dtype) {
  if (shape.size() > kMaxTensorRank)
    throw_error(ErrorKind::resource_exhausted, "a tensor type may have rank at most {}, got rank {}",
                kMaxTensorRank, shape.size());
  return Type(make_ref<TensorTypeNode>(std::move(shape), dtype));
}
Type tuple_type(std::vector<Type> fields) {
  return checked_depth(Type(make_ref<TupleTypeNode>(std::move(fields))));
}
Type func_type(std::vector<Type> params, Type ret) {
  return checked_depth(Type(make_ref<FuncTypeNode>(std::move(params), std::move(ret))));
}
Type adt_type(std::string name, std::vector<Type> args) {
  return checked_depth(Type(make_ref<AdtTypeNode>(std::move(name), std::move(args))));
}
Type type_var(std::string name) { return Type(make_ref<TypeVarNode>(std::move(name))); }
Type scalar_type(DType dtype) { return tensor_type({}, dtype); }

namespace {
std::string join_types(const std::vector<Type>& types) {
  std::string out;
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (i) out += ", ";
    out += to_string(types[i]);
  }
  return out;
}
}  // namespace

std::string to_string(const Type& type) {
  if (!type.defined()) return "<unknown>";
  switch (type.kind()) {
    case TypeKind::tensor: {
      const auto* t = type.as<TensorTypeNode>();
      std::string dims;
      for (std::size_t i = 0; i < t->shape.size(); ++i) {
        if (i) dims += ", ";
        dims += to_string(t->shape[i]);
      }
      return fmt::format("{}[{}]", to_string(t->dtype), dims);
    }
    case TypeKind::tuple: {
      const auto& fields = type.as<TupleTypeNode>()->fields;
      // A one-field tuple keeps a trailing comma so that it reads back as a tuple.
      return fmt::format("({}{})", join_types(fields), fields.size() == 1 ? "," : "");
    }
    case TypeKind::func: {
      const auto* f = type.as<FuncTypeNode>();
      return fmt::format("fn({}) -> {}", join_types(f->params), to_string(f->ret));
    }
    case TypeKind::adt: {
      const auto* a = type.as<AdtTypeNode>();
      if (a->args.empty()) return a->name;
      return fmt::format("{}<{}>", a->name, join_types(a->args));
    }
    case TypeKind::type_var: return type.as<TypeVarNode>()->name;
    case TypeKind::incomplete: return fmt::format("?T{}", type.as<IncompleteTypeNode>()->id);
  }
  return "";
}

}  // namespace nimble::ir
