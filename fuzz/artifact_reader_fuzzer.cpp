// libFuzzer target: the artifact reader (vm/artifact_format.hpp) on
// arbitrary bytes must return contents or throw nimble::Error, never crash,
// hang or touch memory it does not own. It stops before the loader maps any
// code: a shared object's bytes are only trusted once the checksum held.
//
// Each input is tried twice: as it is, and behind a valid header (magic,
// format, body size and checksum written for it), so that mutations reach
// the tables instead of stopping at the checksum.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nimble/error.hpp"
#include "vm/artifact_format.hpp"
#include "runtime/payload.hpp"

namespace {

void read_one(std::string_view bytes) {
  try {
    const nimble::runtime::artifact::Contents contents = nimble::runtime::artifact::read(bytes, "fuzz");
    // What reads must write back to the same bytes (the encoding is canonical).
    if (nimble::runtime::artifact::write(contents) != bytes) std::abort();
  } catch (const nimble::Error&) {
    // A rejected input: what the reader must do with bad bytes.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  read_one(body);
  nimble::runtime::PayloadWriter w;
  w.bytes(std::string_view("NIMBLEAR", 8));
  w.u32(nimble::runtime::artifact::kFormat);
  w.u32(0);
  w.u64(body.size());
  w.u64(nimble::runtime::fnv1a(body));
  w.bytes(body);
  read_one(std::move(w).take());
  return 0;
}
