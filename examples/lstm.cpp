// Builds the lstm model of ../shared/workloads.md (examples/models/lstm.hpp)
// and prints its IR with the inferred types.
#include "models/print_typed.hpp"
#include "models/lstm.hpp"

int main() { return nimble::models::print_typed_model(nimble::models::build_lstm); }
