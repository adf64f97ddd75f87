// python/bindings/producer_deleters.h — runs Python producers' DLPack
// deleters on a thread that holds the GIL, never on PJRT's own threads.
//
// XLA hands an imported tensor back (PJRT's on-delete callback) on whatever
// thread sees its last use end: often one of PJRT's event threads. PyTorch's
// deleter takes the GIL; taken there, it waits for the Python thread that
// holds it, which in turn waits (on each GIL release) for it: a context
// switch each way on every import, and a deadlock if that Python thread waits
// in PJRT for the event thread. So a deleter called without the GIL is queued
// instead, and the queue is run by the main thread at its next bytecode
// (Py_AddPendingCall) or by the next cuxla import on any Python thread,
// whichever comes first. Called with the GIL held, a deleter runs at once.
// Queueing allocates nothing (the queue's links live in the wrappers), so it
// cannot fail on PJRT's thread.
#pragma once

#include "dlpack/dlpack.h"

namespace cuxla::bindings {

// A tensor to hand to interop::ImportDLPack in place of `tensor`: the same
// tensor, whose deleter runs `tensor`'s as described above. Takes ownership
// of `tensor` (its deleter runs exactly once, also if this fails). The GIL
// must be held.
DLManagedTensorVersioned* WithGilDeleter(DLManagedTensorVersioned* tensor);
DLManagedTensor* WithGilDeleter(DLManagedTensor* tensor);

// Runs the queued deleters. The GIL must be held.
void RunQueuedDeleters();

}  // namespace cuxla::bindings
