// python/bindings/default_clients.h — the process's one client per platform:
// the default client, and where imports of a platform's tensors go.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"

namespace cuxla::bindings {

// Where installed Python packages (and so PJRT plugins) may be: sys.path.
std::vector<std::string> PackageDirs();

// The platform of the default client: CUDA if a GPU and its plugin are
// there, else CPU (chosen once).
const std::string& DefaultPlatform();

// The client of `platform` ("cuda", "cpu"), made on first use as
// Client(platform) and kept for the life of the process.
nb::object ClientForPlatform(const std::string& platform);

// The client of the default platform.
nb::object DefaultClient();

// ClientForPlatform(platform)'s state, for the import path (no reference taken).
const std::shared_ptr<const ClientState>& DefaultState(const std::string& platform);

}  // namespace cuxla::bindings
