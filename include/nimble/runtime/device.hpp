// Where a tensor lives and where a kernel runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nimble {

enum class DeviceKind : std::uint8_t { cpu, cuda };

/// A device: the host CPU, or CUDA GPU number `index`. A plain value.
struct Device {
  DeviceKind kind = DeviceKind::cpu;
  std::int32_t index = 0;

  [[nodiscard]] static constexpr Device cpu() noexcept { return {DeviceKind::cpu, 0}; }
  [[nodiscard]] static constexpr Device cuda(std::int32_t i = 0) noexcept {
    return {DeviceKind::cuda, i};
  }
  [[nodiscard]] constexpr bool is_cpu() const noexcept { return kind == DeviceKind::cpu; }
  friend constexpr bool operator==(Device, Device) noexcept = default;
};

/// "cpu" or "cuda:N".
[[nodiscard]] std::string to_string(Device d);
/// Parses "cpu", "cuda" (= cuda:0) or "cuda:N"; throws Error(parse_error) otherwise.
[[nodiscard]] Device parse_device(std::string_view text);

}  // namespace nimble
