// Executable::save / load: the binary image described in
// lib/vm/executable_format.hpp. The reader trusts nothing: every read is
// bounds-checked, every count is checked against the bytes left before
// anything is allocated, every enum code is checked, and the result goes
// through verify() before an Executable exists.
#include "nimble/vm/executable.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "support/check.hpp"
#include "vm/executable_data.hpp"
#include "vm/executable_format.hpp"
#include "support/out_of_memory.hpp"

namespace nimble::vm {

namespace format {

namespace {

void store_u64(std::span<std::byte> out, std::size_t at, std::uint64_t v) noexcept {
  for (std::size_t i = 0; i < 8; ++i) out[at + i] = static_cast<std::byte>(v >> (8 * i));
}

}  // namespace

std::uint64_t fnv1a64(std::span<const std::byte> bytes) noexcept {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // as content_hash (nimble/runtime/kernel.hpp)
  for (std::byte b : bytes) hash = (hash ^ static_cast<std::uint8_t>(b)) * 0x100000001b3ull;
  return hash;
}

void reseal(std::span<std::byte> image) noexcept {
  const std::span<const std::byte> payload = image.subspan(kHeaderSize);
  store_u64(image, kPayloadSizeOffset, payload.size());
  store_u64(image, kChecksumOffset, fnv1a64(payload));
}

}  // namespace format

namespace {

using format::kHeaderSize;

// Section tags, in payload order.
constexpr std::string_view kSectionTags[] = {"FUNC", "CODE", "ARGS", "SHAP",
                                             "CNST", "PRIM", "STRS", "ADTS"};

// Smallest encodings, for checking a count against the bytes left.
constexpr std::size_t kMinStringSize = 4;
constexpr std::size_t kMinDimSize = 1 + 8 + kMinStringSize;                 // kind, value, name
constexpr std::size_t kMinTypeSize = 1 + 1 + 4 + 4 + kMinStringSize;        // kind, dtype, dims, fields, name
constexpr std::size_t kInstructionSize = sizeof(Instruction);
constexpr std::size_t kMinFunctionSize = kMinStringSize + 4 + kMinTypeSize + 4 + 4 + 4 + 1;
constexpr std::size_t kMinTensorSize = 1 + 4;                               // dtype, rank
constexpr std::size_t kMinPrimitiveSize = kMinStringSize + 1 + 4 + 4 + kMinStringSize + 8 + 1 + 4;
constexpr std::size_t kMinConstructorSize = kMinStringSize + 4;
constexpr std::size_t kMinAdtSize = kMinStringSize + 4 + 4;

// ----------------------------------------------------------------------------
// Writing
// ----------------------------------------------------------------------------

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void u16(std::uint16_t v) { little_endian(v, 2); }
  void u32(std::uint32_t v) { little_endian(v, 4); }
  void u64(std::uint64_t v) { little_endian(v, 8); }
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void bytes(std::span<const std::byte> b) { out_.insert(out_.end(), b.begin(), b.end()); }

  void count(std::size_t n, std::string_view what) {
    if (n > std::numeric_limits<std::uint32_t>::max())
      throw_error(ErrorKind::invalid_argument,
                  "cannot save the executable: {} has {} entries, more than the format's limit of "
                  "2^32 - 1",
                  what, n);
    u32(static_cast<std::uint32_t>(n));
  }
  void str(std::string_view s) {
    count(s.size(), "a string");
    bytes(std::as_bytes(std::span(s.data(), s.size())));
  }

  // A section: its tag, then its size, patched by end_section.
  std::size_t begin_section(std::string_view tag) {
    bytes(std::as_bytes(std::span(tag.data(), tag.size())));
    const std::size_t at = out_.size();
    u64(0);
    return at;
  }
  void end_section(std::size_t at) {
    const std::uint64_t size = out_.size() - at - 8;
    for (std::size_t i = 0; i < 8; ++i) out_[at + i] = static_cast<std::byte>(size >> (8 * i));
  }

