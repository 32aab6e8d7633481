// device_copy: a value on another device. place_devices
// (lib/passes/place_devices.cpp) inserts it where a value crosses devices;
// the VM runs it as DeviceCopy. Semantics: the result has x's type and
// elements, on device `dst`; `src` is where x lives. x may be a tuple or an
// ADT value (an entry's parameter from the host): the result is the same
// structure with every tensor in it on `dst` (a tensor already there is
// not copied). Opaque: a copy is a transfer, not a kernel, and is never
// fused.
#include "nimble/runtime/device.hpp"
#include "ops/ops.hpp"
#include "ops/reference_util.hpp"
#include "ops/relation_util.hpp"

namespace nimble::ops {

namespace {

constexpr std::string_view kX[] = {"x"};

// The device an attribute names; its parse error becomes a type error of the call.
Device device_attr(const ir::Attrs& attrs, std::string_view name) {
  const auto& text = std::get<std::string>(ir::attr_or_default(device_copy(), attrs, name));
  try {
    return parse_device(text);
  } catch (const Error& e) {
    throw_error(ErrorKind::type_error, "{}: {}", name, e.what());
  }
}

Type device_copy_relation(std::span<const Type> args, const ir::Attrs& attrs) {
  (void)device_attr(attrs, "src");
  (void)device_attr(attrs, "dst");
  if (args.size() == 1 && (args[0].as<ir::TupleTypeNode>() || args[0].as<ir::AdtTypeNode>())) return args[0];
  const TensorTypeNode& x = expect_tensor(args, 0, device_copy());
  return ir::tensor_type(x.shape, x.dtype);
}

// The reference interpreter has one (host) memory: a copy is a fresh
// tensor; a tuple or ADT value (immutable) is itself.
Value device_copy_kernel(std::span<const Value> args, const ir::Attrs&) {
  if (args.size() == 1 && args[0].defined() && !args[0].is_tensor()) return args[0];
  return ref::tensor_arg(args, 0).clone();
}

}  // namespace

const OpDef& device_copy() {
  static const ir::AttrSpec attrs[] = {{"src", ir::AttrKind::string, std::nullopt},
                                       {"dst", ir::AttrKind::string, std::nullopt}};
  static const OpDef def{.name = "device_copy",
                         .arg_names = kX,
                         .attrs = attrs,
                         .type_relation = &device_copy_relation,
                         .pattern = ir::OpPattern::opaque,
                         .compute = nullptr,
                         .reference = &device_copy_kernel,
                         .summary = "x copied from device `src` to device `dst`.",
                         .example = {"%x: f32[n, 4]",
                                     "device_copy(%x, src=\"cpu\", dst=\"cuda:0\")"}};
  return def;
}

}  // namespace nimble::ops
