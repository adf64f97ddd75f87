// cuda/driver.h — the CUDA driver, loaded at run time (libcuda.so.1), so that
// cuxla links against no CUDA library and runs where there is no GPU.
#pragma once

#include <string>

namespace cuxla::cuda {

// The result of looking for the driver: either available with its version and
// device count, or not, with the reason.
struct DriverStatus {
  bool available = false;
  int version = 0;       // e.g. 13000 for CUDA 13.0
  int device_count = 0;  // visible devices, after CUDA_VISIBLE_DEVICES
  std::string why_not;   // set when !available
};

// Loads and initialises the driver once per process; later calls return the
// cached status. Never throws.
const DriverStatus& Driver() noexcept;

}  // namespace cuxla::cuda