  std::vector<std::byte>& out() { return out_; }

 private:
  void little_endian(std::uint64_t v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out_.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  std::vector<std::byte> out_;
};

void write_type(Writer& w, const TypeDesc& t) {
  w.u8(static_cast<std::uint8_t>(t.kind));
  w.u8(static_cast<std::uint8_t>(t.dtype));
  w.count(t.dims.size(), "a type's dims");
  for (const DimDesc& d : t.dims) {
    w.u8(static_cast<std::uint8_t>(d.kind));
    w.i64(d.value);
    w.str(d.name);
  }
  w.count(t.fields.size(), "a type's fields");
  for (const TypeDesc& f : t.fields) write_type(w, f);
  w.str(t.name);
}

void write_tensor(Writer& w, const Tensor& t, std::size_t index) {
  if (!t.device().is_cpu())
    throw_error(ErrorKind::not_supported,
                "cannot save the executable: constant {} lives on {}; only host constants can be "
                "saved",
                index, to_string(t.device()));
  w.u8(static_cast<std::uint8_t>(t.dtype()));
  w.count(t.rank(), "a constant's shape");
  for (std::int64_t d : t.shape()) w.i64(d);
  w.bytes({static_cast<const std::byte*>(t.raw_data()), t.nbytes()});
}

void write_payload(Writer& w, const ExecutableData& data) {
  std::size_t at = w.begin_section("FUNC");
  w.count(data.functions.size(), "the function table");
  for (const VMFunction& f : data.functions) {
    w.str(f.name);
    w.count(f.param_names.size(), "a parameter list");
    for (std::size_t i = 0; i < f.param_names.size(); ++i) {
      w.str(f.param_names[i]);
      write_type(w, f.param_types[i]);
    }
    write_type(w, f.result_type);
    w.u32(f.num_registers);
    w.u32(f.code_begin);
    w.u32(f.code_size);
    w.u8(f.is_entry ? 1 : 0);
  }
  w.end_section(at);

  at = w.begin_section("CODE");
  w.count(data.code.size(), "the code");
  for (const Instruction& ins : data.code) {
    w.u8(static_cast<std::uint8_t>(ins.opcode));
    w.u8(ins.aux);
    w.u16(ins.reserved);
    for (std::uint32_t v : {ins.dst, ins.a, ins.b, ins.c, ins.d}) w.u32(v);
  }
  w.end_section(at);

  at = w.begin_section("ARGS");
  w.count(data.arg_pool.size(), "the argument pool");
  for (std::uint32_t v : data.arg_pool) w.u32(v);
  w.end_section(at);

  at = w.begin_section("SHAP");
  w.count(data.shape_pool.size(), "the shape pool");
  for (std::int64_t v : data.shape_pool) w.i64(v);
  w.end_section(at);

  at = w.begin_section("CNST");
  w.count(data.constants.size(), "the constant table");
  for (std::size_t i = 0; i < data.constants.size(); ++i) write_tensor(w, data.constants[i], i);
  w.end_section(at);

  at = w.begin_section("PRIM");
  w.count(data.primitives.size(), "the primitive table");
  for (const PrimitiveInfo& p : data.primitives) {
    w.str(p.name);
    w.u8(static_cast<std::uint8_t>(p.kind));
    w.u32(p.num_inputs);
    w.u32(p.num_outputs);
    w.str(p.source);
    w.u64(p.hash);
    w.u8(static_cast<std::uint8_t>(p.device.kind));
    w.u32(static_cast<std::uint32_t>(p.device.index));
  }
  w.end_section(at);

  at = w.begin_section("STRS");
  w.count(data.strings.size(), "the string table");
  for (const std::string& s : data.strings) w.str(s);
  w.end_section(at);

  at = w.begin_section("ADTS");
  w.count(data.adts.size(), "the type definitions");
  for (const AdtDesc& adt : data.adts) {
    w.str(adt.name);
    w.count(adt.type_params.size(), "a type's parameters");
    for (const std::string& p : adt.type_params) w.str(p);
    w.count(adt.constructors.size(), "a type's constructors");
    for (const ConstructorDesc& c : adt.constructors) {
      w.str(c.name);
      w.count(c.fields.size(), "a constructor's fields");
      for (const TypeDesc& f : c.fields) write_type(w, f);
    }
  }
  w.end_section(at);
}

// ----------------------------------------------------------------------------
// Reading
// ----------------------------------------------------------------------------

// A bounds-checked cursor over part of the image. Offsets in messages are
// offsets in the whole image. `context` says what is being read.
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, std::size_t base) : bytes_(bytes), base_(base) {}

