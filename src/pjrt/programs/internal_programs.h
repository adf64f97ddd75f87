// pjrt/programs/internal_programs.h — the InternalPrograms a client's state is
// given: programs compiled once per device, compute streams probed once.
#pragma once

#include <memory>

#include "pjrt/client_state.h"

namespace cuxla::pjrt {

// The InternalPrograms of `state`, which is to own them.
std::unique_ptr<const InternalPrograms> MakeInternalPrograms(const ClientState& state);

}  // namespace cuxla::pjrt
