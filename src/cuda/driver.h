// cuda/driver.h — the CUDA driver, loaded at run time (libcuda.so.1), so that
// cuxla links against no CUDA library and runs where there is no GPU.
#pragma once

#include <cstdint>
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

// Makes `waiter` wait, on the device, for the work queued so far on
// `producer` (both streams of device `ordinal`; 1 and 2 name the legacy and
// per-thread default streams). No host synchronisation. Throws a
// RuntimeError-kind cuxla::Error naming the failed driver call.
void StreamWaitStream(int ordinal, intptr_t waiter, intptr_t producer);

// True when every piece of work queued on `stream` (of device `ordinal`) has
// finished: a consumer then has nothing to wait for. Never blocks.
bool StreamIdle(int ordinal, intptr_t stream);

// A point in a CUDA stream's queue, for others to wait for the work queued
// on the stream before it. Its event comes from, and goes back to, a pool of
// device `ordinal`'s events.
class StreamMarker {
 public:
  // Records the marker on `stream` and makes `waiter` (of the same device)
  // wait for it, in one visit to the driver; throws a RuntimeError-kind
  // cuxla::Error naming the failed driver call.
  StreamMarker(int ordinal, intptr_t stream, intptr_t waiter);
  ~StreamMarker();
  StreamMarker(const StreamMarker&) = delete;
  StreamMarker& operator=(const StreamMarker&) = delete;

  // Makes `stream` (of the same device) wait for the marker, on the device.
  void MakeWait(intptr_t stream) const;
  // Blocks the calling thread until the marker is done.
  void Wait() const;

 private:
  int ordinal_;
  void* event_;  // a CUevent
};

}  // namespace cuxla::cuda