  [[nodiscard]] std::size_t offset() const noexcept { return base_ + pos_; }
  [[nodiscard]] std::size_t left() const noexcept { return bytes_.size() - pos_; }
  void set_context(std::string context) { context_ = std::move(context); }

  void need(std::size_t n, std::string_view what) const {
    if (n > left())
      throw_error(ErrorKind::parse_error,
                  "truncated executable: {}{} needs {} bytes at offset {}, {} left", prefix(),
                  what, n, offset(), left());
  }

  std::span<const std::byte> bytes(std::size_t n, std::string_view what) {
    need(n, what);
    const std::span<const std::byte> out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }

  std::uint8_t u8(std::string_view what) { return static_cast<std::uint8_t>(fixed(1, what)); }
  std::uint16_t u16(std::string_view what) { return static_cast<std::uint16_t>(fixed(2, what)); }
  std::uint32_t u32(std::string_view what) { return static_cast<std::uint32_t>(fixed(4, what)); }
  std::uint64_t u64(std::string_view what) { return fixed(8, what); }
  std::int64_t i64(std::string_view what) { return static_cast<std::int64_t>(fixed(8, what)); }

  bool boolean(std::string_view what) {
    const std::size_t at = offset();
    const std::uint8_t v = u8(what);
    if (v > 1) fail_at(at, "{} must be 0 or 1, got {}", what, v);
    return v == 1;
  }

  // A u32 count of entries that take at least `min_size` bytes each: checked
  // against the bytes left, so that a corrupt count never drives an allocation.
  std::size_t count(std::string_view what, std::size_t min_size) {
    const std::size_t at = offset();
    const std::uint32_t n = u32(what);
    if (min_size != 0 && n > left() / min_size)
      fail_at(at, "truncated executable: {}{} claims {} entries of at least {} bytes, {} left",
              prefix(), what, n, min_size, left());
    return n;
  }

  std::string str(std::string_view what) {
    const std::size_t n = u32(what);
    const std::span<const std::byte> b = bytes(n, what);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }

  template <class... Args>
  [[noreturn]] void fail_at(std::size_t at, fmt::format_string<Args...> format,
                            Args&&... args) const {
    throw_error(ErrorKind::parse_error, "{} (at offset {})",
                fmt::format(format, std::forward<Args>(args)...), at);
  }

  [[nodiscard]] std::string prefix() const {
    return context_.empty() ? std::string() : context_ + ": ";
  }

 private:
  std::uint64_t fixed(std::size_t n, std::string_view what) {
    const std::span<const std::byte> b = bytes(n, what);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(b[i]) << (8 * i);
    return v;
  }

  std::span<const std::byte> bytes_;
  std::size_t base_;
  std::size_t pos_ = 0;
  std::string context_;
};

// Reads an enum stored as one byte, rejecting codes above `last`.
template <class Enum>
Enum read_enum(Reader& r, std::string_view what, Enum last) {
  const std::size_t at = r.offset();
  const std::uint8_t code = r.u8(what);
  if (code > static_cast<std::uint8_t>(last))
    r.fail_at(at, "{}invalid {} code {}", r.prefix(), what, code);
  return static_cast<Enum>(code);
}

