// The VM API: load or receive an Executable and run it (link nimble::runtime).
#pragma once

#include "nimble/runtime.hpp"
#include "nimble/runtime/kernel.hpp"
#include "nimble/vm/artifact.hpp"
#include "nimble/vm/executable.hpp"
#include "nimble/vm/virtual_machine.hpp"
