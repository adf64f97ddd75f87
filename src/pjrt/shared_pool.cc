#include "pjrt/shared_pool.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/memory_pool.h"

namespace cuxla::pjrt {
namespace {

// Devices the other runtime can allocate on (CUDA's own limit per process is lower).
constexpr int kMaxDevices = 64;

bool KnownDevice(int ordinal) { return ordinal >= 0 && ordinal < kMaxDevices; }

// The other runtime's bytes on each device, their peak, and whether the
// device's pool is shared (the other runtime allocated there, or the pool
// was set to keep freed memory): those TrimSharedPools trims.
std::array<std::atomic<int64_t>, kMaxDevices> external_bytes{};
std::array<std::atomic<int64_t>, kMaxDevices> external_peak_bytes{};
std::array<std::atomic<bool>, kMaxDevices> shared_devices{};

// The blocks the other runtime holds, each with the streams other than its
// allocation stream it was used on.
struct LiveBlocks {
  std::mutex mutex;
  std::unordered_map<void*, std::vector<intptr_t>> streams;
};

LiveBlocks& Live() {
  static auto* live = new LiveBlocks;  // never destroyed: blocks are freed until the process ends
  return *live;
}

std::string Gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

// Why an allocation of `size` bytes on `ordinal` failed (`why`: "out of
// memory", or the failed call), with both runtimes' usage of the pool.
std::string AllocationFailure(int ordinal, size_t size, const std::string& why) {
  const std::string asked = Gib(size) + " on device " + std::to_string(ordinal) +
                            " from the memory pool PyTorch shares with XLA";
  std::string message = why == "out of memory" ? "CUDA out of memory: PyTorch asked for " + asked
                                               : "PyTorch's CUDA allocation of " + asked + " failed: " + why;
  try {
    const SharedPoolUsage usage = GetSharedPoolUsage(ordinal);
    const uint64_t xla = usage.used > usage.external ? usage.used - usage.external : 0;
    message += "; in use: PyTorch " + Gib(usage.external) + ", XLA " + Gib(xla) +
               "; the pool holds " + Gib(usage.reserved);
  } catch (const std::exception&) {
    // The usage is extra: the failure is the message.
  }
  return message;
}

}  // namespace

void* SharedPoolAllocate(int ordinal, size_t size, intptr_t stream, std::string& failure) noexcept {
  try {
    std::string why = "no such device";
    void* ptr = KnownDevice(ordinal) ? cuda::PoolAllocate(ordinal, size, stream, why) : nullptr;
    if (ptr == nullptr) {
      failure = AllocationFailure(ordinal, size, why);
      return nullptr;
    }
    try {
      LiveBlocks& live = Live();
      std::lock_guard<std::mutex> lock(live.mutex);
      live.streams.emplace(ptr, std::vector<intptr_t>());
    } catch (...) {  // no host memory to remember the block: give it back
      cuda::PoolFree(ordinal, ptr, stream, {});
      throw;
    }
    const int64_t held = external_bytes[ordinal] += static_cast<int64_t>(size);
    int64_t peak = external_peak_bytes[ordinal].load();
    while (held > peak && !external_peak_bytes[ordinal].compare_exchange_weak(peak, held)) {
    }
    shared_devices[ordinal] = true;
    return ptr;
  } catch (const std::exception& e) {
    failure = e.what();
    return nullptr;
  }
}

void SharedPoolFree(int ordinal, void* ptr, size_t size, intptr_t stream) noexcept {
  if (ptr == nullptr || !KnownDevice(ordinal)) return;
  std::vector<intptr_t> also_used_on;
  {
    LiveBlocks& live = Live();
    std::lock_guard<std::mutex> lock(live.mutex);
    if (auto it = live.streams.find(ptr); it != live.streams.end()) {
      also_used_on = std::move(it->second);
      live.streams.erase(it);
    }
  }
  cuda::PoolFree(ordinal, ptr, stream, also_used_on);
  external_bytes[ordinal] -= static_cast<int64_t>(size);
}

void SharedPoolRecordStream(void* ptr, intptr_t stream) noexcept {
  try {
    LiveBlocks& live = Live();
    std::lock_guard<std::mutex> lock(live.mutex);
    auto it = live.streams.find(ptr);
    // Each stream once: a free waits for each one recorded.
    if (it != live.streams.end() && std::find(it->second.begin(), it->second.end(), stream) == it->second.end())
      it->second.push_back(stream);
  } catch (...) {
    // Out of host memory: nothing better to do than to leave the free unordered.
  }
}

void TrimSharedPools() noexcept {
  for (int ordinal = 0; ordinal < kMaxDevices; ++ordinal) {
    if (!shared_devices[ordinal].load()) continue;
    try {
      cuda::TrimPool(ordinal);
    } catch (...) {
      // Nothing to report to: the memory stays in the pool, usable.
    }
  }
}

SharedPoolUsage GetSharedPoolUsage(int ordinal) {
  const cuda::PoolUsage pool = cuda::DefaultPoolUsage(ordinal);
  SharedPoolUsage usage{pool.reserved, pool.used, pool.reserved_peak, pool.used_peak, 0, 0};
  if (KnownDevice(ordinal)) {
    usage.external = static_cast<uint64_t>(external_bytes[ordinal].load());
    usage.external_peak = static_cast<uint64_t>(external_peak_bytes[ordinal].load());
  }
  return usage;
}

void ResetSharedPoolPeaks(int ordinal) {
  cuda::ResetPoolPeaks(ordinal);
  if (KnownDevice(ordinal)) external_peak_bytes[ordinal] = external_bytes[ordinal].load();
}

void KeepFreedMemoryInSharedPool(int ordinal) {
  cuda::KeepFreedMemoryInPool(ordinal);
  if (KnownDevice(ordinal)) shared_devices[ordinal] = true;
}

}  // namespace cuxla::pjrt
