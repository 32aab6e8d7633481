// The disk cache's trust rules (codegen/kernel_store.hpp): it loads nothing
// it did not write — not a forged entry (its MAC recomputed without the
// secret), not a file of another owner, writable by others or behind a
// symlink — and keeps to its size by evicting the least recently used.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "codegen/kernel_store.hpp"
#include "nimble/disk_cache.hpp"
#include "nimble/error.hpp"
#include "nimble/runtime/stats.hpp"
#include "support/cache_scope.hpp"

using namespace nimble;
using nimble::codegen::KernelStore;
using nimble::testing::TempDir;

namespace {
std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// The entry `bytes` with its payload replaced by `payload` and its MAC
// recomputed under `secret` — what a forger who can write the file does.
std::string forge(const std::string& bytes, std::size_t identity_size, const std::string& payload,
                  const std::string& secret) {
  constexpr std::size_t kMacAt = 24, kHeader = 56;
  std::string out = bytes.substr(0, kHeader + identity_size) + payload;
  const std::uint64_t size = payload.size();
  std::memcpy(out.data() + 16, &size, sizeof size);
  std::string message = out.substr(0, kMacAt) + out.substr(kHeader);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &mac_size);
  REQUIRE(mac_size == 32);
  std::memcpy(out.data() + kMacAt, mac, mac_size);
  return out;
}
}  // namespace

TEST_CASE("kernel store: an entry whose payload and MAC are both rewritten is rejected", "[jit]") {
  const TempDir dir;
  const KernelStore store(dir.str());
  REQUIRE(store.save(7, "identity", "the payload"));
  CHECK(store.load(7, "identity") == "the payload");
  const std::string path = store.path_of(7), original = read(path);

  reset_engine_stats();
  // Without the secret: any key the forger picks (here, zeros) fails.
  write(path, forge(original, 8, "evil bytes!", std::string(32, '\0')));
  CHECK_FALSE(store.load(7, "identity").has_value());
  CHECK(engine_stats().disk_rejected == 1);
  // The control: under the real secret, the same forgery would load, so it
  // is the MAC that stopped it.
  write(path, forge(original, 8, "evil bytes!", read(dir.str() + "/secret")));
  CHECK(store.load(7, "identity") == "evil bytes!");
  // Another identity under the key (a collision) is not this kernel.
  write(path, original);
  CHECK_FALSE(store.load(7, "identitx").has_value());
  CHECK_FALSE(store.load(7, "ident").has_value());
  CHECK(store.load(7, "identity") == "the payload");
}

TEST_CASE("kernel store: files of another owner, writable by others, or symlinks are ignored", "[jit]") {
  const TempDir dir;
  const KernelStore store(dir.str());
  REQUIRE(store.save(1, "id", "payload"));
  const std::string path = store.path_of(1);
  reset_engine_stats();

  SECTION("group-writable") {
    std::filesystem::permissions(path, std::filesystem::perms::group_write, std::filesystem::perm_options::add);
    CHECK_FALSE(store.load(1, "id").has_value());
    CHECK(engine_stats().disk_rejected == 1);
    std::filesystem::permissions(path, std::filesystem::perms::group_write, std::filesystem::perm_options::remove);
    CHECK(store.load(1, "id") == "payload");
  }
  SECTION("owned by another user (the expected owner injected)") {
    const KernelStore as_other(dir.str(), std::uint64_t{1} << 30, ::geteuid() + 1);
    CHECK_FALSE(as_other.load(1, "id").has_value());
    CHECK(engine_stats().disk_rejected == 1);
    CHECK_FALSE(codegen::trusted_cache_directory(dir.str(), ::geteuid() + 1));
    CHECK(codegen::trusted_cache_directory(dir.str()));
  }
  SECTION("a symlink to a valid entry") {
    const std::string elsewhere = dir.str() + "/elsewhere";
    std::filesystem::rename(path, elsewhere);
    std::filesystem::create_symlink(elsewhere, path);
    CHECK_FALSE(store.load(1, "id").has_value());
    CHECK(engine_stats().disk_rejected == 1);
  }
  SECTION("a secret others can read: no entry is used") {
    std::filesystem::permissions(dir.str() + "/secret", std::filesystem::perms::others_read,
                                 std::filesystem::perm_options::add);
    CHECK_FALSE(store.load(1, "id").has_value());
  }
  SECTION("a cache directory others can write, or a symlink to one, is not used") {
    const std::string link = dir.str() + "_link";
    std::filesystem::create_directory_symlink(dir.str(), link);
    CHECK_FALSE(codegen::trusted_cache_directory(link));
    std::filesystem::remove(link);
    std::filesystem::permissions(dir.str(), std::filesystem::perms::others_write, std::filesystem::perm_options::add);
    CHECK_FALSE(codegen::trusted_cache_directory(dir.str()));
    CHECK_FALSE(store.save(2, "id", "payload"));
  }
}

