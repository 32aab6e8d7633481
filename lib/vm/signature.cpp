#include "vm/signature.hpp"

#include <fmt/format.h>

#include "support/check.hpp"

namespace nimble::vm {

namespace {

std::string dim_text(const DimDesc& d) {
  switch (d.kind) {
    case DimDesc::Kind::fixed: return std::to_string(d.value);
    case DimDesc::Kind::any: return "?";
    case DimDesc::Kind::symbol:
      return d.value >= 0 ? fmt::format("{}<={}", d.name, d.value) : d.name;
  }
  return "";
}

std::string join(const std::vector<TypeDesc>& types) {
  std::string out;
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (i) out += ", ";
    out += to_string(types[i]);
  }
  return out;
}

using TypeArgs = std::map<std::string, const TypeDesc*, std::less<>>;

// `t` with the ADT's type parameters replaced by the use's arguments.
TypeDesc instantiate(const TypeDesc& t, const TypeArgs& args) {
  if (t.kind == TypeDesc::Kind::type_var) {
    auto it = args.find(t.name);
    return it == args.end() ? t : *it->second;
  }
  TypeDesc out = t;
  for (TypeDesc& f : out.fields) f = instantiate(f, args);
  return out;
}

}  // namespace

std::string to_string(const TypeDesc& type) {
  switch (type.kind) {
    case TypeDesc::Kind::tensor: {
      std::string dims;
      for (std::size_t i = 0; i < type.dims.size(); ++i) {
        if (i) dims += ", ";
        dims += dim_text(type.dims[i]);
      }
      return fmt::format("{}[{}]", nimble::to_string(type.dtype), dims);
    }
    case TypeDesc::Kind::tuple:
      return fmt::format("({}{})", join(type.fields), type.fields.size() == 1 ? "," : "");
    case TypeDesc::Kind::adt:
      return type.fields.empty() ? type.name : fmt::format("{}<{}>", type.name, join(type.fields));
    case TypeDesc::Kind::type_var: return type.name;
    case TypeDesc::Kind::func: {
      std::vector<TypeDesc> params(type.fields.begin(), type.fields.end() - 1);
      return fmt::format("fn({}) -> {}", join(params), to_string(type.fields.back()));
    }
  }
  return "";
}

std::string describe(const Value& v) {
  if (!v.defined()) return "an undefined value";
  switch (v.kind()) {
    case Value::Kind::tensor: {
      const Tensor& t = v.tensor();
      TypeDesc d{.kind = TypeDesc::Kind::tensor, .dtype = t.dtype()};
      for (std::int64_t e : t.shape()) d.dims.push_back({.kind = DimDesc::Kind::fixed, .value = e});
      return to_string(d);
    }
    case Value::Kind::tuple: return fmt::format("a tuple of {} fields", v.fields().size());
    case Value::Kind::adt: return fmt::format("a value of constructor #{}", v.tag());
    case Value::Kind::object: return "a function";
  }
  return "?";
}

ArgumentChecker::ArgumentChecker(std::span<const AdtDesc> adts, std::string_view function,
                                 ArgumentCheckCache& cache)
    : adts_(adts), function_(function), cache_(cache) {
  cache_.symbols_.clear();
}

void ArgumentChecker::check(std::size_t index, std::string_view param_name, const TypeDesc& type,
                            const Value& value) {
  std::string why;
  if (!fits(type, value, why))
    throw_error(ErrorKind::type_error, "@{}: argument {} (%{}) must be {}, got {}{}", function_,
                index + 1, param_name, to_string(type), describe(value), why);
}

const AdtDesc* ArgumentChecker::find_adt(std::string_view name) const {
  for (const AdtDesc& a : adts_)
    if (a.name == name) return &a;
  return nullptr;
}

