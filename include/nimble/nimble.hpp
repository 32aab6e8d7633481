// The whole nimble API: the runtime plus the compiler (link nimble::nimble).
#pragma once

#include "nimble/runtime.hpp"
#include "nimble/target.hpp"
