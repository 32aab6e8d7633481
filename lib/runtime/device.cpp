#include "nimble/runtime/device.hpp"

#include <charconv>

#include "support/check.hpp"

namespace nimble {

std::string to_string(Device d) {
  switch (d.kind) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::cuda: return fmt::format("cuda:{}", d.index);
  }
  return "?";
}

Device parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  constexpr std::string_view kCuda = "cuda:";
  if (text.starts_with(kCuda)) {
    const std::string_view digits = text.substr(kCuda.size());
    std::int32_t index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && index >= 0)
      return Device::cuda(index);
  }
  throw_error(ErrorKind::parse_error, "expected a device ('cpu', 'cuda' or 'cuda:N'), got '{}'",
              text);
}

}  // namespace nimble
