// A seeded generator of random well-typed nimble programs, with inputs that
// fit them, for checking one engine against another (the VM against the
// reference interpreter: test/vm/random_programs_test.cpp).
//
// A program is IR text (parse, ir::verify, ir::infer_types): an entry @main
// over tensors with fixed, `Any` and symbolic (sometimes bounded) dims, and
// sometimes an i64 loop count and an input List. Its body chains ops with
// broadcasting, reductions, linear algebra and data movement, and the
// control flow and data of dynamic models: `if` on scalar comparisons (also
// tuple- and closure-valued), loops as tail-recursive globals and as
// let-bound closures that call themselves, loops that grow a tensor,
// non-tail recursion (to depth 50), mutual recursion, helpers called again
// on other extents, closures capturing outer values (called, passed to
// globals, returned by them, held in tuples, curried), tuples with
// projections and tuple patterns, Lists built in loops and consumed by match
// (sum, length, stack, map, pairs), Option, and a Tree ADT, with nested and
// wildcard patterns. RandomProgram::features lists what one program uses.
//
// Correct by construction: the generator tracks every value's dtype, its
// run-time shape under `args`, and its static dims no more precisely than
// type inference knows them, so every program type-checks and runs on
// `args` without an error. `other_args` re-draws the extents of the dynamic
// dims and all data: such a run may raise an Error (a shape that no longer
// fits), which both engines must then raise alike. A value passed where a
// helper declares a type has a static dim wherever the declaration does, so
// that other extents cannot break a declared type (calls do not check them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/runtime/value.hpp"

namespace nimble::testing {

struct RandomProgram {
  std::string text;                   ///< the module, IR text
  std::string entry;                  ///< the entry point to run ("main")
  std::vector<Value> args;            ///< inputs on which the program runs without an error
  std::vector<Value> other_args;      ///< other extents and data: may raise an Error
  std::vector<std::string> features;  ///< what the program exercises (sorted, unique)
};

/// Program number `seed`: the same seed gives the same program and inputs.
[[nodiscard]] RandomProgram random_program(std::uint64_t seed);

/// Every name random_program() may list in RandomProgram::features.
[[nodiscard]] const std::vector<std::string>& random_program_features();

}  // namespace nimble::testing
