#include "codegen/kernel_store.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <link.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "nimble/runtime/kernel.hpp"
#include "runtime/stats_counters.hpp"
#include "support/log.hpp"

namespace nimble::codegen {

namespace {

constexpr char kMagic[8] = {'N', 'I', 'M', 'B', 'L', 'E', 'K', 'C'};
constexpr std::uint32_t kFormat = 2;  // 1: an FNV-1a checksum in place of the MAC
constexpr std::size_t kMacSize = 32;  // HMAC-SHA256
constexpr std::size_t kMacAt = 8 + 4 + 4 + 8;
constexpr std::size_t kHeaderSize = kMacAt + kMacSize;
constexpr std::size_t kSecretSize = 32;
/// No kernel object comes near this; a bigger file is not read.
constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{1} << 28;

template <class T>
void put(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // x86-64 and aarch64: little-endian
  out.append(bytes, sizeof(T));
}

template <class T>
T get(std::string_view in, std::size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  return v;
}

}  // namespace

std::uint64_t kernel_key(std::string_view identity) noexcept { return runtime::fnv1a(identity); }

namespace {

// The NT_GNU_BUILD_ID note of the loaded object whose load address is `base`.
std::string build_id_of(const void* base) {
  struct Search {
    const void* base;
    std::string id;
  } search{base, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) -> int {
        auto& s = *static_cast<Search*>(data);
        if (reinterpret_cast<const void*>(info->dlpi_addr) != s.base) return 0;
        for (int p = 0; p < info->dlpi_phnum; ++p) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[p];
          if (ph.p_type != PT_NOTE) continue;
          const char* at = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* const end = at + ph.p_memsz;
          while (end - at >= static_cast<std::ptrdiff_t>(sizeof(ElfW(Nhdr)))) {
            const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(at);
            const char* name = at + sizeof(ElfW(Nhdr));
            const char* desc = name + ((note->n_namesz + 3) & ~3u);
            const char* next = desc + ((note->n_descsz + 3) & ~3u);
            if (next > end) break;
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
              for (std::size_t i = 0; i < note->n_descsz; ++i)
                s.id += fmt::format("{:02x}", static_cast<unsigned char>(desc[i]));
              return 1;
            }
            at = next;
          }
        }
        return 1;
      },
      &search);
  return search.id;
}

}  // namespace

const std::string& library_build_id() {
  // Never destroyed: a background compilation may read it while the process
  // exits (BackgroundCompiler::process()).
  static const std::string* const id = new std::string([] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&library_build_id), &info) == 0) return std::string();
    return build_id_of(info.dli_fbase);
  }());
  return *id;
}

namespace {

// One log line per distinct problem, for the life of the process: a cache
// that is off or skips a file says so once, not once per kernel.
void warn_once(const std::string& message) { detail::warn_once("kernel cache: " + message); }

// Why the opened file `fd` may not be trusted ("" if it may): not a regular
// file, not `owner`'s, or writable by others.
std::string untrusted_file(int fd, uid_t owner, struct stat& st) {
  if (::fstat(fd, &st) != 0) return "cannot stat it";
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != owner) return fmt::format("owned by uid {}, expected uid {}", st.st_uid, owner);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return fmt::format("writable by its group or others (mode {:o})", st.st_mode & 07777);
  return {};
}

// The first `size` bytes of the file `fd` (its size, checked by the caller), or nullopt.
std::optional<std::string> read_all(int fd, std::uint64_t size) {
  std::string content(size, '\0');
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, content.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    done += static_cast<std::size_t>(n);
  }
  return content;
}

// Closes a descriptor on every path.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string mac_of(std::string_view secret, std::string_view header, std::string_view body) {
  std::string message(header);
  message.append(body);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &size) == nullptr ||
      size != kMacSize)
    return {};
  return std::string(reinterpret_cast<const char*>(out), size);
}

}  // namespace