TEST_CASE("kernel store: past its size, the least recently used entries go", "[jit]") {
  const TempDir dir;
  const std::string payload(1000, 'x');
  // Three entries of 1,058 bytes fit 3,600; a fourth does not, and the
  // eviction (down to 90% of the limit) removes one.
  const KernelStore store(dir.str(), 3600);
  for (std::uint64_t key : {1, 2, 3}) REQUIRE(store.save(key, "id", payload));
  // Ages set apart (a file system's clock may be coarse): 1 oldest, then 2, 3.
  const auto age = [&](std::uint64_t key, int seconds_ago) {
    const auto t = std::chrono::system_clock::now() - std::chrono::seconds(seconds_ago);
    const timespec when{std::chrono::system_clock::to_time_t(t), 0};
    const timespec times[2] = {when, when};
    REQUIRE(::utimensat(AT_FDCWD, store.path_of(key).c_str(), times, 0) == 0);
  };
  age(1, 300);
  age(2, 200);
  age(3, 100);
  CHECK(store.load(1, "id") == payload);  // a use: 1 is now the newest
  REQUIRE(store.save(4, "id", payload));
  CHECK_FALSE(std::filesystem::exists(store.path_of(2)));
  for (std::uint64_t key : {1, 3, 4}) CHECK(store.load(key, "id") == payload);

  const auto entries = store.list();
  REQUIRE(entries.size() == 3);
  for (const auto& e : entries) CHECK(e.valid);
  CHECK(store.clear() == 4);  // three entries and the secret
  CHECK(store.list().empty());
}

TEST_CASE("disk cache API: list verifies without counting, prune removes the invalid, clear empties",
          "[jit]") {
  const TempDir dir;
  CHECK(list_disk_cache(dir.str() + "/not-made-yet").empty());
  const KernelStore store(dir.str());
  for (std::uint64_t key : {1, 2, 3}) REQUIRE(store.save(key, "id", "payload"));
  std::string bytes = read(store.path_of(2));
  bytes.back() ^= 1;  // the MAC no longer holds
  write(store.path_of(2), bytes);

  const EngineStats before = engine_stats();
  const auto entries = list_disk_cache(dir.str());
  REQUIRE(entries.size() == 3);
  for (const DiskCacheEntry& e : entries) CHECK(e.valid == (e.path != store.path_of(2)));
  const EngineStats after = engine_stats();
  CHECK(after.disk_rejected == before.disk_rejected);  // looking is not a use
  CHECK(after.disk_misses == before.disk_misses);

  CHECK(remove_invalid_disk_cache_entries(dir.str()) == 1);
  CHECK(list_disk_cache(dir.str()).size() == 2);
  CHECK(store.load(1, "id") == "payload");
  CHECK(clear_disk_cache(dir.str()) == 3);  // two entries and the secret
  CHECK(list_disk_cache(dir.str()).empty());

  SECTION("a directory the cache would not use is an error, not a listing") {
    REQUIRE(::chmod(dir.str().c_str(), 0777) == 0);
    CHECK_THROWS_AS(list_disk_cache(dir.str()), Error);
    CHECK_THROWS_AS(clear_disk_cache(dir.str()), Error);
    REQUIRE(::chmod(dir.str().c_str(), 0700) == 0);
  }
}
