// cuxla/cuxla.h — the whole C++ API: plugins, clients, devices, arrays and
// executables over the PJRT C API.
#pragma once

#include "cuxla/error.h"
#include "pjrt/array.h"
#include "pjrt/client.h"
#include "pjrt/dtype.h"
#include "pjrt/executable.h"
#include "pjrt/plugin.h"
