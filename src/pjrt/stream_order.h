// pjrt/stream_order.h — the one home of CUDA stream ordering: what a reader of
// memory written on another stream (PyTorch's) must wait for, and how the
// imports of one execution share one wait.
//
// XLA may read such memory only after the writes queued on the producer's
// stream. There are two routes, chosen per device, both on the device (no
// host synchronisation):
// - the compute stream's: when the stream XLA runs programs on is known
//   (probed once per device, pjrt/programs/compute_stream.h), it is made to
//   wait for the producer's queued work; programs are then ordered. PJRT knows
//   nothing of that wait, so the other readers of the memory (an export, a
//   host copy) wait for a marker of the writes, `pending_writes`.
// - the ready stream's: otherwise an XLA external-ready stream (the PJRT
//   stream extension) waits for the producer and is given to the view as its
//   `ready_stream`; PJRT makes every use of the view wait for it, at the cost
//   of its own bookkeeping (docs/gpu-results.md), which is spared when the
//   producer has nothing queued.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "cuda/driver.h"

namespace cuxla {

struct ClientState;
struct Device;

namespace pjrt {

// What a reader of memory written elsewhere waits for, by route; both empty:
// nothing was pending.
struct ReadOrder {
  intptr_t ready_stream = 0;  // the ready stream's route
  std::shared_ptr<const cuda::StreamMarker> pending_writes;  // the compute stream's route
};

// Orders XLA's coming use of `device` memory after the work queued so far on
// `producer` (a CUDA stream; 1 the legacy default). `only_programs_read`: no
// reader but a program will need the marker of the writes.
ReadOrder OrderAfterProducer(const ClientState& state, const Device& device, intptr_t producer,
                             bool only_programs_read);

// How one import is ordered: its read order, and whether only a copy of the
// memory waits for it (a view then does not, another view of the same
// execution ordering the whole execution).
struct ImportOrder {
  ReadOrder read;
  bool only_copies_wait = false;
};

// The imports of one execution's arguments. Only the first import on a
// device is ordered after its producer: the others were written before it,
// on the same stream, and their views are only ever read by that execution,
// which waits for all its arguments — but a copy made at import (a strided
// tensor) runs before the execution, so it waits for the ready stream too.
class ExecutionImports {
 public:
  // The order of an import on the device of local hardware id `device_id`
  // when an earlier import of this execution covers it; else nullopt.
  std::optional<ImportOrder> Earlier(int device_id) const;
  // Orders the first import on `device` after `producer`, for the rest too.
  ImportOrder First(const ClientState& state, const Device& device, intptr_t producer);

 private:
  int device_id_ = -1;
  intptr_t ready_stream_ = 0;  // the first import's (0: the compute stream waited, or nothing was pending)
};

}  // namespace pjrt
}  // namespace cuxla
