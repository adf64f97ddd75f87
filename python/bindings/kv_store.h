// python/bindings/kv_store.h — a Python object (a torch.distributed.Store) as
// the key-value store of a client of several processes.
#pragma once

#include <memory>

#include "bindings.h"

namespace cuxla::bindings {

// `store` (anything with set / get / check / wait) as a KeyValueStore. PJRT
// calls it from its own threads: each call takes the GIL, and a Python error
// becomes a C++ exception with the error's type and text.
std::shared_ptr<KeyValueStore> PythonKeyValueStore(nb::object store);

}  // namespace cuxla::bindings
