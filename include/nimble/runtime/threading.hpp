// How many threads nimble's parallel work may use, process-wide.
#pragma once

namespace nimble {

/// Limits nimble's parallel work (kernels split across cores with oneTBB) to
/// `n` threads in all, the calling thread included, for the whole process,
/// until the next call. The limit applies to parallel work started after the
/// call. `n` must be at least 1, else Error(invalid_argument) and the limit is
/// unchanged. A limit above the number of cores is allowed (oneTBB caps it).
/// Thread-safe. A host that holds its own `tbb::global_control` of the same
/// kind gets the smaller of both limits, as oneTBB defines.
void set_num_threads(int n);

/// The number of threads nimble's parallel work may use now: the value of the
/// last set_num_threads, or oneTBB's default (the cores available to the
/// process) when it was never called, or a smaller limit set by the host.
[[nodiscard]] int num_threads() noexcept;

}  // namespace nimble
