#include "nimble/runtime/value.hpp"

#include <fmt/format.h>

#include "runtime/object_pool.hpp"
#include "runtime/value_builder.hpp"
#include "support/check.hpp"

namespace nimble {

// The fields of a tuple or ADT value, in pooled memory.
using Fields = std::vector<Value, detail::PoolAllocator<Value>>;

class ValueNode final : public RefCounted {
 public:
  ValueNode(Value::Kind k, Tensor t, Fields f, std::uint32_t tag_, Ref<Object> o = {})
      : kind(k), tensor(std::move(t)), fields(std::move(f)), tag(tag_), object(std::move(o)) {}

  // One per Value: from the small-object pool, not the system.
  static void* operator new(std::size_t bytes) { return detail::pool_allocate(bytes); }
  static void operator delete(void* p, std::size_t bytes) noexcept { detail::pool_deallocate(p, bytes); }

  // Tears down the fields of nodes that die with this one using a work list,
  // so that a list of a million elements does not overflow the stack. Only
  // nodes that die and have fields go on it; the rest (a list's heads) are
  // released at once, so that a list's teardown keeps it at a few entries.
  ~ValueNode() {
    Fields work = std::move(fields);
    while (!work.empty()) {
      Value v = std::move(work.back());
      work.pop_back();
      if (!v.node_ || v.node_->use_count() != 1) continue;
      for (Value& f : v.node_->fields) {
        if (f.node_ && f.node_->use_count() == 1 && !f.node_->fields.empty())
          work.push_back(std::move(f));
        else
          f = Value();
      }
      v.node_->fields.clear();
    }
  }

  const Value::Kind kind;
  const Tensor tensor;
  Fields fields;  // mutable only for the teardown above

  static Value make(Value::Kind k, Fields f, std::uint32_t tag) {
    return Value(make_ref<ValueNode>(k, Tensor(), std::move(f), tag));
  }
  const std::uint32_t tag;
  const Ref<Object> object;
};

namespace {
std::string_view kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::tensor: return "a tensor";
    case Value::Kind::tuple: return "a tuple";
    case Value::Kind::adt: return "an ADT value";
    case Value::Kind::object: return "an object";
  }
  return "?";
}
}  // namespace

Value::Value() noexcept = default;
Value::Value(const Value&) noexcept = default;
Value::Value(Value&&) noexcept = default;
Value& Value::operator=(const Value&) noexcept = default;
Value& Value::operator=(Value&&) noexcept = default;
Value::~Value() = default;
Value::Value(Ref<ValueNode> node) noexcept : node_(std::move(node)) {}

Value::Value(Tensor tensor)
    : node_(make_ref<ValueNode>(Kind::tensor, std::move(tensor), Fields{}, 0)) {
  if (!node_->tensor.defined())
    throw_error(ErrorKind::invalid_argument, "Value: expected a defined tensor");
}

namespace {
Fields to_fields(std::vector<Value>& fields, std::string_view who) {
  for (const Value& f : fields)
    if (!f.defined()) throw_error(ErrorKind::invalid_argument, "{}: a field is undefined", who);
  return Fields(std::make_move_iterator(fields.begin()), std::make_move_iterator(fields.end()));
}
}  // namespace

Value Value::tuple(std::vector<Value> fields) {
  return ValueNode::make(Kind::tuple, to_fields(fields, "Value::tuple"), 0);
}

Value Value::adt(std::uint32_t tag, std::vector<Value> fields) {
  return ValueNode::make(Kind::adt, to_fields(fields, "Value::adt"), tag);
}

Value detail::make_aggregate(bool tuple, std::uint32_t tag, std::size_t n,
                             Value (*field)(void* context, std::size_t i), void* context) {
  Fields fields;
  fields.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    fields.push_back(field(context, i));
    if (!fields.back().defined())
      throw_error(ErrorKind::invalid_argument, "{}: a field is undefined", tuple ? "Value::tuple" : "Value::adt");
  }
  return ValueNode::make(tuple ? Value::Kind::tuple : Value::Kind::adt, std::move(fields), tuple ? 0 : tag);
}

Value Value::object(Ref<Object> object) {
  if (!object) throw_error(ErrorKind::invalid_argument, "Value::object: the object is null");
  return Value(make_ref<ValueNode>(Kind::object, Tensor(), Fields{}, 0, std::move(object)));
}

const Ref<Object>& Value::object() const {
  if (kind() != Kind::object)
    throw_error(ErrorKind::type_error, "Value: expected an object, got {}", kind_name(kind()));
  return node_->object;
}

Value::Kind Value::kind() const {
  if (!node_) throw_error(ErrorKind::invalid_argument, "Value: the value is undefined");
  return node_->kind;
}

bool Value::is_tensor() const noexcept { return node_ && node_->kind == Kind::tensor; }

const Tensor& Value::tensor() const {
  if (kind() != Kind::tensor)
    throw_error(ErrorKind::type_error, "Value: expected a tensor, got {}", kind_name(kind()));
  return node_->tensor;
}

std::span<const Value> Value::fields() const {
  if (kind() == Kind::tensor || kind() == Kind::object)
    throw_error(ErrorKind::type_error, "Value: expected a tuple or an ADT value, got {}",
                kind_name(kind()));
  return node_->fields;
}

const Value& Value::operator[](std::size_t i) const {
  const auto f = fields();
  if (i >= f.size())
    throw_error(ErrorKind::out_of_range, "Value: field {} is out of range for {} with {} fields",
                i, kind_name(kind()), f.size());
  return f[i];
}

Value Value::to(Device device) const {
  if (!defined()) return *this;
  if (is_tensor()) return Value(tensor().to(device));
  if (kind() == Kind::object) return *this;
  std::vector<Value> moved;
  moved.reserve(fields().size());
  for (const Value& f : fields()) moved.push_back(f.to(device));
  return kind() == Kind::tuple ? tuple(std::move(moved)) : adt(tag(), std::move(moved));
}

std::uint32_t Value::tag() const {
  if (kind() != Kind::adt)
    throw_error(ErrorKind::type_error, "Value: expected an ADT value, got {}", kind_name(kind()));
  return node_->tag;
}

std::string to_string(const Value& value) {
  if (!value.defined()) return "<undefined>";
  if (value.is_tensor()) return to_string(value.tensor());
  if (value.kind() == Value::Kind::object) return "<object>";
  std::string out = value.kind() == Value::Kind::adt ? fmt::format("#{}(", value.tag()) : "(";
  const auto fields = value.fields();
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ", ";
    out += to_string(fields[i]);
  }
  return out + ")";
}

}  // namespace nimble
