// pjrt/compile_options.h — the serialized xla.CompileOptionsProto that
// PJRT_Client_Compile takes, written by hand (cuxla links no protobuf).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace cuxla::pjrt {

// CompileOptionsProto for one replica and one partition per device of
// `device_ids` (global ids; partition i on device_ids[i]), with an explicit
// device assignment. Several partitions make an SPMD program partitioned
// by Shardy, which reads both Shardy and GSPMD (mhlo.sharding) annotations.
std::string CompileOptions(std::span<const int64_t> device_ids);

}  // namespace cuxla::pjrt
