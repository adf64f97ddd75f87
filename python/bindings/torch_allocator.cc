// python/bindings/torch_allocator.cc — PyTorch's CUDA allocations from the device's default memory pool, the one XLA's "cuda_async" allocator draws from: the C functions torch.cuda.memory.CUDAPluggableAllocator loads, and the pool's usage for Python.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "bindings.h"
#include "cuda/memory_pool.h"

namespace cuxla::bindings {
namespace {

using namespace nb::literals;

// Devices PyTorch can address through these functions (CUDA's own limit on
// devices per process is lower).
constexpr int kMaxDevices = 64;

// Bytes PyTorch holds from each device's pool through these functions, their
// peak, and whether it ever allocated there.
std::array<std::atomic<int64_t>, kMaxDevices> torch_bytes{};
std::array<std::atomic<int64_t>, kMaxDevices> torch_peak_bytes{};
std::array<std::atomic<bool>, kMaxDevices> used_devices{};

// The blocks PyTorch holds from these functions, each with the streams other
// than its allocation stream it was used on (PyTorch's record_stream, which
// also names tensors PyTorch only wraps, such as XLA's outputs: not ours to
// order). A block's free waits for its streams.
struct LiveBlocks {
  std::mutex mutex;
  std::unordered_map<void*, std::vector<intptr_t>> streams;
};

LiveBlocks& Live() {
  static auto* live = new LiveBlocks;  // never destroyed: PyTorch frees until the process ends
  return *live;
}

bool KnownDevice(int device) { return device >= 0 && device < kMaxDevices; }

std::string Gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

// Why PyTorch's allocation of `size` bytes on `device` failed (`why`: "out
// of memory", or the failed call), with both runtimes' usage of the pool
// they share.
std::string AllocationFailure(int device, size_t size, const std::string& why) {
  const std::string asked = Gib(size) + " on device " + std::to_string(device) +
                            " from the memory pool PyTorch shares with XLA";
  std::string message = why == "out of memory" ? "CUDA out of memory: PyTorch asked for " + asked
                                               : "PyTorch's CUDA allocation of " + asked + " failed: " + why;
  if (!KnownDevice(device)) return message;
  try {
    const cuda::PoolUsage usage = cuda::DefaultPoolUsage(device);
    const auto torch = static_cast<uint64_t>(torch_bytes[device].load());
    message += "; in use: PyTorch " + Gib(torch) + ", XLA " + Gib(usage.used > torch ? usage.used - torch : 0) +
               "; the pool holds " + Gib(usage.reserved);
  } catch (const std::exception&) {
    // The usage is extra: the failure is the message.
  }
  return message;
}

void* Allocate(size_t size, int device, void* stream, bool throw_when_out) {
  if (size == 0) return nullptr;  // an empty tensor's data: nothing to allocate
  std::string why = "no such device";
  void* ptr = KnownDevice(device) ? cuda::PoolAllocate(device, size, reinterpret_cast<intptr_t>(stream), why)
                                  : nullptr;
  if (ptr != nullptr) {
    try {
      LiveBlocks& live = Live();
      std::lock_guard<std::mutex> lock(live.mutex);
      live.streams.emplace(ptr, std::vector<intptr_t>());
    } catch (...) {  // no host memory to remember the block: give it back
      cuda::PoolFree(device, ptr, reinterpret_cast<intptr_t>(stream), {});
      if (throw_when_out) throw;
      return nullptr;
    }
    const int64_t held = torch_bytes[device] += static_cast<int64_t>(size);
    int64_t peak = torch_peak_bytes[device].load();
    while (held > peak && !torch_peak_bytes[device].compare_exchange_weak(peak, held)) {
    }
    used_devices[device] = true;
    return ptr;
  }
  if (throw_when_out) throw std::runtime_error(AllocationFailure(device, size, why));
  return nullptr;
}

}  // namespace
}  // namespace cuxla::bindings

// The functions PyTorch calls, by these names (torch's CUDAPluggableAllocator
// and its hooks). C linkage and visible outside the module, for ctypes.
#define CUXLA_TORCH_ALLOCATOR_API extern "C" __attribute__((visibility("default")))

