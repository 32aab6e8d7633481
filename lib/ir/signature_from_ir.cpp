#include "ir/signature_from_ir.hpp"

namespace nimble::vm {

namespace {

DimDesc to_dim_desc(const ir::Dim& d) {
  switch (d.kind()) {
    case ir::Dim::Kind::fixed: return {.kind = DimDesc::Kind::fixed, .value = d.value()};
    case ir::Dim::Kind::any: return {.kind = DimDesc::Kind::any};
    case ir::Dim::Kind::symbol: break;
  }
  return {.kind = DimDesc::Kind::symbol, .value = d.upper_bound().value_or(-1), .name = d.name()};
}

}  // namespace

TypeDesc to_type_desc(const ir::Type& type) {
  TypeDesc out;
  if (!type.defined()) {
    out.kind = TypeDesc::Kind::type_var;
    out.name.push_back('?');
    return out;
  }
  switch (type.kind()) {
    case ir::TypeKind::tensor: {
      const auto* t = type.as<ir::TensorTypeNode>();
      out.kind = TypeDesc::Kind::tensor;
      out.dtype = t->dtype;
      for (const ir::Dim& d : t->shape) out.dims.push_back(to_dim_desc(d));
      break;
    }
    case ir::TypeKind::tuple:
      out.kind = TypeDesc::Kind::tuple;
      for (const ir::Type& f : type.as<ir::TupleTypeNode>()->fields) out.fields.push_back(to_type_desc(f));
      break;
    case ir::TypeKind::adt: {
      const auto* a = type.as<ir::AdtTypeNode>();
      out.kind = TypeDesc::Kind::adt;
      out.name = a->name;
      for (const ir::Type& f : a->args) out.fields.push_back(to_type_desc(f));
      break;
    }
    case ir::TypeKind::func: {
      const auto* f = type.as<ir::FuncTypeNode>();
      out.kind = TypeDesc::Kind::func;
      for (const ir::Type& p : f->params) out.fields.push_back(to_type_desc(p));
      out.fields.push_back(to_type_desc(f->ret));
      break;
    }
    case ir::TypeKind::type_var:
      out.kind = TypeDesc::Kind::type_var;
      out.name = type.as<ir::TypeVarNode>()->name;
      break;
    case ir::TypeKind::incomplete:
      out.kind = TypeDesc::Kind::type_var;
      out.name.push_back('?');
      break;
  }
  return out;
}

std::vector<AdtDesc> adt_descs(const ir::Module& module) {
  std::vector<AdtDesc> out;
  for (const ir::AdtDef& adt : module.adts()) {
    AdtDesc a{.name = adt->name, .type_params = adt->type_params, .constructors = {}};
    for (const ir::ConstructorDef& c : adt->constructors) {
      ConstructorDesc ctor{.name = c.name, .fields = {}};
      for (const ir::Type& f : c.fields) ctor.fields.push_back(to_type_desc(f));
      a.constructors.push_back(std::move(ctor));
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace nimble::vm
