// Builds the bert model of ../shared/workloads.md (examples/models/bert.hpp)
// and prints its IR with the inferred types.
#include "models/print_typed.hpp"
#include "models/bert.hpp"

int main() { return nimble::models::print_typed_model(nimble::models::build_bert); }
