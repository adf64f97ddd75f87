// pjrt/disk_cache.cc — the on-disk entry format, atomic writes and the size bound.
#include "pjrt/disk_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "pjrt/environment.h"

namespace cuxla::pjrt {
namespace {

namespace fs = std::filesystem;

std::atomic<uint64_t> g_hits{0}, g_misses{0}, g_stores{0}, g_errors{0}, g_evictions{0};

// 64-bit FNV-1a with a seed: two seeds give the 128-bit file name, a third
// checks the payload. Not cryptographic: the cache guards against accidents
// (torn writes, flipped bits, stale files), and each entry repeats its full
// key digest, so a name collision alone never loads a foreign program.
uint64_t Fnv(std::string_view bytes, uint64_t seed) noexcept {
  uint64_t h = 0xcbf29ce484222325ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string Hex(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = kDigits[v & 15];
  return s;
}

// Entry layout: magic, the key's three digests and length, the payload's
// length and digest, then the payload.
constexpr char kMagic[8] = {'C', 'U', 'X', 'L', 'A', 'X', 'E', '1'};
struct Header {
  char magic[8];
  uint64_t key_digest[3];
  uint64_t key_size;
  uint64_t payload_size;
  uint64_t payload_digest;
};

Header MakeHeader(std::string_view key, std::string_view payload) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  for (uint64_t i = 0; i < 3; ++i) h.key_digest[i] = Fnv(key, i + 1);
  h.key_size = key.size();
  h.payload_size = payload.size();
  h.payload_digest = Fnv(payload, 7);
  return h;
}

constexpr std::string_view kSuffix = ".cuxla-exe";

fs::path EntryPath(const std::string& dir, std::string_view key) {
  return fs::path(dir) / (Hex(Fnv(key, 1)) + Hex(Fnv(key, 2)) + std::string(kSuffix));
}

// Removes the oldest entries (by modification time, which a hit refreshes)
// until the folder holds at most `max_bytes` of them, never `keep` (the entry
// just written: file times are coarse, and a tie must not drop it). Another
// process may remove the same files meanwhile: every step tolerates that.
void Trim(const std::string& dir, uint64_t max_bytes, const fs::path& keep) {
  struct Entry {
    fs::path path;
    uint64_t size;
    fs::file_time_type time;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.filename().string().starts_with(".tmp-")) {
      // A writer that died mid-write leaves its temporary; a live one renames it within moments.
      std::error_code e;
      const auto age = fs::file_time_type::clock::now() - fs::last_write_time(p, e);
      if (!e && age > std::chrono::hours(1)) fs::remove(p, e);
      continue;
    }
    if (p.extension() != kSuffix) continue;
    std::error_code e1, e2;
    const uint64_t size = fs::file_size(p, e1);
    const auto time = fs::last_write_time(p, e2);
    if (e1 || e2) continue;
    entries.push_back({p, size, time});
    total += size;
  }
  if (total <= max_bytes) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.time < b.time; });
  for (const Entry& e : entries) {
    if (total <= max_bytes) break;
    if (e.path == keep) continue;
    std::error_code rm;
    if (fs::remove(e.path, rm)) g_evictions.fetch_add(1, std::memory_order_relaxed);
    total -= e.size;
  }
}

}  // namespace

DiskCacheStats GetDiskCacheStats() noexcept {
  return {g_hits.load(), g_misses.load(), g_stores.load(), g_errors.load(), g_evictions.load()};
}
void CountDiskCacheMiss() noexcept { g_misses.fetch_add(1, std::memory_order_relaxed); }
void CountDiskCacheHit() noexcept { g_hits.fetch_add(1, std::memory_order_relaxed); }
void CountDiskCacheError() noexcept { g_errors.fetch_add(1, std::memory_order_relaxed); }

std::optional<std::string> DiskCacheDir() {
  if (const char* dir = std::getenv("CUXLA_CACHE_DIR")) {
    if (*dir == '\0') return std::nullopt;
    return std::string(dir);
  }
  if (const char* xdg = EnvValue("XDG_CACHE_HOME"))
    return (fs::path(xdg) / "cuxla").string();
  if (const char* home = EnvValue("HOME"))
    return (fs::path(home) / ".cache" / "cuxla").string();
  return std::nullopt;
}

uint64_t DiskCacheMaxBytes() {
  constexpr const char* kVariable = "CUXLA_CACHE_MAX_BYTES";
  const std::optional<int64_t> bytes = EnvInteger(kVariable);
  if (!bytes) return uint64_t{2} << 30;
  if (*bytes < 0) BadVariable(kVariable, std::to_string(*bytes), "is not a number of bytes");
  return static_cast<uint64_t>(*bytes);
}

std::optional<std::string> LoadEntry(const std::string& dir, std::string_view key) {
  try {
    const fs::path path = EntryPath(dir, key);
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    Header h{};
    const Header want = MakeHeader(key, {});
    if (!in.read(reinterpret_cast<char*>(&h), sizeof h) || std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 ||
        std::memcmp(h.key_digest, want.key_digest, sizeof h.key_digest) != 0 || h.key_size != want.key_size) {
      CountDiskCacheError();
      return std::nullopt;
    }
    // Sizes are judged on the open file, not the path: another process may
    // rename a fresh entry over it meanwhile.
    in.seekg(0, std::ios::end);
    const auto file_size = static_cast<uint64_t>(in.tellg());
    in.seekg(sizeof h, std::ios::beg);
    if (!in || file_size != sizeof h + h.payload_size) {
      CountDiskCacheError();
      return std::nullopt;
    }
    std::string payload(h.payload_size, '\0');
    if (!in.read(payload.data(), static_cast<std::streamsize>(payload.size())) ||
        Fnv(payload, 7) != h.payload_digest) {
      CountDiskCacheError();
      return std::nullopt;
    }
    // A hit makes the entry young again: the size bound drops the least recently used.
    std::error_code ec;
    fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
    return payload;
  } catch (...) {  // bad_alloc on an absurd size, filesystem errors: the entry is just not there
    CountDiskCacheError();
    return std::nullopt;
  }
}

void StoreEntry(const std::string& dir, std::string_view key, std::string_view payload, uint64_t max_bytes) {
  try {
    if (sizeof(Header) + payload.size() > max_bytes) return;  // would evict itself
    std::error_code ec;
    fs::create_directories(dir, ec);
    const fs::path path = EntryPath(dir, key);
    // Unique per process and call, in the same folder so that the rename is atomic.
    static std::atomic<uint64_t> serial{0};
    const fs::path tmp = fs::path(dir) / (".tmp-" + std::to_string(::getpid()) + "-" +
                                          std::to_string(serial.fetch_add(1)) + "-" +
                                          path.filename().string());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      const Header h = MakeHeader(key, payload);
      out.write(reinterpret_cast<const char*>(&h), sizeof h);
      out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
      out.close();
      if (!out) {
        fs::remove(tmp, ec);
        CountDiskCacheError();
        return;
      }
    }
    fs::rename(tmp, path, ec);
    if (ec) {
      fs::remove(tmp, ec);
      CountDiskCacheError();
      return;
    }
    g_stores.fetch_add(1, std::memory_order_relaxed);
    Trim(dir, max_bytes, path);
  } catch (...) {
    CountDiskCacheError();
  }
}

}  // namespace cuxla::pjrt
