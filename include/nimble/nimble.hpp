// The whole nimble API: the runtime plus the compiler (link nimble::nimble).
#pragma once

#include "nimble/runtime.hpp"
#include "nimble/builder.hpp"
#include "nimble/compile.hpp"
#include "nimble/disk_cache.hpp"
#include "nimble/export.hpp"
#include "nimble/interpreter.hpp"
#include "nimble/ir/module.hpp"
#include "nimble/target.hpp"
#include "nimble/vm.hpp"
