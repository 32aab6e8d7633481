// The workload generator reproduces the self-test of bench/README.md.
#include "models/workloads.hpp"

#include <catch2/catch.hpp>

using namespace nimble::workloads;

TEST_CASE("splitmix64 and uniform() match workloads.md", "[eval]") {
  SplitMix64 zero(0);
  CHECK(zero.next() == 0xE220A8397B1DCDAFull);
  CHECK(zero.next() == 0x6E789E6AA1B965F4ull);
  CHECK(zero.next() == 0x06C45D188009454Full);
  SplitMix64 one(1);
  CHECK(one.uniform() == 0.0133123044f);
  CHECK(one.uniform() == 0.0491563454f);
  CHECK(one.uniform() == 0.0942005366f);
  CHECK(one.uniform() == -0.011128163f);
}

TEST_CASE("W2 trees have the shapes and depths of workloads.md", "[eval]") {
  CHECK(to_string(*w2_tree(8)) == "((0, (((1, 2), 3), 4)), ((5, 6), 7))");
  CHECK(depth(*w2_tree(8)) == 5);
  CHECK(depth(*w2_tree(19)) == 7);
  CHECK(depth(*w2_tree(32)) == 9);
  CHECK(depth(*w2_tree(50)) == 11);
}

TEST_CASE("weights and inputs have the workloads' shapes", "[eval]") {
  const auto w1 = w1_weights();
  REQUIRE(w1.size() == 8);
  CHECK(w1[0].shape() == nimble::Shape{2048, 300});
  CHECK(w1[4].shape() == nimble::Shape{2048, 512});
  CHECK(w1_input(37).shape() == nimble::Shape{37, 1, 300});
  // The first weight is the first draw of seed 1.
  CHECK(w1[0].at<float>({0, 0}) == 0.0133123044f);
  const auto w3 = w3_weights(1);
  REQUIRE(w3[0].size() == 16);
  CHECK(w3[0][8].at<float>({0}) > 0.89f);  // a LayerNorm gamma is 1 + uniform
  Checksum c;
  c.add(nimble::Tensor::from_data<float>({2}, {1.5f, -2.0f}));
  CHECK(checksum_line("W9", 2, c) == "W9 2 checksum=-0.5 abssum=3.5");
}
