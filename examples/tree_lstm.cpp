// W2 of bench/README.md: the binary Tree-LSTM (examples/models/
// tree_lstm.hpp) over the trees of the given leaf counts; the tree is a value
// the host builds. Prints one checksum line (root h and c) per size.
#include "models/example_main.hpp"
#include "models/tree_lstm.hpp"

namespace {
// The host-side Tree value for a generated tree shape.
nimble::Value to_value(const nimble::workloads::TreeShape& t, const nimble::Adt& tree) {
  if (t.leaf >= 0) return tree["Leaf"].value({nimble::Tensor::scalar(t.leaf)});
  return tree["Node"].value({to_value(*t.left, tree), to_value(*t.right, tree)});
}
}  // namespace

int main(int argc, char** argv) {
  using namespace nimble;
  const std::vector<Tensor> weights = workloads::w2_weights();
  return models::example_main(
      argc, argv,
      {"W2", models::build_tree_lstm, workloads::kW2Sizes,
       [&](const ir::Module& m, std::int64_t n) {
         const Adt tree(m.find_adt("Tree"));
         std::vector<Value> args{to_value(*workloads::w2_tree(n), tree), workloads::w2_leaves(n)};
         args.insert(args.end(), weights.begin(), weights.end());
         return args;
       }});
}