DType read_dtype(Reader& r) { return read_enum(r, "dtype", DType::boolean); }

TypeDesc read_type(Reader& r, std::size_t depth = 1) {
  if (depth > format::kMaxTypeDepth)
    r.fail_at(r.offset(), "{}a type nests deeper than {} levels", r.prefix(),
              format::kMaxTypeDepth);
  TypeDesc t;
  t.kind = read_enum(r, "type kind", TypeDesc::Kind::func);
  t.dtype = read_dtype(r);
  t.dims.resize(r.count("a type's dims", kMinDimSize));
  for (DimDesc& d : t.dims) {
    d.kind = read_enum(r, "dim kind", DimDesc::Kind::symbol);
    d.value = r.i64("a dim");
    d.name = r.str("a dim's name");
  }
  t.fields.resize(r.count("a type's fields", kMinTypeSize));
  for (TypeDesc& f : t.fields) f = read_type(r, depth + 1);
  t.name = r.str("a type's name");
  return t;
}

Tensor read_tensor(Reader& r) {
  const DType dtype = read_dtype(r);
  std::vector<std::int64_t> dims(r.count("a constant's rank", 8));
  std::int64_t numel = 1;
  for (std::int64_t& d : dims) {
    const std::size_t at = r.offset();
    d = r.i64("a constant's dim");
    if (d < 0) r.fail_at(at, "{}a constant's dim is {}, but dims must be >= 0", r.prefix(), d);
    if (__builtin_mul_overflow(numel, d, &numel))
      r.fail_at(at, "{}a constant's element count overflows int64", r.prefix());
  }
  std::uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(numel), dtype_size(dtype), &nbytes))
    r.fail_at(r.offset(), "{}a constant of {} elements of {} is too large", r.prefix(), numel,
              to_string(dtype));
  r.need(nbytes, "a constant's data");
  const std::size_t at = r.offset();
  const std::span<const std::byte> raw = r.bytes(static_cast<std::size_t>(nbytes), "a constant");
  if (dtype == DType::boolean)
    for (std::size_t i = 0; i < raw.size(); ++i)
      if (static_cast<std::uint8_t>(raw[i]) > 1)
        r.fail_at(at + i, "{}a bool constant holds the byte {}; bools must be 0 or 1", r.prefix(),
                  static_cast<unsigned>(raw[i]));
  return Tensor::from_bytes(Shape(std::span<const std::int64_t>(dims)), dtype, raw);
}

// Runs `read_contents` on the next section, which must be `tag` and must be
// consumed exactly.
template <class F>
void read_section(Reader& payload, std::string_view tag, F&& read_contents) {
  const std::size_t at = payload.offset();
  const std::span<const std::byte> got = payload.bytes(4, fmt::format("section {}", tag));
  if (std::memcmp(got.data(), tag.data(), 4) != 0)
    payload.fail_at(at, "corrupt executable: expected section {}", tag);
  const std::uint64_t size = payload.u64(fmt::format("the size of section {}", tag));
  payload.need(size, fmt::format("section {}", tag));
  const std::size_t begin = payload.offset();
  Reader section(payload.bytes(size, tag), begin);
  section.set_context(fmt::format("section {}", tag));
  read_contents(section);
  if (section.left() != 0)
    section.fail_at(section.offset(), "corrupt executable: section {} has {} unread bytes", tag,
                    section.left());
}