const ArgumentCheckCache::AdtUse& ArgumentChecker::adt_use(const TypeDesc& type, const AdtDesc& def) {
  for (const ArgumentCheckCache::AdtUse& use : cache_.adt_uses_)
    if (use.type == type) return use;
  TypeArgs args;
  for (std::size_t i = 0; i < def.type_params.size(); ++i) args.emplace(def.type_params[i], &type.fields[i]);
  ArgumentCheckCache::AdtUse& use = cache_.adt_uses_.emplace_back(ArgumentCheckCache::AdtUse{type, {}});
  for (const ConstructorDesc& ctor : def.constructors) {
    std::vector<TypeDesc>& fields = use.field_types.emplace_back();
    for (const TypeDesc& f : ctor.fields) fields.push_back(instantiate(f, args));
  }
  return use;
}

// A work list, not recursion: a tree a million levels deep (on any field)
// is checked in constant stack. Items are visited in the order a recursive
// walk would (fields left to right), so symbols bind in the same order.
bool ArgumentChecker::fits_tensor(const TypeDesc& type, const Value& v, std::string& why) {
  if (!v.defined() || !v.is_tensor()) return false;
  const Tensor& tensor = v.tensor();
  if (type.dtype != tensor.dtype() || type.dims.size() != tensor.rank()) return false;
  for (std::size_t i = 0; i < type.dims.size(); ++i)
    if (!fits_dim(type.dims[i], tensor.shape()[i], why)) return false;
  return true;
}

bool ArgumentChecker::fits(const TypeDesc& root_type, const Value& root, std::string& why) {
  // Most arguments are tensors (with symbolic dims): no work list for them.
  if (root_type.kind == TypeDesc::Kind::tensor) return fits_tensor(root_type, root, why);
  struct Item {
    const TypeDesc* type;
    const Value* value;
  };
  std::vector<Item> work{{&root_type, &root}};
  // The last ADT type seen and its instantiated fields: the nodes of one
  // tree all ask for the same.
  const TypeDesc* last_adt = nullptr;
  const ArgumentCheckCache::AdtUse* last_use = nullptr;
  std::size_t last_constructors = 0;
  while (!work.empty()) {
    const Item item = work.back();
    work.pop_back();
    const TypeDesc& type = *item.type;
    const Value& v = *item.value;
    switch (type.kind) {
      case TypeDesc::Kind::tensor:
        if (!fits_tensor(type, v, why)) return false;
        break;
      case TypeDesc::Kind::tuple: {
        if (!v.defined() || v.kind() != Value::Kind::tuple || v.fields().size() != type.fields.size())
          return false;
        for (std::size_t i = type.fields.size(); i-- > 0;) work.push_back({&type.fields[i], &v[i]});
        break;
      }
      case TypeDesc::Kind::adt: {
        if (&type != last_adt) {
          const AdtDesc* def = find_adt(type.name);
          if (!def || def->type_params.size() != type.fields.size()) return false;
          last_use = &adt_use(type, *def);
          last_adt = &type;
          last_constructors = def->constructors.size();
        }
        if (!v.defined() || v.kind() != Value::Kind::adt || v.tag() >= last_constructors) return false;
        const std::vector<TypeDesc>& fields = last_use->field_types[v.tag()];
        if (v.fields().size() != fields.size()) return false;
        for (std::size_t i = fields.size(); i-- > 0;) work.push_back({&fields[i], &v[i]});
        break;
      }
      default: return false;  // functions cannot come from the host
    }
  }
  return true;
}

bool ArgumentChecker::fits_dim(const DimDesc& d, std::int64_t extent, std::string& why) {
  switch (d.kind) {
    case DimDesc::Kind::any: return true;
    case DimDesc::Kind::fixed: return d.value == extent;
    case DimDesc::Kind::symbol: break;
  }
  if (d.value >= 0 && extent > d.value) {
    why = fmt::format(" ({} exceeds the bound of {})", extent, d.name);
    return false;
  }
  for (const auto& [name, value] : cache_.symbols_) {
    if (name != d.name) continue;
    if (value == extent) return true;
    why = fmt::format(" ({} is {} in an earlier argument)", d.name, value);
    return false;
  }
  cache_.symbols_.emplace_back(d.name, extent);
  return true;
}

}  // namespace nimble::vm
