#include "vm/instruction.hpp"

namespace nimble::vm {

std::string_view scalar_op_name(ScalarOp op) noexcept {
  switch (op) {
    case ScalarOp::add: return "add";
    case ScalarOp::sub: return "sub";
    case ScalarOp::mul: return "mul";
    case ScalarOp::div: return "div";
    case ScalarOp::rem: return "rem";
    case ScalarOp::minimum: return "minimum";
    case ScalarOp::maximum: return "maximum";
    case ScalarOp::eq: return "eq";
    case ScalarOp::ne: return "ne";
    case ScalarOp::lt: return "lt";
    case ScalarOp::le: return "le";
    case ScalarOp::gt: return "gt";
    case ScalarOp::ge: return "ge";
    case ScalarOp::logical_and: return "logical_and";
    case ScalarOp::logical_or: return "logical_or";
    case ScalarOp::neg: return "neg";
    case ScalarOp::abs: return "abs";
    case ScalarOp::logical_not: return "logical_not";
  }
  return "?";
}

}  // namespace nimble::vm
