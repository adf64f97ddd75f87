// python/bindings/compile_cache.cc — the on-disk compile cache for Python: its counts, and the package's own entries.
#include <cstdint>
#include <optional>
#include <string_view>

#include "bindings.h"
#include "pjrt/disk_cache.h"

namespace cuxla::bindings {

using namespace nb::literals;

void RegisterCompileCache(nb::module_& m) {
  m.def("compile_cache_stats", [] {
    const pjrt::DiskCacheStats s = pjrt::GetDiskCacheStats();
    nb::dict d = Counts({{"hits", s.hits}, {"misses", s.misses}, {"stores", s.stores}, {"errors", s.errors},
                         {"evictions", s.evictions}});
    d["dir"] = pjrt::DiskCacheDir();
    return d;
  }, "The on-disk compile cache's counts in this process (all clients), and its folder (None when off).");

  // Entries of the package's own under the same folder, bound and writing
  // rules (torch.compile's lowered programs); `key` says what the entry is of.
  m.def("compile_cache_load", [](nb::bytes key) -> std::optional<nb::bytes> {
    const auto dir = pjrt::DiskCacheDir();
    if (!dir) return std::nullopt;
    auto entry = pjrt::LoadEntry(*dir, std::string_view(key.c_str(), key.size()));
    if (!entry) return std::nullopt;
    return nb::bytes(entry->data(), entry->size());
  }, "key"_a, "The cache's entry for `key`, or None (no entry, an unusable one, or the cache off).");
  m.def("compile_cache_store", [](nb::bytes key, nb::bytes payload) {
    const auto dir = pjrt::DiskCacheDir();
    if (!dir) return;
    uint64_t max_bytes = 0;
    try {
      max_bytes = pjrt::DiskCacheMaxBytes();
    } catch (const Error&) {  // a malformed bound: the compile that follows says so
      pjrt::CountDiskCacheError();
      return;
    }
    pjrt::StoreEntry(*dir, std::string_view(key.c_str(), key.size()),
                     std::string_view(payload.c_str(), payload.size()), max_bytes);
  }, "key"_a, "payload"_a, "Writes `payload` as `key`'s entry (nothing when the cache is off; failures are counted).");
}

}  // namespace cuxla::bindings
