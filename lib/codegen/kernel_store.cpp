#include "codegen/kernel_store.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fmt/format.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "nimble/runtime/kernel.hpp"
#include "runtime/stats_counters.hpp"

namespace nimble::codegen {

namespace {

constexpr char kMagic[8] = {'N', 'I', 'M', 'B', 'L', 'E', 'K', 'C'};
constexpr std::uint32_t kFormat = 1;
constexpr std::size_t kHeaderSize = 8 + 4 + 4 + 8 + 8;

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

bool trusted_cache_directory(const std::string& directory) {
  struct stat st{};
  if (::stat(directory.c_str(), &st) != 0) return errno == ENOENT;
  return S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

std::string KernelStore::path_of(std::uint64_t key) const {
  return fmt::format("{}/{:016x}.nkc", directory_, key);
}

std::optional<std::string> KernelStore::load(std::uint64_t key, std::string_view identity) const {
  std::ifstream file(path_of(key), std::ios::binary);
  if (!file) {
    stats::count_disk_miss();
    return std::nullopt;
  }
  const std::string content((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto reject = [] {
    stats::count_disk_rejected();
    return std::nullopt;
  };
  if (content.size() < kHeaderSize || std::memcmp(content.data(), kMagic, 8) != 0 ||
      get<std::uint32_t>(content, 8) != kFormat)
    return reject();
  const std::uint64_t identity_size = get<std::uint32_t>(content, 12);
  const std::uint64_t payload_size = get<std::uint64_t>(content, 16);
  const std::uint64_t checksum = get<std::uint64_t>(content, 24);
  if (identity_size > content.size() || payload_size > content.size() ||
      kHeaderSize + identity_size + payload_size != content.size())
    return reject();
  const std::string_view body = std::string_view(content).substr(kHeaderSize);
  if (runtime::fnv1a(body) != checksum || body.substr(0, identity_size) != identity) return reject();
  return std::string(body.substr(identity_size));
}

bool KernelStore::save(std::uint64_t key, std::string_view identity, std::string_view payload) const {
  std::string content(kMagic, 8);
  put<std::uint32_t>(content, kFormat);
  put<std::uint32_t>(content, static_cast<std::uint32_t>(identity.size()));
  put<std::uint64_t>(content, payload.size());
  std::string body(identity);
  body.append(payload);
  put<std::uint64_t>(content, runtime::fnv1a(body));
  content.append(body);

  static std::atomic<std::uint64_t> next{0};
  std::error_code error;
  if (std::filesystem::create_directories(directory_, error))
    std::filesystem::permissions(directory_, std::filesystem::perms::owner_all, error);
  if (error) return false;
  const std::string path = path_of(key);
  const std::string temp = fmt::format("{}.{}.{}.tmp", path, ::getpid(), next.fetch_add(1));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out.flush()) {
      out.close();
      std::filesystem::remove(temp, error);
      return false;
    }
  }
  std::filesystem::rename(temp, path, error);
  if (!error) return true;
  std::filesystem::remove(temp, error);
  return false;
}

}  // namespace nimble::codegen
