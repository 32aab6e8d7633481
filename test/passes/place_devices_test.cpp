// Golden tests of place_devices: where each value lives and where copies go,
// for a second device. No GPU is needed: placement is a compile-time
// decision, and the reference interpreter (one memory) checks that the
// placed program still computes what the input does.
#include <catch2/catch.hpp>

#include <string>

#include "nimble/nimble.hpp"
#include "passes/golden.hpp"
#include "passes/passes.hpp"

using namespace nimble;
using nimble::testing::check_golden;

namespace {

ir::Module on_gpu(const ir::Module& m) { return passes::place_devices(m, Device::cuda(0)); }
ir::Module on_cpu(const ir::Module& m) { return passes::place_devices(m, Device::cpu()); }

}  // namespace

TEST_CASE("place_devices: on the CPU there is nothing to do", "[passes]") {
  check_golden(on_cpu, nimble::testing::kNothingToDo, nimble::testing::kNothingToDo);
}

TEST_CASE("place_devices: kernels on the target, scalar control and shapes on the CPU", "[passes]") {
  check_golden(on_gpu, nimble::testing::kPlacementProgram,
               R"(
entry def @f(%x: f32[n, 4], %w: f32[4, 4], %k: i64[]) -> (f32[n, 4], i64[2], i64[]) {
  let %x_cuda0 = device_copy(%x, src="cpu", dst="cuda:0");
  let %a = exp(%x_cuda0);
  let %b = add(%a, %x_cuda0);
  let %s = sum(%b);
  let %c = greater(%s, device_copy(0f32, src="cpu", dst="cuda:0"));
  let %j = add(%k, 1i64);
  let %c_cpu = device_copy(%c, src="cuda:0", dst="cpu");
  let %r = if (%c_cpu) {
    let %w_cuda0 = device_copy(%w, src="cpu", dst="cuda:0");
    let %l = @layer(%b, %w_cuda0);
    %l
  } else {
    %a
  };
  let %d = shape_of(%b);
  let %r_cpu = device_copy(%r, src="cuda:0", dst="cpu");
  (%r_cpu, %d, %j)
}

def @layer(%h: f32[n, 4], %w: f32[4, 4]) -> f32[n, 4] {
  let %y = matmul(%h, %w);
  let %t = tanh(%y);
  %t
}
)");
}

namespace {

// A list built and folded inside the program, a closure over a tensor.
ir::Module list_program(bool list_from_host) {
  Builder b;
  Adt list = b.list();
  const Type vec = f32({2});
  Function total = b.declare("total", {{"xs", list.type({vec})}}, vec);
  b.define(total, [&](Expr xs) -> Expr {
    return Match(xs)
        .case_(list["Nil"], [&] { return constant(Tensor::zeros({2}, DType::f32)); })
        .case_(list["Cons"], [&](Expr h, Expr t) { return h + total(t); });
  });
  if (list_from_host) {
    b.entry(b.def("main", {{"x", vec}, {"xs", list.type({vec})}}, [&](Expr x, Expr xs) { return total(xs) * x; }));
  } else {
    b.entry(b.def("main", {{"x", vec}}, [&](Expr x) {
      Closure scale = closure({{"y", vec}}, vec, [&](Expr y) { return y * x; });
      return scale(total(list["Cons"]({x, list["Cons"]({exp(x), list["Nil"]()})})));
    }));
  }
  return b.build();
}

}  // namespace

TEST_CASE("place_devices: ADT fields, match bindings, closures and calls meet on the target", "[passes]") {
  // A list built and folded inside the program, a closure over a parameter:
  // the list's fields and @total's parameter and result are on the target,
  // the closure copies what it captured from the host where it uses it.
  check_golden(on_gpu, R"(
type List<T> { Nil, Cons(T, List<T>) }

entry def @main(%x: f32[2]) -> f32[2] {
  let %fn = fn (%y: f32[2]) -> f32[2] {
    let %mul = mul(%y, %x);
    %mul
  };
  let %exp = exp(%x);
  let %Cons = Cons(%exp, Nil);
  let %Cons_1 = Cons(%x, %Cons);
  let %total = @total(%Cons_1);
  let %call = %fn(%total);
  %call
}

def @total(%xs: List<f32[2]>) -> f32[2] {
  let %match = match (%xs) {
    Nil => {
      const f32[2] [0; 2]
    },
    Cons(%v, %v_1) => {
      let %total = @total(%v_1);
      let %add = add(%v, %total);
      %add
    }
  };
  %match
}
)",
               R"(
type List<T> { Nil, Cons(T, List<T>) }

entry def @main(%x: f32[2]) -> f32[2] {
  let %fn = fn (%y: f32[2]) -> f32[2] {
    let %x_cuda0 = device_copy(%x, src="cpu", dst="cuda:0");
    let %mul = mul(%y, %x_cuda0);
    %mul
  };
  let %x_cuda0_1 = device_copy(%x, src="cpu", dst="cuda:0");
  let %exp = exp(%x_cuda0_1);
  let %Cons = Cons(%exp, Nil);
  let %Cons_1 = Cons(%x_cuda0_1, %Cons);
  let %total = @total(%Cons_1);
  let %call = %fn(%total);
  let %call_cpu = device_copy(%call, src="cuda:0", dst="cpu");
  %call_cpu
}

def @total(%xs: List<f32[2]>) -> f32[2] {
  let %match = match (%xs) {
    Nil => {
      device_copy(const f32[2] [0; 2], src="cpu", dst="cuda:0")
    },
    Cons(%v, %v_1) => {
      let %total = @total(%v_1);
      let %add = add(%v, %total);
      %add
    }
  };
  %match
}
)");
}

