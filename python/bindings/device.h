// python/bindings/device.h — device= arguments as PyTorch and JAX users write them; a device's memory statistics.
#pragma once

#include <optional>

#include "bindings.h"

namespace cuxla::bindings {

// `device` as a cuxla Device: a Device; "cuda", "cuda:1", "cpu", "gpu:0"
// (any case) or a torch.device, the index meaning the CUDA ordinal (without
// one, PyTorch's current CUDA device if PyTorch has one, else the first); an
// int, the index among the devices of `client` (a client= argument, else the
// default client). A TypeError or ValueError in one sentence otherwise.
PyDevice AsDevice(nb::handle device, nb::handle client);

// A device allocator's statistics as a dict, or None where the plugin keeps none.
nb::object MemoryStatsDict(const std::optional<MemoryStats>& stats);

}  // namespace cuxla::bindings
