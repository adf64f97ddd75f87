#include "cuda/driver.h"

#include <dlfcn.h>

#include <string>

namespace cuxla::cuda {
namespace {

// CUresult and the three entry points used, as the driver API declares them.
using CUresult = int;
using cuInitFn = CUresult (*)(unsigned int);
using cuDriverGetVersionFn = CUresult (*)(int*);
using cuDeviceGetCountFn = CUresult (*)(int*);

DriverStatus Probe() noexcept {
  DriverStatus status;
  // The handle is never closed: the driver stays loaded for the process.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    status.why_not = std::string("libcuda.so.1 not loadable: ") + (err ? err : "unknown error");
    return status;
  }
  auto init = reinterpret_cast<cuInitFn>(dlsym(lib, "cuInit"));
  auto get_version = reinterpret_cast<cuDriverGetVersionFn>(dlsym(lib, "cuDriverGetVersion"));
  auto get_count = reinterpret_cast<cuDeviceGetCountFn>(dlsym(lib, "cuDeviceGetCount"));
  if (init == nullptr || get_version == nullptr || get_count == nullptr) {
    status.why_not = "libcuda.so.1 lacks cuInit/cuDriverGetVersion/cuDeviceGetCount";
    return status;
  }
  if (CUresult rc = init(0); rc != 0) {
    status.why_not = "cuInit failed with CUresult " + std::to_string(rc);
    return status;
  }
  get_version(&status.version);
  if (CUresult rc = get_count(&status.device_count); rc != 0) {
    status.why_not = "cuDeviceGetCount failed with CUresult " + std::to_string(rc);
    return status;
  }
  if (status.device_count == 0) {
    status.why_not = "the CUDA driver sees no device";
    return status;
  }
  status.available = true;
  return status;
}

}  // namespace

const DriverStatus& Driver() noexcept {
  static const DriverStatus status = Probe();
  return status;
}

}  // namespace cuxla::cuda
