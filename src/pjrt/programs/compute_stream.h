// pjrt/programs/compute_stream.h — the CUDA stream a PJRT client runs a
// device's programs on. PJRT's C API does not tell it; an XLA FFI handler, run
// once per client and device in a one-op program, reads it (XLA_FFI_Stream_Get).
#pragma once

#include "pjrt/client_state.h"
#include "xla/ffi/api/c_api.h"

namespace cuxla::pjrt {

// The FFI handler of the probe program: answers XLA's metadata query, and
// when run, stores the stream it runs on where ProbeComputeStream reads it.
// Exposed for its unit test.
XLA_FFI_Error* RecordComputeStream(XLA_FFI_CallFrame* frame) noexcept;

// The compute stream of `device` (a CUDA device of `state`), found by
// registering RecordComputeStream with the plugin's FFI extension (once per
// plugin) and running the probe program. Never throws: failures are told in
// `why_not`, as is CUXLA_COMPUTE_STREAM=0, which turns the probe off.
ComputeStream ProbeComputeStream(const ClientState& state, const Device& device);

}  // namespace cuxla::pjrt
