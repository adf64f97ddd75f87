// python/bindings/calls_in_flight.h — the arguments of CUDA calls on PyTorch
// tensors, held until their execution has run on the device.
//
// A view released while XLA still runs on it costs PJRT a deferred release
// (its own event bookkeeping, then the on-delete callback on an event
// thread), and the producer's deleter a trip through the deleter queue
// (producer_deleters.h): a few µs per call, the largest part of what
// `cuxla.torch.call` adds to the bare execute. Released once the execution
// is over, a view goes at once, and its deleter runs on the releasing
// thread. So `call_with` keeps each call's arguments, with a marker on the
// consumer's stream queued after its wait for the outputs, and every later
// call or import releases those whose marker has passed — and the oldest
// regardless, beyond kMaxCallsInFlight.
#pragma once

#include <cstdint>

#include "bindings.h"

namespace cuxla::bindings {

// Calls kept at most; the oldest is released beyond it, done or not.
inline constexpr size_t kMaxCallsInFlight = 32;

// Keeps `call`'s arguments until the work queued so far on CUDA `stream` of
// device `ordinal` has run; that stream already waits for the call's outputs.
// If no marker can be recorded there, they are released at once.
void KeepUntilDone(Executable::Call call, int ordinal, intptr_t stream);

// Releases the kept arguments whose calls are done. The GIL must be held (the
// producers' deleters then run here).
void ReleaseDoneCalls();

}  // namespace cuxla::bindings
