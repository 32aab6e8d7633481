// Builds the tree_lstm model of ../shared/workloads.md (examples/models/tree_lstm.hpp)
// and prints its IR with the inferred types.
#include "models/print_typed.hpp"
#include "models/tree_lstm.hpp"

int main() { return nimble::models::print_typed_model(nimble::models::build_tree_lstm); }
