// python/bindings/calls.h — the preparation of an executable's call on
// Python arguments: Arrays as they are, DLPack tensors imported.
#pragma once

#include "bindings.h"

namespace cuxla::bindings {

// The call of `executable` on Python arguments: cuxla Arrays as they are,
// any other DLPack tensor imported onto its device (zero-copy when possible,
// the imports batched); with `keep_views`, the views of exchange-API tensors
// kept for the next calls (call_views.h). Checked and held with the GIL, as
// Executable::Prepare; run it without.
Executable::Call PrepareCall(const Executable& executable, const nb::args& args, bool keep_views);

}  // namespace cuxla::bindings