ExecutableData read_payload(Reader& r) {
  ExecutableData data;
  read_section(r, kSectionTags[0], [&](Reader& s) {
    data.functions.resize(s.count("the function count", kMinFunctionSize));
    for (std::size_t i = 0; i < data.functions.size(); ++i) {
      VMFunction& f = data.functions[i];
      s.set_context(fmt::format("section FUNC: function {}", i));
      f.name = s.str("the name");
      const std::size_t params = s.count("the parameter count", kMinStringSize + kMinTypeSize);
      f.param_names.resize(params);
      f.param_types.resize(params);
      for (std::size_t p = 0; p < params; ++p) {
        f.param_names[p] = s.str("a parameter name");
        f.param_types[p] = read_type(s);
      }
      f.result_type = read_type(s);
      f.num_registers = s.u32("the register count");
      f.code_begin = s.u32("the code offset");
      f.code_size = s.u32("the code size");
      f.is_entry = s.boolean("the entry flag");
    }
  });
  read_section(r, kSectionTags[1], [&](Reader& s) {
    data.code.resize(s.count("the instruction count", kInstructionSize));
    for (Instruction& ins : data.code) {
      ins.opcode = static_cast<Opcode>(s.u8("an opcode"));  // verify() checks the range
      ins.aux = s.u8("an aux field");
      ins.reserved = s.u16("an instruction");
      ins.dst = s.u32("an instruction");
      ins.a = s.u32("an instruction");
      ins.b = s.u32("an instruction");
      ins.c = s.u32("an instruction");
      ins.d = s.u32("an instruction");
    }
  });
  read_section(r, kSectionTags[2], [&](Reader& s) {
    data.arg_pool.resize(s.count("the argument pool size", 4));
    for (std::uint32_t& v : data.arg_pool) v = s.u32("the argument pool");
  });
  read_section(r, kSectionTags[3], [&](Reader& s) {
    data.shape_pool.resize(s.count("the shape pool size", 8));
    for (std::int64_t& v : data.shape_pool) v = s.i64("the shape pool");
  });
  read_section(r, kSectionTags[4], [&](Reader& s) {
    const std::size_t n = s.count("the constant count", kMinTensorSize);
    data.constants.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      s.set_context(fmt::format("section CNST: constant {}", i));
      data.constants.push_back(read_tensor(s));
    }
  });
  read_section(r, kSectionTags[5], [&](Reader& s) {
    data.primitives.resize(s.count("the primitive count", kMinPrimitiveSize));
    for (std::size_t i = 0; i < data.primitives.size(); ++i) {
      PrimitiveInfo& p = data.primitives[i];
      s.set_context(fmt::format("section PRIM: primitive {}", i));
      p.name = s.str("the name");
      p.kind = read_enum(s, "primitive kind", PrimitiveKind::shape_function);
      p.num_inputs = s.u32("the input count");
      p.num_outputs = s.u32("the output count");
      p.source = s.str("the source");
      p.hash = s.u64("the hash");
      p.device.kind = read_enum(s, "device kind", DeviceKind::cuda);
      p.device.index = static_cast<std::int32_t>(s.u32("the device index"));
      if (p.device.index < 0 || (p.device.is_cpu() && p.device.index != 0))
        throw_error(ErrorKind::parse_error, "invalid device {} index {}", static_cast<unsigned>(p.device.kind),
                    p.device.index);
    }
  });
  read_section(r, kSectionTags[6], [&](Reader& s) {
    data.strings.resize(s.count("the string count", kMinStringSize));
    for (std::string& str : data.strings) str = s.str("a string");
  });
  read_section(r, kSectionTags[7], [&](Reader& s) {
    data.adts.resize(s.count("the type count", kMinAdtSize));
    for (std::size_t i = 0; i < data.adts.size(); ++i) {
      AdtDesc& adt = data.adts[i];
      s.set_context(fmt::format("section ADTS: type {}", i));
      adt.name = s.str("the name");
      adt.type_params.resize(s.count("the type parameter count", kMinStringSize));
      for (std::string& p : adt.type_params) p = s.str("a type parameter");
      adt.constructors.resize(s.count("the constructor count", kMinConstructorSize));
      for (ConstructorDesc& c : adt.constructors) {
        c.name = s.str("a constructor name");
        c.fields.resize(s.count("a constructor's field count", kMinTypeSize));
        for (TypeDesc& f : c.fields) f = read_type(s);
      }
    }
  });
  if (r.left() != 0)
    r.fail_at(r.offset(), "corrupt executable: {} bytes after the last section", r.left());
  return data;
}

