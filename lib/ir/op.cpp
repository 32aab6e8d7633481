// The op table the IR names ops by (installed by the op library, which the
// IR does not know), and the checks of a call's attributes against its op.
#include "ir/op.hpp"

#include <string>
#include <unordered_map>
#include <variant>

#include "nimble/error.hpp"
#include "support/check.hpp"

namespace nimble::ir {

namespace {

struct OpTable {
  std::span<const OpDef* const> ops;
  std::unordered_map<std::string_view, const OpDef*> by_name;
};

OpTable& op_table() noexcept {
  static OpTable table;
  return table;
}

// AttrKind lists the alternatives of AttrValue in the same order.
static_assert(
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::boolean), AttrValue>, bool> &&
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::integer), AttrValue>,
                   std::int64_t> &&
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::real), AttrValue>, double> &&
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::string), AttrValue>,
                   std::string> &&
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::integers), AttrValue>,
                   std::vector<std::int64_t>> &&
    std::is_same_v<std::variant_alternative_t<std::size_t(AttrKind::dtype), AttrValue>, DType>);

std::string_view kind_name(AttrKind kind) noexcept {
  switch (kind) {
    case AttrKind::boolean:
      return "boolean";
    case AttrKind::integer:
      return "integer";
    case AttrKind::real:
      return "real";
    case AttrKind::string:
      return "string";
    case AttrKind::integers:
      return "integers";
    case AttrKind::dtype:
      return "dtype";
  }
  return "";
}

const AttrSpec* find_spec(const OpDef& op, std::string_view name) noexcept {
  for (const AttrSpec& spec : op.attrs)
    if (spec.name == name) return &spec;
  return nullptr;
}

void check_kind(const OpDef& op, const AttrSpec& spec, const AttrValue& value) {
  if (value.index() != static_cast<std::size_t>(spec.kind))
    throw_error(ErrorKind::type_error, "{}: attribute '{}' must be {}, got {}", op.name, spec.name,
                kind_name(spec.kind), to_string(value));
}

}  // namespace

const AttrValue& attr_or_default(const OpDef& op, const Attrs& call_attrs, std::string_view name) {
  const AttrSpec* spec = find_spec(op, name);
  NIMBLE_ASSERT(spec != nullptr, "attr_or_default: the op declares no such attribute");
  if (const AttrValue* value = call_attrs.find(name)) {
    check_kind(op, *spec, *value);
    return *value;
  }
  if (!spec->default_value)
    throw_error(ErrorKind::type_error, "{}: missing attribute '{}'", op.name, name);
  return *spec->default_value;
}

void check_attrs(const OpDef& op, const Attrs& attrs) {
  for (const auto& [name, value] : attrs.items()) {
    const AttrSpec* spec = find_spec(op, name);
    if (!spec) throw_error(ErrorKind::type_error, "{}: unknown attribute '{}'", op.name, name);
    check_kind(op, *spec, value);
  }
  for (const AttrSpec& spec : op.attrs)
    if (!spec.default_value && !attrs.find(spec.name))
      throw_error(ErrorKind::type_error, "{}: missing attribute '{}'", op.name, spec.name);
}

void install_ops(std::span<const OpDef* const> ops) {
  OpTable& table = op_table();
  NIMBLE_ASSERT(table.ops.empty(), "install_ops: the op table is installed once");
  table.ops = ops;
  for (const OpDef* op : ops) {
    const bool inserted = table.by_name.emplace(op->name, op).second;
    NIMBLE_ASSERT(inserted, "install_ops: op names are unique");
  }
}

std::span<const OpDef* const> all_ops() noexcept { return op_table().ops; }

const OpDef* find_op(std::string_view name) noexcept {
  const auto& by_name = op_table().by_name;
  const auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : it->second;
}

}  // namespace nimble::ir
