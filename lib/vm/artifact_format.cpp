#include "vm/artifact_format.hpp"

#include <cstring>

#include "nimble/version.hpp"
#include "support/check.hpp"

namespace nimble::runtime::artifact {

namespace {

constexpr char kMagic[8] = {'N', 'I', 'M', 'B', 'L', 'E', 'A', 'R'};
constexpr std::size_t kHeaderSize = 8 + 4 + 4 + 8 + 8;

void write_bucket(PayloadWriter& w, const Bucket& b) {
  w.u32(static_cast<std::uint32_t>(b.dims.size()));
  for (const DimBucket& d : b.dims) {
    w.u64(static_cast<std::uint64_t>(d.exact));
    w.u64(static_cast<std::uint64_t>(d.multiple));
    w.u64(static_cast<std::uint64_t>(d.min));
    w.u64(static_cast<std::uint64_t>(d.max));
  }
}

Bucket read_bucket(PayloadReader& r) {
  Bucket b;
  const std::uint32_t n = r.u32();
  if (n > r.remaining()) {
    r.fail();
    return b;
  }
  for (std::uint32_t i = 0; i < n && !r.failed(); ++i) {
    DimBucket d;
    d.exact = static_cast<std::int64_t>(r.u64());
    d.multiple = static_cast<std::int64_t>(r.u64());
    d.min = static_cast<std::int64_t>(r.u64());
    d.max = static_cast<std::int64_t>(r.u64());
    b.dims.push_back(d);
  }
  return b;
}

}  // namespace

std::string write(const Contents& c) {
  PayloadWriter w;
  w.str(c.nimble_version);
  w.str(c.llvm_version);
  w.u64(c.executable.size());
  w.bytes(c.executable);
  w.u32(static_cast<std::uint32_t>(c.primitives.size()));
  for (const PrimitiveEntry& p : c.primitives) {
    w.u64(p.hash);
    w.str(p.name);
    w.u32(static_cast<std::uint32_t>(p.kind));
    w.str(p.builtin);
    w.u32(static_cast<std::uint32_t>(p.builtin_attrs.size()));
    for (std::int64_t a : p.builtin_attrs) w.u64(static_cast<std::uint64_t>(a));
    w.u32(static_cast<std::uint32_t>(p.kernels.size()));
    for (const KernelEntry& k : p.kernels) {
      write_bucket(w, k.bucket);
      w.str(k.symbol_prefix);
      write_desc(w, k.desc);
      w.u32(static_cast<std::uint32_t>(k.ptx.size()));
      for (const Ptx& code : k.ptx) {
        w.u32(code.compute_capability);
        w.str(code.text);
      }
    }
  }
  w.u32(static_cast<std::uint32_t>(c.variants.size()));
  for (const Variant& v : c.variants) {
    w.str(v.target);
    w.str(v.cpu);
    w.u32(static_cast<std::uint32_t>(v.required_features.size()));
    for (const std::string& f : v.required_features) w.str(f);
    w.u64(v.shared_object.size());
    w.bytes(v.shared_object);
  }
  const std::string body = std::move(w).take();
  PayloadWriter file;
  file.bytes(std::string_view(kMagic, sizeof kMagic));
  file.u32(kFormat);
  file.u32(0);
  file.u64(body.size());
  file.u64(fnv1a(body));
  file.bytes(body);
  return std::move(file).take();
}

Contents read(std::string_view file, const std::string& path) {
  const auto corrupt = [&path](std::string_view what) {
    throw_error(ErrorKind::parse_error, "artifact {}: {}", path, what);
  };
  if (file.size() < kHeaderSize || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0)
    corrupt("not a nimble artifact (no NIMBLEAR header)");
  PayloadReader header(file.substr(sizeof kMagic, kHeaderSize - sizeof kMagic));
  const std::uint32_t format = header.u32();
  const std::uint32_t flags = header.u32();
  const std::uint64_t body_size = header.u64();
  const std::uint64_t checksum = header.u64();
  if (format != kFormat)
    throw_error(ErrorKind::parse_error, "artifact {}: format {}, this runtime reads format {}", path, format,
                kFormat);
  // Outside the checksum: a reader that ignored unknown flags would accept
  // bytes no writer wrote (found by artifact_reader_fuzzer).
  if (flags != 0)
    throw_error(ErrorKind::parse_error, "artifact {}: header flags {:#x}, this runtime knows none (expected 0)",
                path, flags);
  if (body_size != file.size() - kHeaderSize)
    throw_error(ErrorKind::parse_error, "artifact {}: truncated or extended: its header says {} bytes follow, {} do",
                path, body_size, file.size() - kHeaderSize);
  const std::string_view body = file.substr(kHeaderSize);
  if (fnv1a(body) != checksum) corrupt("corrupt (checksum mismatch)");

  PayloadReader r(body);
  Contents c;
  c.nimble_version = r.str();
  if (!r.failed() && c.nimble_version != kVersion)
    throw_error(ErrorKind::not_supported, "not supported: artifact {} was exported by nimble {}; this runtime is {}",
                path, c.nimble_version, kVersion);
  c.llvm_version = r.str();
  c.executable = std::string(r.bytes(r.u64()));
  const auto count = [&r] {
    const std::uint32_t n = r.u32();
    if (n > r.remaining()) r.fail();
    return r.failed() ? 0u : n;
  };
  c.primitives.resize(count());
  for (PrimitiveEntry& p : c.primitives) {
    p.hash = r.u64();
    p.name = r.str();
    const std::uint32_t kind = r.u32();
    if (kind > static_cast<std::uint32_t>(PrimitiveKind::shape_function)) corrupt("a primitive of unknown kind");
    p.kind = static_cast<PrimitiveKind>(kind);
    p.builtin = r.str();
    p.builtin_attrs.resize(count());
    for (std::int64_t& a : p.builtin_attrs) a = static_cast<std::int64_t>(r.u64());
    p.kernels.resize(count());
    for (KernelEntry& k : p.kernels) {
      k.bucket = read_bucket(r);
      k.symbol_prefix = r.str();
      std::optional<NativeKernelDesc> desc = read_desc(r);
      if (!desc) corrupt(fmt::format("the kernel table of {} is malformed", p.name));
      k.desc = std::move(*desc);
      k.ptx.resize(count());
      for (Ptx& code : k.ptx) {
        code.compute_capability = r.u32();
        code.text = r.str();
        if (!r.failed() && (code.text.empty() || (&code != k.ptx.data() && (&code - 1)->compute_capability >=
                                                                               code.compute_capability)))
          corrupt(fmt::format("the PTX of {} is empty or out of order", p.name));
      }
      if (k.bucket.dims.size() != 0 && k.bucket.dims.size() != k.desc.bindings.size())
        corrupt(fmt::format("a bucket of {} does not match its kernel's dynamic dims", p.name));
    }
    if (!r.failed() && p.builtin.empty() == p.kernels.empty())
      corrupt(fmt::format("{} has {}", p.name, p.kernels.empty() ? "no kernel" : "both kernels and a built-in"));
    if (!r.failed() && !p.kernels.empty() && !p.kernels[0].bucket.dims.empty())
      corrupt(fmt::format("{} has no generic kernel", p.name));
  }
  c.variants.resize(count());
  for (Variant& v : c.variants) {
    v.target = r.str();
    v.cpu = r.str();
    v.required_features.resize(count());
    for (std::string& f : v.required_features) f = r.str();
    v.shared_object = std::string(r.bytes(r.u64()));
  }
  if (r.failed()) corrupt("malformed (a field runs past the end)");
  if (r.remaining() != 0) corrupt("malformed (bytes after the last field)");
  if (c.variants.empty()) corrupt("it holds no kernel code");
  return c;
}

}  // namespace nimble::runtime::artifact
