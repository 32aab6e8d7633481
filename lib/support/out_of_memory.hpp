// with_memory_errors: the API boundary's translation of allocation failures.
//
// An entry point of the library (compile, parse, load, invoke, evaluate)
// runs its work through it, so that a failed allocation — std::bad_alloc, or
// std::length_error for a size no container can hold — reaches the host as
// Error(resource_exhausted) naming the operation, after the work's own
// unwinding freed what it held: the objects it was called on stay usable.
#pragma once

#include <new>
#include <stdexcept>
#include <utility>

#include "support/check.hpp"

namespace nimble {

template <class F>
decltype(auto) with_memory_errors(const char* operation, F&& work) {
  try {
    return std::forward<F>(work)();
  } catch (const std::bad_alloc&) {
    throw_error(ErrorKind::resource_exhausted, "{}: out of memory", operation);
  } catch (const std::length_error& e) {
    throw_error(ErrorKind::resource_exhausted, "{}: a size beyond what can be allocated ({})", operation,
                e.what());
  }
}

}  // namespace nimble
