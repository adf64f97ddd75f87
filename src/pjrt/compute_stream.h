// pjrt/compute_stream.h — the CUDA stream a PJRT client runs a device's
// programs on. PJRT's C API does not tell it; an XLA FFI handler, run once
// per client and device in a one-op program, reads it (XLA_FFI_Stream_Get).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "xla/ffi/api/c_api.h"

namespace cuxla {

struct ClientState;
struct Device;

// A device's compute stream, or why it is not known (then `stream` is 0).
struct ComputeStream {
  intptr_t stream = 0;
  std::string why_not;
};

// The FFI handler of the probe program: answers XLA's metadata query, and
// when run, stores the stream it runs on where ProbeComputeStream reads it.
// A C callback: it throws nothing, failures are its XLA_FFI_Error. Exposed
// for its unit test.
XLA_FFI_Error* RecordComputeStream(XLA_FFI_CallFrame* frame) noexcept;

// The compute stream of `device` (a CUDA device of `state`), found by
// registering RecordComputeStream with the plugin's FFI extension (once per
// plugin) and running the probe program. Never throws: failures are told in
// `why_not`, as is CUXLA_COMPUTE_STREAM=0, which turns the probe off.
ComputeStream ProbeComputeStream(const ClientState& state, const Device& device);

// Each device's ComputeStream, probed on first request and kept.
class ComputeStreamCache {
 public:
  const ComputeStream& Get(const ClientState& state, const Device& device) const;

 private:
  mutable std::mutex mutex_;
  mutable std::deque<std::pair<const Device*, ComputeStream>> known_;  // references stay valid
};

}  // namespace cuxla
