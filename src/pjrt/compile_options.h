// pjrt/compile_options.h — the serialized xla.CompileOptionsProto that
// PJRT_Client_Compile takes, written by hand (cuxla links no protobuf).
#pragma once

#include <cstdint>
#include <string>

namespace cuxla::pjrt {

// CompileOptionsProto for one replica and one partition placed on the device
// whose global id is `device_id`, with an explicit device assignment.
std::string SingleDeviceCompileOptions(int64_t device_id);

}  // namespace cuxla::pjrt
