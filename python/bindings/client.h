// python/bindings/client.h — what other binding sources need of the client
// class: platform names as users write them, and client= arguments.
#pragma once

#include <string>

#include "bindings.h"

namespace cuxla::bindings {

// The platform cuxla means by `name` ("cpu", "cuda", "gpu", any case); with a
// plugin path given, any name passes (lower-cased). TypeError or ValueError
// in one sentence otherwise.
std::string PlatformName(nb::handle name, bool plugin_given = false);

// `client` as a Client: a Client, or a platform name for that platform's
// default client; else a TypeError in one sentence.
nb::object AsClient(nb::handle client);

}  // namespace cuxla::bindings
