// libFuzzer target: Executable::load on arbitrary bytes must load or throw
// nimble::Error, never crash, hang or touch memory it does not own (built
// with ASan and UBSan, see README.md). Anything else — another exception, a
// signal, a sanitizer report — is a finding.
//
// Each input is tried twice: as it is, and with a valid header (magic,
// version, flags, payload size and checksum rewritten), so that mutations of
// the payload reach the section reader and the verifier instead of stopping
// at the checksum.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "nimble/error.hpp"
#include "nimble/vm/executable.hpp"
#include "vm/executable_format.hpp"

namespace {

using nimble::vm::Executable;
namespace format = nimble::vm::format;

void load_one(std::span<const std::byte> bytes) {
  try {
    const Executable executable = Executable::load(bytes);
    // What loads must also print, and save back to the same bytes (the
    // encoding is canonical: any other result means the reader accepted
    // something the writer cannot produce).
    static_cast<void>(executable.disassemble());
    const std::vector<std::byte> again = executable.save();
    if (again.size() != bytes.size() || std::memcmp(again.data(), bytes.data(), bytes.size()) != 0)
      std::abort();
  } catch (const nimble::Error&) {
    // A rejected input: what the loader must do with bad bytes.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  load_one(bytes);
  if (size < format::kHeaderSize) return 0;
  std::vector<std::byte> image(bytes.begin(), bytes.end());
  std::memcpy(image.data(), format::kMagic.data(), format::kMagic.size());
  const std::uint32_t version = format::kFormatVersion;
  for (std::size_t i = 0; i < 4; ++i) {
    image[8 + i] = static_cast<std::byte>(version >> (8 * i));
    image[12 + i] = std::byte{0};
  }
  format::reseal(image);
  load_one(image);
  return 0;
}
