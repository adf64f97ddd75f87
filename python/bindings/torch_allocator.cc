// python/bindings/torch_allocator.cc — the C functions torch.cuda.memory.CUDAPluggableAllocator loads (PyTorch's CUDA allocations from the pool XLA's "cuda_async" allocator draws from, pjrt/shared_pool.h), and that pool's usage for Python.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "bindings.h"
#include "pjrt/shared_pool.h"

// The functions PyTorch calls, by these names (torch's CUDAPluggableAllocator
// and its hooks). C linkage and visible outside the module, for ctypes.
#define CUXLA_TORCH_ALLOCATOR_API extern "C" __attribute__((visibility("default")))

// The allocator of the whole process: PyTorch does not check for null, so
// a failure throws (PyTorch raises it as a RuntimeError).
CUXLA_TORCH_ALLOCATOR_API void* cuxla_torch_malloc(size_t size, int device, void* stream) {
  if (size == 0) return nullptr;  // an empty tensor's data: nothing to allocate
  std::string failure;
  void* ptr = cuxla::pjrt::SharedPoolAllocate(device, size, reinterpret_cast<intptr_t>(stream), failure);
  if (ptr == nullptr) throw std::runtime_error(failure);
  return ptr;
}

// The allocator of a torch.cuda.MemPool: null when out of memory, where
// PyTorch frees what it caches, tries again, then raises OutOfMemoryError.
CUXLA_TORCH_ALLOCATOR_API void* cuxla_torch_malloc_for_mem_pool(size_t size, int device, void* stream) noexcept {
  if (size == 0) return nullptr;
  std::string failure;
  return cuxla::pjrt::SharedPoolAllocate(device, size, reinterpret_cast<intptr_t>(stream), failure);
}

CUXLA_TORCH_ALLOCATOR_API void cuxla_torch_free(void* ptr, size_t size, int device, void* stream) noexcept {
  cuxla::pjrt::SharedPoolFree(device, ptr, size, reinterpret_cast<intptr_t>(stream));
}

// PyTorch's record_stream.
CUXLA_TORCH_ALLOCATOR_API void cuxla_torch_record_stream(void* ptr, void* stream) noexcept {
  cuxla::pjrt::SharedPoolRecordStream(ptr, reinterpret_cast<intptr_t>(stream));
}

// PyTorch's empty_cache.
CUXLA_TORCH_ALLOCATOR_API void cuxla_torch_empty_cache() noexcept { cuxla::pjrt::TrimSharedPools(); }

namespace cuxla::bindings {

using namespace nb::literals;

void RegisterTorchAllocator(nb::module_& m) {
  m.def("memory_pool_usage", [](int device) {
    const pjrt::SharedPoolUsage u = pjrt::GetSharedPoolUsage(device);
    return Counts({{"reserved_bytes", u.reserved}, {"used_bytes", u.used}, {"reserved_peak_bytes", u.reserved_peak},
                   {"used_peak_bytes", u.used_peak}, {"torch_bytes", u.external},
                   {"torch_peak_bytes", u.external_peak}});
  }, "device"_a, "CUDA device `device`'s default memory pool: bytes it holds and hands out, their peaks, and PyTorch's share through cuxla's allocator (and its peak).");
  m.def("keep_freed_memory_in_pool", &pjrt::KeepFreedMemoryInSharedPool, "device"_a,
        "Freed memory stays in the device's default pool for either runtime until trimmed.");
  m.def("reset_memory_pool_peaks", &pjrt::ResetSharedPoolPeaks, "device"_a,
        "The default pool's peaks, and PyTorch's, start again from the current usage.");
}

}  // namespace cuxla::bindings
