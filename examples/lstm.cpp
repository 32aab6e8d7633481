// W1 of bench/README.md: the 2-layer LSTM (examples/models/lstm.hpp)
// over sequences of the given lengths; prints one checksum line per length.
#include "models/example_main.hpp"
#include "models/lstm.hpp"

int main(int argc, char** argv) {
  using namespace nimble;
  const std::vector<Tensor> weights = workloads::w1_weights();
  return models::example_main(
      argc, argv,
      {"W1", models::build_lstm, workloads::kW1Sizes,
       [&](const ir::Module&, std::int64_t length) {
         std::vector<Value> args{workloads::w1_input(length)};
         args.insert(args.end(), weights.begin(), weights.end());
         return args;
       }});
}
