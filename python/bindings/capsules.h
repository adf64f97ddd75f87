// python/bindings/capsules.h — DLPack capsules both ways: consuming one (from
// a capsule, or from a producer's `__dlpack__`) and making one of an Array.
#pragma once

#include <cstdint>
#include <optional>

#include "imports.h"

namespace cuxla::bindings {

// Consumes a DLPack capsule: renames it used_*, so that its destructor leaves
// the tensor to us, and imports it. `ready_stream`: the stream the producer
// ordered its work before (0: none).
Array ImportCapsule(nb::handle capsule, const ImportTarget& target, std::optional<bool> copy,
                    intptr_t ready_stream);

// The `__dlpack__` protocol: the producer orders its work before XLA's
// external-ready stream, which XLA's first use of the view waits on. (Before
// the compute stream instead, it would leave no marker of its writes for
// the view's other readers.)
Array ImportProtocol(nb::handle object, const ImportTarget& target, std::optional<bool> copy);

}  // namespace cuxla::bindings
