// The nimble runtime API: everything needed to run compiled models, without
// the compiler (link nimble::runtime).
#pragma once

#include "nimble/error.hpp"
#include "nimble/support/log.hpp"
#include "nimble/runtime/allocator.hpp"
#include "nimble/runtime/device.hpp"
#include "nimble/runtime/dtype.hpp"
#include "nimble/runtime/shape.hpp"
#include "nimble/runtime/stats.hpp"
#include "nimble/runtime/storage.hpp"
#include "nimble/runtime/tensor.hpp"
#include "nimble/runtime/tensor_compare.hpp"
#include "nimble/runtime/tensor_format.hpp"
#include "nimble/runtime/threading.hpp"
#include "nimble/runtime/trace.hpp"
#include "nimble/runtime/value.hpp"
#include "nimble/version.hpp"
