// python/bindings/imports.h — DLPack imports from Python: where one goes (a
// client, a device, or the tensor platform's default client), the GIL
// released while it runs, and the dispatch on the kind of producer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "bindings.h"
#include "interop/import.h"
#include "producer_deleters.h"

namespace cuxla::bindings {

// CUDA's legacy default stream, as the array API numbers it (and CU_STREAM_LEGACY).
constexpr intptr_t kLegacyDefaultStream = 1;

// Where an import goes: a client, a device, or (both null) the default
// client of the tensor's platform, on the tensor's own device.
struct ImportTarget {
  std::shared_ptr<const ClientState> state;
  const Device* device = nullptr;
};

// How a tensor of DLPack device type `device_type` is imported to `target`:
// through the client of the tensor's own platform (the target's when it is
// of that platform, else that platform's default client), with the options
// that take the result on to the target.
struct ImportPlan {
  std::shared_ptr<const ClientState> state;
  interop::ImportOptions options;
};
ImportPlan PlanImport(const ImportTarget& target, int device_type, std::optional<bool> copy);

// interop::ImportDLPack without the GIL, the producer's deleter run with it
// (producer_deleters.h). A copy made at import runs a program, and PJRT may
// wait in it for earlier work to finish: holding the GIL there would stall
// every other Python thread. The tensor is ours by now, and no Python object
// is touched. Afterwards, with the GIL back, the deleters queued meanwhile
// (this import's, if it failed, and those of views XLA let go of) run.
template <class Managed>
Array ImportWithoutGil(const ImportPlan& plan, Managed* tensor) {
  struct RunQueuedAfter {
    ~RunQueuedAfter() { RunQueuedDeleters(); }
  } run_queued_after;  // destroyed after `release`: with the GIL
  tensor = WithGilDeleter(tensor);
  nb::gil_scoped_release release;
  return interop::ImportDLPack(plan.state, tensor, plan.options);
}

// Imports any DLPack producer (`__dlpack__` object, DLPack C exchange API)
// or capsule as an Array. `batch` (may be null): the imports of one execution's arguments.
Array ImportObject(nb::handle object, const ImportTarget& target, std::optional<bool> copy,
                   pjrt::ExecutionImports* batch = nullptr);

}  // namespace cuxla::bindings