ExecutableData read_image(std::span<const std::byte> bytes) {
  Reader header(bytes, 0);
  header.need(kHeaderSize, "the header");
  const std::span<const std::byte> magic = header.bytes(format::kMagic.size(), "the magic");
  if (std::memcmp(magic.data(), format::kMagic.data(), magic.size()) != 0)
    throw_error(ErrorKind::parse_error, "not a nimble executable: it does not start with \"{}\"",
                format::kMagic);
  if (const std::uint32_t version = header.u32("the version"); version != format::kFormatVersion)
    throw_error(ErrorKind::parse_error,
                "unsupported executable format version {} (this build reads version {})", version,
                format::kFormatVersion);
  if (const std::uint32_t flags = header.u32("the flags"); flags != 0)
    throw_error(ErrorKind::parse_error, "unsupported executable flags {:#x} (none are defined)",
                flags);
  const std::uint64_t payload_size = header.u64("the payload size");
  const std::uint64_t checksum = header.u64("the checksum");
  const std::span<const std::byte> payload = bytes.subspan(kHeaderSize);
  if (payload_size > payload.size())
    throw_error(ErrorKind::parse_error,
                "truncated executable: the header announces a payload of {} bytes, {} follow",
                payload_size, payload.size());
  if (payload_size < payload.size())
    throw_error(ErrorKind::parse_error,
                "corrupt executable: {} bytes after the payload of {} bytes",
                payload.size() - payload_size, payload_size);
  if (const std::uint64_t actual = format::fnv1a64(payload); actual != checksum)
    throw_error(ErrorKind::parse_error,
                "corrupt executable: the payload's checksum is {:#018x}, the header says {:#018x}",
                actual, checksum);
  Reader r(payload, kHeaderSize);
  return read_payload(r);
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

Executable Executable::load(std::span<const std::byte> bytes) {
  return with_memory_errors("Executable::load", [&] {
    auto data = std::make_shared<ExecutableData>(read_image(bytes));
    verify(*data);
    return Executable(std::move(data));
  });
}

std::vector<std::byte> Executable::save() const {
  Writer w;
  w.out().resize(kHeaderSize);
  write_payload(w, *data_);
  std::vector<std::byte> image = std::move(w.out());
  std::memcpy(image.data(), format::kMagic.data(), format::kMagic.size());
  for (std::size_t i = 0; i < 4; ++i) {
    image[8 + i] = static_cast<std::byte>(format::kFormatVersion >> (8 * i));
    image[12 + i] = std::byte{0};  // flags
  }
  format::reseal(image);
  return image;
}

Executable Executable::load_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file)
    throw_error(ErrorKind::invalid_argument, "cannot open executable '{}': {}", path, errno_text());
  std::vector<std::byte> bytes;
  std::byte buffer[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    bytes.insert(bytes.end(), buffer, buffer + n);
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file.get()))
    throw_error(ErrorKind::invalid_argument, "cannot read executable '{}': {}", path, errno_text());
  try {
    return load(bytes);
  } catch (Error& e) {
    e.with_context(fmt::format("'{}'", path));
    throw;
  }
}

void Executable::save_file(const std::string& path) const {
  const std::vector<std::byte> image = save();
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file)
    throw_error(ErrorKind::invalid_argument, "cannot write executable '{}': {}", path,
                errno_text());
  if (std::fwrite(image.data(), 1, image.size(), file.get()) != image.size() ||
      std::fflush(file.get()) != 0)
    throw_error(ErrorKind::invalid_argument, "cannot write executable '{}': {}", path,
                errno_text());
  if (std::fclose(file.release()) != 0)
    throw_error(ErrorKind::invalid_argument, "cannot write executable '{}': {}", path,
                errno_text());
}

}  // namespace nimble::vm
