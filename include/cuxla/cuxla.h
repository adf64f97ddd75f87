// cuxla/cuxla.h — the whole C++ API: plugins, clients, devices, arrays,
// executables (one device, or SPMD over a mesh) and sharded arrays over the
// PJRT C API, and the DLPack import/export calls.
#pragma once

#include "cuxla/error.h"
#include "interop/export.h"
#include "interop/import.h"
#include "pjrt/array.h"
#include "pjrt/client.h"
#include "pjrt/dtype.h"
#include "pjrt/executable.h"
#include "pjrt/plugin.h"
#include "pjrt/sharded_array.h"
#include "pjrt/sharding.h"

namespace cuxla {

// The two core calls (docs/architecture.md), over DLManagedTensorVersioned.
using interop::ExportDLPack;
using interop::ImportDLPack;

}  // namespace cuxla
