// Manifest memory for one op call. The VM runs what needs no kernel itself —
// scalar integer ops (loop counters), shape_of, a dim of a shape, reshapes
// (views of their input) — and every other op becomes a primitive whose
// outputs are explicit allocations: an AllocStorage and AllocTensor per
// output with the shape from the type where it is static, and from the op's
// shape function (a primitive of its own, run on the CPU) where it is not.
#include <optional>

#include "ops/ops.hpp"
#include "passes/passes.hpp"
#include "support/check.hpp"
#include "compiler/bytecode/compiler.hpp"

namespace nimble::vm {

namespace {

constexpr std::uint32_t kAlignment = 64;

std::optional<ScalarOp> scalar_op_for(const ir::OpDef& op) {
  const std::pair<const ir::OpDef*, ScalarOp> table[] = {
      {&ops::add(), ScalarOp::add},           {&ops::sub(), ScalarOp::sub},
      {&ops::mul(), ScalarOp::mul},           {&ops::div(), ScalarOp::div},
      {&ops::minimum(), ScalarOp::minimum},   {&ops::maximum(), ScalarOp::maximum},
      {&ops::equal(), ScalarOp::eq},          {&ops::not_equal(), ScalarOp::ne},
      {&ops::less(), ScalarOp::lt},           {&ops::less_equal(), ScalarOp::le},
      {&ops::greater(), ScalarOp::gt},        {&ops::greater_equal(), ScalarOp::ge},
      {&ops::logical_and(), ScalarOp::logical_and}, {&ops::logical_or(), ScalarOp::logical_or},
      {&ops::neg(), ScalarOp::neg},           {&ops::abs(), ScalarOp::abs},
      {&ops::logical_not(), ScalarOp::logical_not},
  };
  for (const auto& [def, sop] : table)
    if (def == &op) return sop;
  return std::nullopt;
}

// An integer or bool scalar the VM computes with directly: its dtype.
std::optional<DType> vm_scalar(const ir::Type& t) {
  if (!passes::is_vm_scalar(t)) return std::nullopt;
  return t.as<ir::TensorTypeNode>()->dtype;
}

std::vector<const ir::TensorTypeNode*> output_types(const ir::CallNode& call, std::string_view what) {
  const ir::Type& t = call.checked_type;
  if (const auto* tensor = t.as<ir::TensorTypeNode>()) return {tensor};
  std::vector<const ir::TensorTypeNode*> out;
  if (const auto* tuple = t.as<ir::TupleTypeNode>()) {
    for (const ir::Type& f : tuple->fields) {
      const auto* tensor = f.as<ir::TensorTypeNode>();
      if (!tensor) break;
      out.push_back(tensor);
    }
    if (out.size() == tuple->fields.size()) return out;
  }
  throw_error(ErrorKind::not_supported, "not supported: the VM cannot hold the result of {} ({})",
              what, ir::to_string(t));
}

std::optional<std::vector<std::int64_t>> static_shape(const ir::TensorTypeNode& t) {
  std::vector<std::int64_t> dims;
  for (const ir::Dim& d : t.shape) {
    if (!d.is_fixed()) return std::nullopt;
    dims.push_back(d.value());
  }
  return dims;
}

bool is_view(const ir::OpDef& op) {
  return &op == &ops::reshape() || &op == &ops::expand_dims() || &op == &ops::squeeze();
}

}  // namespace

namespace {

// Emits the allocation of a tensor of static shape `dims`.
std::uint32_t alloc_static(FunctionCompiler& fc, std::span<const std::int64_t> dims, DType dtype,
                           Device device) {
  std::int64_t bytes = static_cast<std::int64_t>(dtype_size(dtype));
  for (std::int64_t d : dims) bytes *= d;
  const std::uint32_t size = fc.new_reg();
  fc.emit({.opcode = Opcode::LoadConsti, .aux = static_cast<std::uint8_t>(DType::i64), .dst = size,
           .a = static_cast<std::uint32_t>(bytes),
           .b = static_cast<std::uint32_t>(static_cast<std::uint64_t>(bytes) >> 32)});
  const std::uint32_t storage = fc.new_reg();
  fc.emit({.opcode = Opcode::AllocStorage, .aux = static_cast<std::uint8_t>(dtype), .dst = storage,
           .a = size, .b = kAlignment, .c = encode_device(device)});
  const std::uint32_t tensor = fc.new_reg();
  fc.emit({.opcode = Opcode::AllocTensor, .aux = static_cast<std::uint8_t>(dtype), .dst = tensor,
           .a = storage, .b = 0, .c = fc.module_compiler().shape(dims)});
  return tensor;
}

// Emits the allocation of a tensor whose shape is in register `shape`.
std::uint32_t alloc_dynamic(FunctionCompiler& fc, std::uint32_t shape, DType dtype, Device device) {
  const std::uint32_t size = fc.new_reg();
  fc.emit({.opcode = Opcode::StorageSize, .aux = static_cast<std::uint8_t>(dtype), .dst = size,
           .a = shape});
  const std::uint32_t storage = fc.new_reg();
  fc.emit({.opcode = Opcode::AllocStorage, .aux = static_cast<std::uint8_t>(dtype), .dst = storage,
           .a = size, .b = kAlignment, .c = encode_device(device)});
  const std::uint32_t tensor = fc.new_reg();
  fc.emit({.opcode = Opcode::AllocTensorReg, .aux = static_cast<std::uint8_t>(dtype),
           .dst = tensor, .a = storage, .b = 0, .c = shape});
  return tensor;
}

std::uint32_t invoke_packed(FunctionCompiler& fc, std::uint32_t prim, std::vector<std::uint32_t> list,
                            std::uint32_t num_outputs) {
  ModuleCompiler& mc = fc.module_compiler();
  fc.emit({.opcode = Opcode::InvokePacked, .a = prim, .b = mc.args(list),
           .c = static_cast<std::uint32_t>(list.size()), .d = num_outputs});
  return prim;
}

// The i64 shape registers of `call`'s outputs, from its shape function.
std::vector<std::uint32_t> shapes_from_shape_function(FunctionCompiler& fc, const ir::CallNode& call,
                                                      const std::vector<std::uint32_t>& inputs,
                                                      const std::vector<const ir::TensorTypeNode*>& outs) {
  std::vector<std::uint32_t> shapes;
  for (const ir::TensorTypeNode* t : outs) {
    const std::int64_t rank[] = {static_cast<std::int64_t>(t->rank())};
    shapes.push_back(alloc_static(fc, rank, DType::i64, Device::cpu()));  // shape functions run on the CPU
  }
  std::vector<std::uint32_t> list = inputs;
  list.insert(list.end(), shapes.begin(), shapes.end());
  invoke_packed(fc, fc.module_compiler().primitive(call, PrimitiveKind::shape_function),
                std::move(list), static_cast<std::uint32_t>(outs.size()));
  return shapes;
}

// The i64 shape registers of `call`'s outputs built by the VM itself when
// every dim of their types is a constant or a symbol that some tensor
// argument's type has (a field of a tuple argument's too: concatenate's
// inputs): dims of the arguments then are the output's (type inference
// related them; the kernel checks what the types leave open), and no shape
// function runs. A concatenation's extent along its axis, which its type
// leaves unknown unless every part's is static, is the sum of its parts'.
// nullopt if some other dim is Any or a symbol no argument carries.
std::optional<std::vector<std::uint32_t>> shapes_from_types(
    FunctionCompiler& fc, const ir::CallNode& call, const std::vector<std::uint32_t>& inputs,
    const std::vector<const ir::TensorTypeNode*>& outs) {
  // A dim of argument `arg` (of its field `field` where that is a tuple).
  struct Source {
    std::size_t arg;
    std::optional<std::uint32_t> field;
    std::uint32_t dim;
  };
  // Per output dim: a constant (no source), one argument's dim, or the sum
  // of a concatenation's parts' dims along its axis.
  struct Plan {
    std::vector<Source> sum;
  };
  const auto tensor_args = [&](const auto& fn) {
    for (std::size_t i = 0; i < call.args.size(); ++i) {
      const ir::Type& t = call.args[i].type();
      if (const auto* a = t.as<ir::TensorTypeNode>()) {
        fn(i, std::optional<std::uint32_t>{}, *a);
      } else if (const auto* tuple = t.as<ir::TupleTypeNode>()) {
        for (std::size_t f = 0; f < tuple->fields.size(); ++f)
          if (const auto* field = tuple->fields[f].as<ir::TensorTypeNode>())
            fn(i, std::optional<std::uint32_t>{static_cast<std::uint32_t>(f)}, *field);
      }
    }
  };
  const auto* op = call.callee.as<ir::OpNode>();
  std::optional<std::size_t> concat_axis;
  if (op && op->def == &ops::concatenate() && outs.size() == 1 && call.args.size() == 1) {
    const std::int64_t axis = std::get<std::int64_t>(ir::attr_or_default(*op->def, call.attrs, "axis"));
    const auto rank = static_cast<std::int64_t>(outs[0]->rank());
    if (axis >= -rank && axis < rank) concat_axis = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
  }
  std::vector<std::vector<Plan>> plan;
  for (const ir::TensorTypeNode* t : outs) {
    std::vector<Plan>& dims = plan.emplace_back();
    for (std::size_t k = 0; k < t->rank(); ++k) {
      const ir::Dim& d = t->shape[k];
      Plan& p = dims.emplace_back();
      if (d.is_fixed()) continue;
      if (d.is_symbol())
        tensor_args([&](std::size_t i, std::optional<std::uint32_t> field, const ir::TensorTypeNode& a) {
          for (std::size_t j = 0; j < a.rank() && p.sum.empty(); ++j)
            if (a.shape[j].is_symbol() && a.shape[j].name() == d.name())
              p.sum.push_back({i, field, static_cast<std::uint32_t>(j)});
        });
      if (p.sum.empty() && concat_axis == k)
        tensor_args([&](std::size_t i, std::optional<std::uint32_t> field, const ir::TensorTypeNode&) {
          p.sum.push_back({i, field, static_cast<std::uint32_t>(k)});
        });
      if (p.sum.empty()) return std::nullopt;
    }
  }
  std::vector<std::uint32_t> shapes;
  for (std::size_t o = 0; o < outs.size(); ++o) {
    std::vector<std::uint32_t> dims;
    for (std::size_t k = 0; k < plan[o].size(); ++k) {
      std::uint32_t reg = kNoReg;
      for (const Source& s : plan[o][k].sum) {
        std::uint32_t tensor = inputs[s.arg];
        if (s.field) {
          tensor = fc.new_reg();
          fc.emit({.opcode = Opcode::GetField, .dst = tensor, .a = inputs[s.arg], .b = *s.field});
        }
        const std::uint32_t dim = fc.new_reg();
        fc.emit({.opcode = Opcode::TensorDim, .dst = dim, .a = tensor, .b = s.dim});
        if (reg == kNoReg) {
          reg = dim;
        } else {
          const std::uint32_t total = fc.new_reg();
          fc.emit({.opcode = Opcode::ScalarBinary, .aux = static_cast<std::uint8_t>(ScalarOp::add), .dst = total,
                   .a = reg, .b = dim});
          reg = total;
        }
      }
      if (reg == kNoReg) {
        reg = fc.new_reg();
        const auto bits = static_cast<std::uint64_t>(outs[o]->shape[k].value());
        fc.emit({.opcode = Opcode::LoadConsti, .aux = static_cast<std::uint8_t>(DType::i64), .dst = reg,
                 .a = static_cast<std::uint32_t>(bits), .b = static_cast<std::uint32_t>(bits >> 32)});
      }
      dims.push_back(reg);
    }
    const std::uint32_t shape = fc.new_reg();
    fc.emit({.opcode = Opcode::MakeShape, .dst = shape, .a = fc.module_compiler().args(dims),
             .b = static_cast<std::uint32_t>(dims.size())});
    shapes.push_back(shape);
  }
  return shapes;
}

}  // namespace

std::uint32_t FunctionCompiler::compile_op_call(const ir::CallNode& call) {
  if (call.callee.as<ir::FunctionNode>()) return compile_kernel_call(call, "a fused kernel");
  const ir::OpDef& op = *call.callee.as<ir::OpNode>()->def;

  // Scalar integer work: the VM's own instructions.
  if (const auto sop = scalar_op_for(op); sop && vm_scalar(call.checked_type)) {
    bool scalars = true;
    for (const ir::Expr& a : call.args) scalars = scalars && vm_scalar(a.type()) == vm_scalar(call.args[0].type());
    if (scalars && vm_scalar(call.args[0].type())) {
      const std::uint32_t x = compile_value(call.args[0]);
      const std::uint32_t dst = new_reg();
      if (is_unary(*sop)) {
        emit({.opcode = Opcode::ScalarUnary, .aux = static_cast<std::uint8_t>(*sop), .dst = dst, .a = x});
      } else {
        const std::uint32_t y = compile_value(call.args[1]);
        emit({.opcode = Opcode::ScalarBinary, .aux = static_cast<std::uint8_t>(*sop), .dst = dst,
              .a = x, .b = y});
      }
      return dst;
    }
  }
  if (&op == &ops::device_copy()) {
    const auto device = [&](std::string_view name) {
      return encode_device(parse_device(std::get<std::string>(ir::attr_or_default(op, call.attrs, name))));
    };
    const std::uint32_t dst = new_reg();
    // A constant goes to the device once per VM, not once per call.
    if (const auto* c = call.args[0].as<ir::ConstantNode>()) {
      emit({.opcode = Opcode::LoadConst, .dst = dst, .a = mc_.constant(*c), .b = device("dst")});
      return dst;
    }
    const std::uint32_t x = compile_value(call.args[0]);
    emit({.opcode = Opcode::DeviceCopy, .dst = dst, .a = x, .b = device("src"), .c = device("dst")});
    return dst;
  }
  if (&op == &ops::shape_of()) {
    const std::uint32_t x = compile_value(call.args[0]);
    const std::uint32_t dst = new_reg();
    emit({.opcode = Opcode::ShapeOf, .dst = dst, .a = x});
    return dst;
  }
  // take(shape_of(x), k) with a constant k: one dim of x.
  if (&op == &ops::take() && call.args.size() == 2) {
    const ir::Expr* shape = &call.args[0];
    if (const auto* v = shape->as<ir::VarNode>(); v && definition(v)) shape = definition(v);
    const auto* shape_call = shape->as<ir::CallNode>();
    const auto* index = call.args[1].as<ir::ConstantNode>();
    if (shape_call && shape_call->callee.as<ir::OpNode>() &&
        shape_call->callee.as<ir::OpNode>()->def == &ops::shape_of() && index &&
        index->value.rank() == 0 && index->value.dtype() == DType::i64 &&
        (shape_call->args[0].as<ir::VarNode>() || shape_call->args[0].as<ir::ConstantNode>())) {
      const auto* x_type = shape_call->args[0].type().as<ir::TensorTypeNode>();
      std::int64_t k = *index->value.data<std::int64_t>();
      const auto rank = static_cast<std::int64_t>(x_type ? x_type->rank() : 0);
      if (k < 0) k += rank;
      if (x_type && k >= 0 && k < rank) {
        const std::uint32_t x = compile_value(shape_call->args[0]);
        const std::uint32_t dst = new_reg();
        emit({.opcode = Opcode::TensorDim, .dst = dst, .a = x, .b = static_cast<std::uint32_t>(k)});
        return dst;
      }
    }
  }

  // take(data, i) along axis 0 with a scalar i, left on its own by fusion
  // (its readers are several kernels, or a function): row i of data, a view
  // (a Tree-LSTM leaf's row of the leaves' projection, an LSTM step's). On
  // the CPU only: for a device, place_devices has copied i there for the
  // kernel, and the VM reads its scalars on the host.
  if (&op == &ops::take() && call.args.size() == 2 && passes::device_of_op_call(call, mc_.target()).is_cpu() &&
      std::get<std::int64_t>(ir::attr_or_default(op, call.attrs, "axis")) == 0) {
    const auto* data = call.args[0].type().as<ir::TensorTypeNode>();
    const auto* index = call.args[1].type().as<ir::TensorTypeNode>();
    if (data && data->rank() >= 1 && index && index->rank() == 0 &&
        (index->dtype == DType::i64 || index->dtype == DType::i32)) {
      const std::vector<std::uint32_t> inputs = compile_args(call.args);
      const std::uint32_t dst = new_reg();
      emit({.opcode = Opcode::TakeRow, .dst = dst, .a = inputs[0], .b = inputs[1]});
      return dst;
    }
  }
  // A reshape is a view of its input with the new shape. The shape function
  // also checks what the op demands of its input (squeeze's dims are 1), so
  // it is skipped only when the input's shape is static too.
  if (is_view(op)) {
    const std::vector<const ir::TensorTypeNode*> outs = output_types(call, op.name);
    const std::vector<std::uint32_t> inputs = compile_args(call.args);
    const bool dynamic = !static_shape(*outs[0]);
    const auto* in_type = call.args[0].type().as<ir::TensorTypeNode>();
    std::uint32_t shape;
    if (dynamic || !in_type || !static_shape(*in_type)) {
      shape = shapes_from_shape_function(*this, call, inputs, outs)[0];
    } else {
      const std::vector<std::int64_t> dims = *static_shape(*outs[0]);
      shape = new_reg();
      Tensor t = Tensor::from_data<std::int64_t>(Shape{static_cast<std::int64_t>(dims.size())}, dims);
      emit({.opcode = Opcode::LoadConst, .dst = shape, .a = mc_.constant(std::move(t))});
    }
    const std::uint32_t dst = new_reg();
    emit({.opcode = Opcode::ReshapeTensor, .dst = dst, .a = inputs[0], .b = shape});
    return dst;
  }
  return compile_kernel_call(call, op.name);
}

// A kernel call (one op, or a fused group): its outputs allocated with
// static shapes where the type gives them and from the call's shape
// function where it does not, then one InvokePacked.
std::uint32_t FunctionCompiler::compile_kernel_call(const ir::CallNode& call, std::string_view what) {
  const std::vector<const ir::TensorTypeNode*> outs = output_types(call, what);
  const std::vector<std::uint32_t> inputs = compile_args(call.args);
  bool dynamic = false;
  for (const ir::TensorTypeNode* t : outs) dynamic = dynamic || !static_shape(*t);
  const Device device = passes::device_of_op_call(call, mc_.target());
  std::vector<std::uint32_t> results;
  if (dynamic) {
    std::optional<std::vector<std::uint32_t>> shapes = shapes_from_types(*this, call, inputs, outs);
    if (!shapes) shapes = shapes_from_shape_function(*this, call, inputs, outs);
    for (std::size_t k = 0; k < outs.size(); ++k)
      results.push_back(alloc_dynamic(*this, (*shapes)[k], outs[k]->dtype, device));
  } else {
    for (const ir::TensorTypeNode* t : outs)
      results.push_back(alloc_static(*this, *static_shape(*t), t->dtype, device));
  }
  std::vector<std::uint32_t> list = inputs;
  list.insert(list.end(), results.begin(), results.end());
  invoke_packed(*this, mc_.primitive(call, PrimitiveKind::compute, device), std::move(list),
                static_cast<std::uint32_t>(results.size()));
  if (call.checked_type.as<ir::TensorTypeNode>()) return results[0];
  const std::uint32_t dst = new_reg();
  emit({.opcode = Opcode::AllocADT, .dst = dst, .a = kTupleTag, .b = mc_.args(results),
        .c = static_cast<std::uint32_t>(results.size())});
  return dst;
}

}  // namespace nimble::vm
