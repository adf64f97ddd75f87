// cuda/driver_calls.h — for the cuda floor's own files: the driver's entry points as loaded, and a device's primary context made current around calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>

namespace cuxla::cuda {

// The driver API's types and constants used, as cuda.h declares them.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = uintptr_t;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUmemoryPool = struct CUmemPoolHandle_st*;
constexpr unsigned kEventDisableTiming = 0x2;  // CU_EVENT_DISABLE_TIMING
constexpr CUresult kOutOfMemory = 2;           // CUDA_ERROR_OUT_OF_MEMORY
constexpr CUresult kNotReady = 600;            // CUDA_ERROR_NOT_READY
enum PoolAttribute : int {                     // CUmemPool_attribute
  kPoolReleaseThreshold = 4,
  kPoolReservedCurrent = 5,
  kPoolReservedHigh = 6,
  kPoolUsedCurrent = 7,
  kPoolUsedHigh = 8,
};

// A driver entry point, called like the function, and the symbol it is
// loaded from (some are versioned: cuCtxPushCurrent is cuCtxPushCurrent_v2).
template <class... Args>
struct Entry {
  const char* symbol;
  CUresult (*fn)(Args...) = nullptr;
  CUresult operator()(Args... args) const { return fn(args...); }
};

struct Entries {
  Entry<unsigned> cuInit{"cuInit"};
  Entry<int*> cuDriverGetVersion{"cuDriverGetVersion"};
  Entry<int*> cuDeviceGetCount{"cuDeviceGetCount"};
  Entry<CUdevice*, int> cuDeviceGet{"cuDeviceGet"};
  Entry<CUcontext*, CUdevice> cuDevicePrimaryCtxRetain{"cuDevicePrimaryCtxRetain"};
  Entry<CUcontext> cuCtxPushCurrent{"cuCtxPushCurrent_v2"};
  Entry<CUcontext*> cuCtxPopCurrent{"cuCtxPopCurrent_v2"};
  Entry<CUcontext*> cuCtxGetCurrent{"cuCtxGetCurrent"};
  Entry<> cuCtxSynchronize{"cuCtxSynchronize"};
  Entry<CUevent*, unsigned> cuEventCreate{"cuEventCreate"};
  Entry<CUevent, CUstream> cuEventRecord{"cuEventRecord"};
  Entry<CUstream, CUevent, unsigned> cuStreamWaitEvent{"cuStreamWaitEvent"};
  Entry<CUstream> cuStreamQuery{"cuStreamQuery"};
  Entry<CUevent> cuEventSynchronize{"cuEventSynchronize"};
  Entry<CUmemoryPool*, CUdevice> cuDeviceGetDefaultMemPool{"cuDeviceGetDefaultMemPool"};
  Entry<CUdeviceptr*, size_t, CUmemoryPool, CUstream> cuMemAllocFromPoolAsync{"cuMemAllocFromPoolAsync"};
  Entry<CUdeviceptr, CUstream> cuMemFreeAsync{"cuMemFreeAsync"};
  Entry<CUmemoryPool, int, void*> cuMemPoolGetAttribute{"cuMemPoolGetAttribute"};
  Entry<CUmemoryPool, int, void*> cuMemPoolSetAttribute{"cuMemPoolSetAttribute"};
  Entry<CUmemoryPool, size_t> cuMemPoolTrimTo{"cuMemPoolTrimTo"};

  // Those the driver must have (of `entries`, an Entries, const or not).
  template <class Self>
  static auto Required(Self& e) {
    return std::tie(e.cuInit, e.cuDriverGetVersion, e.cuDeviceGetCount, e.cuDeviceGet, e.cuDevicePrimaryCtxRetain,
                    e.cuCtxPushCurrent, e.cuCtxPopCurrent, e.cuCtxGetCurrent, e.cuCtxSynchronize, e.cuEventCreate,
                    e.cuEventRecord, e.cuStreamWaitEvent, e.cuStreamQuery, e.cuEventSynchronize);
  }
  // The stream-ordered memory pools' (CUDA 11.2): null in an older driver,
  // whose other uses go on.
  template <class Self>
  static auto Pools(Self& e) {
    return std::tie(e.cuDeviceGetDefaultMemPool, e.cuMemAllocFromPoolAsync, e.cuMemFreeAsync,
                    e.cuMemPoolGetAttribute, e.cuMemPoolSetAttribute, e.cuMemPoolTrimTo);
  }
  bool HasPools() const {
    return std::apply([](const auto&... entry) { return ((entry.fn != nullptr) && ...); }, Pools(*this));
  }
};

// The loaded driver's entry points; throws a RuntimeError-kind cuxla::Error
// saying why when the driver is unavailable.
const Entries& LoadedEntries();

// Throws a RuntimeError-kind cuxla::Error naming the failed driver call.
[[noreturn]] void Fail(const char* call, CUresult rc);

// Device `ordinal`'s primary context (retained for the process) current on
// the calling thread while this lives: pushed only where another context, or
// none, was current (PyTorch's threads usually have it already). Throws a
// ValueError-kind cuxla::Error for a device that does not exist.
class DeviceContext {
 public:
  explicit DeviceContext(int ordinal);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const Entries& cu;
  CUdevice device = 0;  // the driver's handle of the device

 private:
  bool pushed_ = false;
};

}  // namespace cuxla::cuda
