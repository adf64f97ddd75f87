// python/bindings/exchange_api.h — the DLPack C exchange API (PyTorch >=
// 2.10): tensors to and from a framework without Python-level `__dlpack__`,
// each side ordered after the other's current stream on the device.
#pragma once

#include <cstdint>
#include <optional>

#include "dlpack/dlpack.h"
#include "imports.h"

namespace cuxla::bindings {

// The DLPack C exchange API of `type`, or null. Found types are kept
// referenced for good, so their cached address stays theirs.
const DLPackExchangeAPI* ExchangeApi(PyTypeObject* type);

// The DLPack C exchange API of the tensor type `type`; TypeError if none.
const DLPackExchangeAPI* ExchangeApiOfType(nb::handle type);

// The framework's current stream on `device` (the legacy default stream
// where it reports none); nullopt off CUDA.
std::optional<intptr_t> CurrentStream(const DLPackExchangeAPI* api, DLDevice device);

// Orders XLA's first use of a tensor on `device` (of `state`'s client) after
// the exchange-API producer's current stream, on the device; sets `options`'
// producer order (nothing to do off CUDA).
void OrderAfterProducer(const DLPackExchangeAPI* api, const ClientState& state, DLDevice device,
                        pjrt::ExecutionImports* batch, interop::ImportOptions& options);

// The fast path: no Python-level `__dlpack__`; XLA's first use waits, on the
// device, for the producer's current stream.
Array ImportExchange(const DLPackExchangeAPI* api, nb::handle object, const ImportTarget& target,
                     std::optional<bool> copy, pjrt::ExecutionImports* batch);

// The exchange-API consumer's object for `array`, already ordered for it.
nb::object ExportOrdered(const DLPackExchangeAPI* api, const Array& array);

}  // namespace cuxla::bindings
