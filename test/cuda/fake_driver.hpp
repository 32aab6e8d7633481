// What the fake CUDA driver (fake_driver.cpp) shares with the tests that
// load it: the record of a launch, as its fake_cuda_launch() fills it in.
#pragma once

extern "C" {

struct FakeLaunch {
  char entry[64];
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  void* stream;
  int num_params;
  unsigned long long params[8];  // each parameter's bytes, zero-extended
};

}  // extern "C"
