#include "nimble/runtime/value.hpp"

#include <fmt/format.h>

#include <unordered_map>
#include <utility>

#include "runtime/object_pool.hpp"
#include "runtime/value_builder.hpp"
#include "runtime/value_map.hpp"
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
        if (f.node_ && f.node_->use_count() == 1 && !f.node_->fields.empty()) {
          try {
            work.push_back(std::move(f));  // strong guarantee: f is whole if it throws
          } catch (...) {  // out of memory for the list: this subtree goes recursively
            f = Value();
          }
        } else {
          f = Value();
        }
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
  // A value's node: its identity, for walks that meet shared nodes.
  static const ValueNode* of(const Value& v) noexcept { return v.node_.get(); }
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

const Tensor* Value::as_tensor() const noexcept { return is_tensor() ? &node_->tensor : nullptr; }

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
  std::optional<Value> moved = detail::map_tensors(*this, [device](const Tensor& t) -> std::optional<Tensor> {
    if (t.device() == device) return std::nullopt;
    return t.to(device);
  });
  return moved ? std::move(*moved) : *this;
}

std::optional<Value> detail::map_tensors(const Value& value, const TensorMap& map) {
  if (!value.defined()) return std::nullopt;
  // Post-order over the value's nodes with an explicit stack; `done` holds
  // each finished node's result (nullopt: unchanged). Field pointers stay
  // valid: `value` holds every node the walk visits.
  std::unordered_map<const ValueNode*, std::optional<Value>> done;
  struct Frame {
    const Value* value;
    std::size_t next = 0;  // the first field not finished yet
  };
  std::vector<Frame> stack{{&value}};
  while (!stack.empty()) {
    Frame& top = stack.back();
    const Value& v = *top.value;
    const ValueNode* node = ValueNode::of(v);
    if (done.contains(node)) {
      stack.pop_back();
      continue;
    }
    if (v.kind() == Value::Kind::tensor || v.kind() == Value::Kind::object) {
      std::optional<Value> result;
      if (v.kind() == Value::Kind::tensor)
        if (std::optional<Tensor> t = map(v.tensor())) result = Value(std::move(*t));
      done.emplace(node, std::move(result));
      stack.pop_back();
      continue;
    }
    const std::span<const Value> fields = v.fields();
    while (top.next < fields.size() && done.contains(ValueNode::of(fields[top.next]))) ++top.next;
    if (top.next < fields.size()) {
      stack.push_back({&fields[top.next]});  // `top` is not used after this
      continue;
    }
    bool changed = false;
    for (const Value& f : fields) changed = changed || done.at(ValueNode::of(f)).has_value();
    std::optional<Value> result;
    if (changed) {
      Fields rebuilt;
      rebuilt.reserve(fields.size());
      for (const Value& f : fields) {
        const std::optional<Value>& mapped = done.at(ValueNode::of(f));
        rebuilt.push_back(mapped ? *mapped : f);
      }
      result = ValueNode::make(v.kind(), std::move(rebuilt), v.kind() == Value::Kind::adt ? v.tag() : 0);
    }
    done.emplace(node, std::move(result));
    stack.pop_back();
  }
  return std::move(done.at(ValueNode::of(value)));
}

std::uint32_t Value::tag() const {
  if (kind() != Kind::adt)
    throw_error(ErrorKind::type_error, "Value: expected an ADT value, got {}", kind_name(kind()));
  return node_->tag;
}

// With a work list, not recursion: a long list prints without exhausting
// the stack.
std::string to_string(const Value& value) {
  std::string out;
  struct Frame {
    const Value* value;
    std::size_t next = 0;  // the next field to print; 0: not opened yet
  };
  std::vector<Frame> stack{{&value}};
  while (!stack.empty()) {
    Frame& top = stack.back();
    const Value& v = *top.value;
    if (!v.defined() || v.is_tensor() || v.kind() == Value::Kind::object) {
      out += !v.defined() ? "<undefined>" : v.is_tensor() ? to_string(v.tensor()) : "<object>";
      stack.pop_back();
      continue;
    }
    const std::span<const Value> fields = v.fields();
    if (top.next == 0) out += v.kind() == Value::Kind::adt ? fmt::format("#{}(", v.tag()) : "(";
    if (top.next == fields.size()) {
      out += ")";
      stack.pop_back();
      continue;
    }
    if (top.next > 0) out += ", ";
    const Value* field = &fields[top.next++];
    stack.push_back({field});  // `top` is not used after this
  }
  return out;
}

}  // namespace nimble