bool trusted_cache_directory(const std::string& directory, uid_t owner) {
  struct stat st{};
  if (::lstat(directory.c_str(), &st) != 0) return errno == ENOENT;
  std::string why;
  if (!S_ISDIR(st.st_mode))
    why = S_ISLNK(st.st_mode) ? "a symbolic link" : "not a directory";
  else if (st.st_uid != owner)
    why = fmt::format("owned by uid {}, expected uid {}", st.st_uid, owner);
  else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    why = fmt::format("writable by its group or others (mode {:o})", st.st_mode & 07777);
  if (why.empty()) return true;
  warn_once(fmt::format("{} is {}: the disk cache is off", directory, why));
  return false;
}

std::string KernelStore::path_of(std::uint64_t key) const {
  return fmt::format("{}/{:016x}.nkc", directory_, key);
}

std::optional<std::string> KernelStore::read_secret() const {
  const std::string path = directory_ + "/secret";
  const Fd file{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)};
  if (file.fd < 0) {
    if (errno != ENOENT) warn_once(fmt::format("{} cannot be opened: {}", path, std::strerror(errno)));
    return std::nullopt;
  }
  struct stat st{};
  std::string why = untrusted_file(file.fd, owner_, st);
  if (why.empty() && (st.st_mode & 077) != 0)
    why = fmt::format("readable by its group or others (mode {:o})", st.st_mode & 07777);
  if (why.empty() && static_cast<std::uint64_t>(st.st_size) != kSecretSize)
    why = fmt::format("{} bytes, expected {}", st.st_size, kSecretSize);
  if (!why.empty()) {
    warn_once(fmt::format("{} is {}: entries are not used", path, why));
    return std::nullopt;
  }
  return read_all(file.fd, kSecretSize);
}

// The secret, made now if the directory has none: written to a private
// temporary file and linked into place, so that of two processes making
// one at once, both use the one that won.
std::optional<std::string> KernelStore::secret_for_writing() const {
  if (auto secret = read_secret()) return secret;
  unsigned char bytes[kSecretSize];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return std::nullopt;
  static std::atomic<std::uint64_t> next{0};
  const std::string temp = fmt::format("{}/secret.{}.{}.tmp", directory_, ::getpid(), next.fetch_add(1));
  {
    const Fd file{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
    if (file.fd < 0) return std::nullopt;
    if (::write(file.fd, bytes, sizeof bytes) != static_cast<ssize_t>(sizeof bytes)) {
      ::unlink(temp.c_str());
      return std::nullopt;
    }
  }
  const std::string path = directory_ + "/secret";
  (void)::link(temp.c_str(), path.c_str());  // EEXIST: another process's won
  ::unlink(temp.c_str());
  return read_secret();
}

std::optional<std::string> KernelStore::read_entry(const std::string& path, bool touch,
                                                   std::uint64_t* identity_bytes, bool* absent) const {
  if (absent) *absent = false;
  const Fd file{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)};
  if (file.fd < 0) {
    if (errno == ENOENT) {
      if (absent) *absent = true;
      return std::nullopt;
    }
    warn_once(fmt::format("{} cannot be opened ({}): ignored", path, std::strerror(errno)));
    return std::nullopt;
  }
  struct stat st{};
  if (const std::string why = untrusted_file(file.fd, owner_, st); !why.empty()) {
    warn_once(fmt::format("{} is {}: ignored", path, why));
    return std::nullopt;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < kHeaderSize || size > kMaxEntryBytes) return std::nullopt;
  const std::optional<std::string> content = read_all(file.fd, size);
  if (!content || std::memcmp(content->data(), kMagic, 8) != 0 ||
      get<std::uint32_t>(*content, 8) != kFormat)
    return std::nullopt;
  const std::uint64_t identity_size = get<std::uint32_t>(*content, 12);
  const std::uint64_t payload_size = get<std::uint64_t>(*content, 16);
  if (identity_size > size || payload_size > size || kHeaderSize + identity_size + payload_size != size)
    return std::nullopt;
  const std::optional<std::string> secret = read_secret();
  if (!secret) return std::nullopt;
  const std::string_view all(*content);
  const std::string expected = mac_of(*secret, all.substr(0, kMacAt), all.substr(kHeaderSize));
  if (expected.size() != kMacSize || CRYPTO_memcmp(expected.data(), all.data() + kMacAt, kMacSize) != 0)
    return std::nullopt;
  if (touch) (void)::futimens(file.fd, nullptr);  // used now, for the LRU order
  if (identity_bytes) *identity_bytes = identity_size;
  return std::string(all.substr(kHeaderSize, identity_size + payload_size));
}

