// pjrt/disk_cache.h — compiled executables kept on disk between processes, keyed by everything that shapes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cuxla::pjrt {

// Counts since the process started (all clients together).
struct DiskCacheStats {
  uint64_t hits = 0;     // entries loaded and deserialized
  uint64_t misses = 0;   // no usable entry: compiled
  uint64_t stores = 0;   // entries written
  uint64_t errors = 0;   // entries unusable (corrupt, foreign, refused) or not written
  uint64_t evictions = 0;
};
DiskCacheStats GetDiskCacheStats() noexcept;
void CountDiskCacheMiss() noexcept;
void CountDiskCacheHit() noexcept;
void CountDiskCacheError() noexcept;

// The folder entries live in: $CUXLA_CACHE_DIR when set (set but empty: no
// cache), else $XDG_CACHE_HOME/cuxla, else ~/.cache/cuxla; nullopt when off
// or no home is known. Read at each call, so tests can move it.
std::optional<std::string> DiskCacheDir();

// At most $CUXLA_CACHE_MAX_BYTES (default 2 GiB) of entries; oldest out
// first. Throws a ValueError-kind Error naming a value that is not a
// number of bytes.
uint64_t DiskCacheMaxBytes();

// The entry for `key` (any bytes: program, options, plugin, devices) in
// `dir`, or nullopt when there is none or it is unusable (truncated, bytes
// changed, written for another key). Never throws.
std::optional<std::string> LoadEntry(const std::string& dir, std::string_view key);

// Writes `payload` as `key`'s entry through a temporary file renamed into
// place, so readers and other writers never see half an entry, then trims the
// folder to `max_bytes`. Failures are counted, never thrown.
void StoreEntry(const std::string& dir, std::string_view key, std::string_view payload, uint64_t max_bytes);

}  // namespace cuxla::pjrt