TEST_CASE("place_devices: an entry's list of host tensors goes to the target whole, once, at the entry", "[passes]") {
  const ir::Module m = list_program(true);
  CHECK(ir::print(passes::place_devices(m, Device::cpu())) == ir::print(m));
  const std::string placed = ir::print(passes::place_devices(m, Device::cuda(0)));
  INFO(placed);
  CHECK_THAT(placed, Catch::Contains("entry def @main(%x: f32[2], %xs: List<f32[2]>) {\n"
                                     "  let %xs_cuda0 = device_copy(%xs, src=\"cpu\", dst=\"cuda:0\");\n") &&
                         Catch::Contains("@total(%xs_cuda0)"));
  // One copy of the list: @total takes it where its type says (the target).
  CHECK(placed.find("device_copy(%xs") == placed.rfind("device_copy(%xs"));
}

TEST_CASE("place_devices: compiling for a device needs no device; running on one that is not there says so",
          "[passes]") {
  const ir::Module m = list_program(false);
  vm::VirtualMachine absent(compile(m, {.target = Device::cuda(99)}));
  CHECK_THROWS_WITH(absent.invoke("main", {Tensor::from_data<float>({2}, {0.5f, -1.0f})}),
                    Catch::Contains("not supported") && Catch::Contains("cuda:99"));
  vm::VirtualMachine machine(compile(m, {.target = Device::cpu()}));
  const Tensor x = Tensor::from_data<float>({2}, {0.5f, -1.0f});
  CHECK(nimble::testing::close_value(machine.invoke("main", {x}), evaluate(m, "main", {x}), {.rtol = 1e-5, .atol = 1e-6}));
}

TEST_CASE("place_devices: a function without a declared result type returns it where its type says", "[passes]") {
  // stack runs on the CPU (its shape depends on the list); @pair's result,
  // a tensor, is on the target by its type, so it is copied there.
  check_golden(on_gpu, R"(
type List<T> { Nil, Cons(T, List<T>) }
entry def @main(%x: f32[4]) -> f32[?, 4] {
  let %s = @pair(%x);
  let %t = tanh(%s);
  %t
}
def @pair(%x: f32[4]) {
  let %y = exp(%x);
  let %l = Cons(%y, Cons(%x, Nil));
  stack(%l, axis=0)
}
)",
               R"(
type List<T> { Nil, Cons(T, List<T>) }

entry def @main(%x: f32[4]) -> f32[?, 4] {
  let %x_cuda0 = device_copy(%x, src="cpu", dst="cuda:0");
  let %s = @pair(%x_cuda0);
  let %t = tanh(%s);
  let %t_cpu = device_copy(%t, src="cuda:0", dst="cpu");
  %t_cpu
}

def @pair(%x: f32[4]) {
  let %y = exp(%x);
  let %l = Cons(%y, Cons(%x, Nil));
  device_copy(stack(%l, axis=0), src="cpu", dst="cuda:0")
}
)");
}

TEST_CASE("place_devices: an entry's results asked on the target stay there, a list of them too", "[passes]") {
  const auto results_on_gpu = [](const ir::Module& m) {
    return passes::place_devices(m, Device::cuda(0), Device::cuda(0));
  };
  // No copy back to the host: the tensor result and the list's fields are
  // where the kernels made them; the integer scalar is on the CPU as ever.
  check_golden(results_on_gpu, R"(
type List<T> { Nil, Cons(T, List<T>) }

entry def @main(%x: f32[2], %k: i64[]) -> (f32[2], List<f32[2]>, i64[]) {
  let %exp = exp(%x);
  let %j = add(%k, 1i64);
  let %Cons = Cons(%exp, Nil);
  let %Cons_1 = Cons(%x, %Cons);
  (%exp, %Cons_1, %j)
}
)",
               R"(
type List<T> { Nil, Cons(T, List<T>) }

entry def @main(%x: f32[2], %k: i64[]) -> (f32[2], List<f32[2]>, i64[]) {
  let %x_cuda0 = device_copy(%x, src="cpu", dst="cuda:0");
  let %exp = exp(%x_cuda0);
  let %j = add(%k, 1i64);
  let %Cons = Cons(%exp, Nil);
  let %Cons_1 = Cons(%x_cuda0, %Cons);
  (%exp, %Cons_1, %j)
}
)");
  const ir::Module m = list_program(false);
  CHECK_THROWS_WITH(passes::place_devices(m, Device::cuda(0), Device::cuda(1)),
                    "place_devices: results go to the CPU or to the target (cuda:0), got cuda:1");
}

TEST_CASE("place_devices: a tuple an entry returns to another function goes to the target whole", "[passes]") {
  // @g, an entry, hands its caller host tensors; @main reads the tuple's
  // tensor field in a kernel, where fields are by type: on the target.
  const ir::Module m = [] {
    ir::Module parsed = ir::parse(nimble::testing::kEntryCallsEntry);
    ir::infer_types(parsed);
    return parsed;
  }();
  const std::string placed = ir::print(passes::place_devices(m, Device::cuda(0)));
  INFO(placed);
  CHECK_THAT(placed, Catch::Contains("let %p = device_copy(@g(%x), src=\"cpu\", dst=\"cuda:0\");"));
  // Asked on the target, @g's results are there already: no copy.
  const std::string kept = ir::print(passes::place_devices(m, Device::cuda(0), Device::cuda(0)));
  INFO(kept);
  CHECK_THAT(kept, Catch::Contains("let %p = @g(%x);"));
  CHECK_THAT(kept, !Catch::Contains("device_copy(@g"));
}