// The allocator of the whole process: PyTorch does not check for null, so
// running out of memory throws (PyTorch raises it as a RuntimeError).
CUXLA_TORCH_ALLOCATOR_API void* cuxla_torch_malloc(size_t size, int device, void* stream) {
  return cuxla::bindings::Allocate(size, device, stream, /*throw_when_out=*/true);
}

// The allocator of a torch.cuda.MemPool: null when out of memory, where
// PyTorch frees what it caches, tries again, then raises OutOfMemoryError.
CUXLA_TORCH_ALLOCATOR_API void* cuxla_torch_malloc_for_mem_pool(size_t size, int device, void* stream) noexcept {
  return cuxla::bindings::Allocate(size, device, stream, /*throw_when_out=*/false);
}

// Gives a block back in the order of its allocation stream, after every
// other stream recorded for it.
CUXLA_TORCH_ALLOCATOR_API void cuxla_torch_free(void* ptr, size_t size, int device, void* stream) noexcept {
  using namespace cuxla::bindings;
  if (ptr == nullptr || !KnownDevice(device)) return;
  std::vector<intptr_t> also_used_on;
  {
    LiveBlocks& live = Live();
    std::lock_guard<std::mutex> lock(live.mutex);
    if (auto it = live.streams.find(ptr); it != live.streams.end()) {
      also_used_on = std::move(it->second);
      live.streams.erase(it);
    }
  }
  cuxla::cuda::PoolFree(device, ptr, reinterpret_cast<intptr_t>(stream), also_used_on);
  torch_bytes[device] -= static_cast<int64_t>(size);
}

// PyTorch's record_stream: the block is used on `stream` too (a pointer
// that is not one of ours is left to its owner).
CUXLA_TORCH_ALLOCATOR_API void cuxla_torch_record_stream(void* ptr, void* stream) noexcept {
  using namespace cuxla::bindings;
  try {
    LiveBlocks& live = Live();
    std::lock_guard<std::mutex> lock(live.mutex);
    if (auto it = live.streams.find(ptr); it != live.streams.end()) it->second.push_back(reinterpret_cast<intptr_t>(stream));
  } catch (...) {
    // Out of host memory: nothing better to do than to leave the free unordered.
  }
}

// PyTorch's empty_cache: every pool PyTorch allocated from gives what it
// holds unused (both runtimes' freed memory) back to its device.
CUXLA_TORCH_ALLOCATOR_API void cuxla_torch_empty_cache() noexcept {
  using namespace cuxla::bindings;
  for (int device = 0; device < kMaxDevices; ++device) {
    if (!used_devices[device].load()) continue;
    try {
      cuxla::cuda::TrimPool(device);
    } catch (...) {
      // Nothing to report to: the memory stays in the pool, usable.
    }
  }
}

namespace cuxla::bindings {

void RegisterTorchAllocator(nb::module_& m) {
  m.def("memory_pool_usage", [](int device) {
    const cuda::PoolUsage usage = cuda::DefaultPoolUsage(device);
    const int64_t torch = KnownDevice(device) ? torch_bytes[device].load() : 0;
    const int64_t torch_peak = KnownDevice(device) ? torch_peak_bytes[device].load() : 0;
    nb::dict d;
    d["reserved_bytes"] = usage.reserved;
    d["used_bytes"] = usage.used;
    d["reserved_peak_bytes"] = usage.reserved_peak;
    d["used_peak_bytes"] = usage.used_peak;
    d["torch_bytes"] = torch;
    d["torch_peak_bytes"] = torch_peak;
    return d;
  }, "device"_a, "CUDA device `device`'s default memory pool: bytes it holds and hands out, their peaks, and PyTorch's share through cuxla's allocator (and its peak).");
  m.def("keep_freed_memory_in_pool", &cuda::KeepFreedMemoryInPool, "device"_a,
        "Freed memory stays in the device's default pool for either runtime until trimmed.");
  m.def("trim_memory_pool", [](int device) {
    nb::gil_scoped_release release;
    cuda::TrimPool(device);
  }, "device"_a, "Waits for the device, then gives what its default pool holds unused back to the device.");
  m.def("reset_memory_pool_peaks", [](int device) {
    cuda::ResetPoolPeaks(device);
    if (KnownDevice(device)) torch_peak_bytes[device] = torch_bytes[device].load();
  }, "device"_a, "The default pool's peaks, and PyTorch's, start again from the current usage.");
}

}  // namespace cuxla::bindings