std::optional<std::string> KernelStore::load(std::uint64_t key, std::string_view identity) const {
  std::uint64_t identity_size = 0;
  bool absent = false;
  const std::optional<std::string> body = read_entry(path_of(key), true, &identity_size, &absent);
  if (!body) {
    if (absent)
      stats::count_disk_miss();
    else
      stats::count_disk_rejected();
    return std::nullopt;
  }
  // Another identity under the same key (a collision): not this kernel.
  const std::string_view found(*body);
  if (identity_size != identity.size() || found.substr(0, identity.size()) != identity) {
    stats::count_disk_rejected();
    return std::nullopt;
  }
  return std::string(found.substr(identity.size()));
}

bool KernelStore::save(std::uint64_t key, std::string_view identity, std::string_view payload) const {
  std::error_code error;
  if (std::filesystem::create_directories(directory_, error))
    std::filesystem::permissions(directory_, std::filesystem::perms::owner_all, error);
  if (error || !trusted_cache_directory(directory_, owner_)) return false;
  const std::optional<std::string> secret = secret_for_writing();
  if (!secret) return false;

  std::string content(kMagic, 8);
  put<std::uint32_t>(content, kFormat);
  put<std::uint32_t>(content, static_cast<std::uint32_t>(identity.size()));
  put<std::uint64_t>(content, payload.size());
  std::string body(identity);
  body.append(payload);
  const std::string mac = mac_of(*secret, content, body);
  if (mac.size() != kMacSize) return false;
  content += mac;
  content += body;

  static std::atomic<std::uint64_t> next{0};
  const std::string path = path_of(key);
  const std::string temp = fmt::format("{}.{}.{}.tmp", path, ::getpid(), next.fetch_add(1));
  {
    const Fd file{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
    if (file.fd < 0) return false;
    std::size_t done = 0;
    while (done < content.size()) {
      const ssize_t n = ::write(file.fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::unlink(temp.c_str());
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    return false;
  }
  evict();
  return true;
}

std::vector<KernelStore::Entry> KernelStore::list() const {
  std::vector<Entry> entries;
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(directory_, error)) {
    const std::string path = item.path().string();
    if (item.path().extension() != ".nkc") continue;
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0) continue;
    entries.push_back({path, static_cast<std::uint64_t>(st.st_size),
                       static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                       false});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.mtime_ns < b.mtime_ns; });
  for (Entry& e : entries) {
    bool absent = false;
    e.valid = read_entry(e.path, false, nullptr, &absent).has_value();
    if (absent) e.path.clear();  // removed since the scan (evicted by another process): not an entry
  }
  std::erase_if(entries, [](const Entry& e) { return e.path.empty(); });
  return entries;
}

// Removes the least recently used entries once the total passes the limit,
// down to 90% of it (so that not every store scans and removes again).
void KernelStore::evict() const {
  struct File {
    std::string path;
    std::uint64_t bytes;
    std::int64_t mtime_ns;
  };
  std::vector<File> files;
  std::uint64_t total = 0;
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(directory_, error)) {
    if (item.path().extension() != ".nkc") continue;
    struct stat st{};
    if (::lstat(item.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.push_back({item.path().string(), static_cast<std::uint64_t>(st.st_size),
                     static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
    total += static_cast<std::uint64_t>(st.st_size);
  }
  if (total <= max_bytes_) return;
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.mtime_ns < b.mtime_ns; });
  const std::uint64_t target = max_bytes_ / 10 * 9;
  for (const File& f : files) {
    if (total <= target) break;
    if (::unlink(f.path.c_str()) == 0) total -= f.bytes;
  }
}

std::size_t KernelStore::clear() const {
  std::size_t removed = 0;
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(directory_, error)) {
    const auto ext = item.path().extension();
    const bool ours = ext == ".nkc" || ext == ".tmp" || item.path().filename() == "secret";
    if (ours && ::unlink(item.path().c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace nimble::codegen
