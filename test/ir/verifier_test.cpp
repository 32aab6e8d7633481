// The verifier: ill-formed modules built with the IR API are rejected with a
// message naming the problem.
#include <catch2/catch.hpp>

#include "ir/op.hpp"
#include "nimble/ir/module.hpp"
#include "ops/ops.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using namespace nimble::ir;

namespace {

Expr add_call(Expr a, Expr b) { return call(op_ref(ops::add()), {std::move(a), std::move(b)}); }

Module single(Expr fn) {
  Module m;
  m.add_function("f", std::move(fn));
  return m;
}

}  // namespace

TEST_CASE("a well-formed module verifies", "[ir]") {
  Expr x = var("x", tensor_type({2}, DType::f32));
  Expr y = var("y");
  Module m = single(function({x}, {}, let(y, add_call(x, x), y)));
  m.add_entry("f");
  CHECK_NOTHROW(verify(m));
}

TEST_CASE("unbound and twice-bound variables are ill-formed", "[ir]") {
  Expr x = var("x", tensor_type({2}, DType::f32));
  Expr free = var("z", tensor_type({2}, DType::f32));
  CHECK_NIMBLE_ERROR(verify(single(function({x}, {}, add_call(x, free)))),
                     ErrorKind::invalid_argument,
                     "ill-formed IR: %z is used where it is not bound (in `%z`)");
  // A variable bound in one branch is not visible after it.
  Expr y = var("y");
  Expr leaked = function({x}, {}, tuple({let(y, x, y), y}));
  CHECK_NIMBLE_ERROR(verify(single(leaked)), ErrorKind::invalid_argument,
                     "ill-formed IR: %y is used where it is not bound (in `%y`)");
  Expr twice = function({x}, {}, let(x, x, x));
  CHECK_NIMBLE_ERROR(verify(single(twice)), ErrorKind::invalid_argument,
                     "ill-formed IR: %x is bound more than once (in `%x`)");
}

TEST_CASE("arities, globals, constructors and entry points are checked", "[ir]") {
  Expr x = var("x", tensor_type({2}, DType::f32));
  CHECK_NIMBLE_ERROR(verify(single(function({x}, {}, call(op_ref(ops::add()), {x})))),
                     ErrorKind::invalid_argument,
                     "ill-formed IR: add takes 2 arguments, got 1 (in `add(%x)`)");
  CHECK_NIMBLE_ERROR(verify(single(function({x}, {}, call(global_var("g"), {x})))),
                     ErrorKind::invalid_argument,
                     "ill-formed IR: @g is not a function of this module (in `@g`)");

  AdtDef list = make_ref<AdtDefNode>(
      "List", std::vector<std::string>{"T"},
      std::vector<ConstructorDef>{{"Nil", {}},
                                  {"Cons", {type_var("T"), adt_type("List", {type_var("T")})}}});
  Module m;
  m.add_adt(list);
  m.add_function("f", function({x}, {}, call(constructor(list, "Cons"), {x})));
  CHECK_NIMBLE_ERROR(verify(m), ErrorKind::invalid_argument,
                     "ill-formed IR: Cons takes 2 fields, got 1 (in `Cons(%x)`)");

  Module entry_missing;
  entry_missing.add_entry("main");
  CHECK_NIMBLE_ERROR(verify(entry_missing), ErrorKind::invalid_argument,
                     "ill-formed IR: entry point @main is not a function of the module");

  Module bad_adt;
  bad_adt.add_adt(make_ref<AdtDefNode>(
      "Box", std::vector<std::string>{},
      std::vector<ConstructorDef>{{"Box", {adt_type("Missing")}}}));
  CHECK_NIMBLE_ERROR(verify(bad_adt), ErrorKind::invalid_argument,
                     "ill-formed IR: constructor Box: unknown type Missing");
  Module bad_arity;
  bad_arity.add_adt(list);
  bad_arity.add_adt(make_ref<AdtDefNode>(
      "Box", std::vector<std::string>{},
      std::vector<ConstructorDef>{{"Box", {adt_type("List")}}}));
  CHECK_NIMBLE_ERROR(verify(bad_arity), ErrorKind::invalid_argument,
                     "ill-formed IR: constructor Box: type List takes 1 type arguments, got 0");
}

TEST_CASE("patterns must fit their constructors", "[ir]") {
  AdtDef option = make_ref<AdtDefNode>(
      "Option", std::vector<std::string>{"T"},
      std::vector<ConstructorDef>{{"None", {}}, {"Some", {type_var("T")}}});
  Module m;
  m.add_adt(option);
  Expr o = var("o", adt_type("Option", {tensor_type({}, DType::f32)}));
  Expr a = var("a");
  Expr b = var("b");
  Expr fn = function(
      {o}, {},
      match(o, {{pattern_constructor(constructor(option, "Some"), {pattern_var(a), pattern_var(b)}),
                 a}}));
  m.add_function("f", fn);
  CHECK_NIMBLE_ERROR(verify(m), ErrorKind::invalid_argument,
                     "ill-formed IR: pattern Some has 2 fields, but Some takes 1 (in `match (%o) "
                     "{ ...`)");
}

TEST_CASE("modules reject duplicate definitions", "[ir]") {
  Module m;
  Expr x = var("x", tensor_type({2}, DType::f32));
  m.add_function("f", function({x}, {}, x));
  CHECK_NIMBLE_ERROR(m.add_function("f", function({x}, {}, x)), ErrorKind::invalid_argument,
                     "module: function @f is already defined");
  CHECK_NIMBLE_ERROR(m.add_function("g", x), ErrorKind::invalid_argument,
                     "module: global @g must be a function");
}
