// pjrt/xla_environment.h — what cuxla puts in XLA's environment before a
// plugin loads: the log level of XLA's C++ logging (CUXLA_LOG, as
// TF_CPP_MIN_LOG_LEVEL) and XLA's flags (CUXLA_COMMAND_BUFFERS,
// CUXLA_TRITON_GEMM, CUXLA_DOT_MERGER and CUXLA_AUTOTUNE_LEVEL, in XLA_FLAGS).
#pragma once

#include <optional>
#include <string>

namespace cuxla::pjrt {

// The TF_CPP_MIN_LOG_LEVEL cuxla gives XLA for these settings of CUXLA_LOG,
// TF_CPP_MIN_LOG_LEVEL, TF_CPP_MAX_VLOG_LEVEL and TF_CPP_VMODULE (null:
// unset), or nullopt to leave it as it is: CUXLA_LOG decides when set (info
// "0", warning "1", error "2"); else the user's own TF_CPP_MIN_LOG_LEVEL
// stands; else a VLOG setting asks for INFO lines ("0"); else "1", warnings
// and errors only. An unknown CUXLA_LOG gives nullopt (CheckXlaEnvironment
// says why).
std::optional<std::string> XlaMinLogLevel(const char* cuxla_log, const char* min_log_level,
                                          const char* max_vlog_level, const char* vmodule);

// cuxla's settings of XLA's flags, each as its environment variable holds it
// (null: unset).
struct XlaSettings {
  const char* command_buffers = nullptr;  // CUXLA_COMMAND_BUFFERS
  const char* triton_gemm = nullptr;      // CUXLA_TRITON_GEMM
  const char* dot_merger = nullptr;       // CUXLA_DOT_MERGER
  const char* autotune_level = nullptr;   // CUXLA_AUTOTUNE_LEVEL
};

// The XLA_FLAGS cuxla gives XLA for the user's XLA_FLAGS (null: unset) and
// cuxla's settings, or nullopt to leave it as it is: the user's flags, with
// - --xla_gpu_enable_command_buffer= (XLA's command buffers off: a program's
//   kernels and copies recorded once as a CUDA graph, updated with each
//   call's addresses) unless CUXLA_COMMAND_BUFFERS=1;
// - --xla_gpu_enable_triton_gemm=false (matrix products by cuBLAS, whose own
//   heuristics pick a kernel, not by Triton kernels XLA generates and
//   autotunes one by one: on an H100, BERT-base's training compiled in a
//   quarter of the time, its step as fast) unless CUXLA_TRITON_GEMM=1;
// - --xla_gpu_dot_merger_threshold_mb=0 (products that share an operand kept
//   apart: merged, their other operands, a model's weights, are concatenated
//   at every call and the merged product split again; on an H100 BERT-base's
//   step kept the device busy 0.6 ms less apart) unless CUXLA_DOT_MERGER=1;
// - --xla_gpu_autotune_level=N when CUXLA_AUTOTUNE_LEVEL=N (0 to 4; 0 spends
//   no compile time trying kernels, XLA's default is 4);
// - --xla_cpu_use_xnnpack=false, always: XLA's CPU hands some products to
//   XNNPACK, which keeps a weight it packed for the next execution by its
//   address, where cuxla's arguments are PyTorch's memory that training
//   updates in place (a Linear(2048, 512)'s input gradient 99% off at the
//   second step);
// each added only where the user's XLA_FLAGS does not name that flag.
std::optional<std::string> XlaFlags(const char* xla_flags, const XlaSettings& settings);

// The XLA_FLAGS the plugins read (as loading libcuxla left it; "" when
// unset): part of what a compiled executable depends on.
std::string XlaFlagsInEffect();

// Throws a ValueError-kind Error when CUXLA_LOG is set to other than info,
// warning or error, CUXLA_COMMAND_BUFFERS, CUXLA_TRITON_GEMM or
// CUXLA_DOT_MERGER to other than 0 or 1, or CUXLA_AUTOTUNE_LEVEL to other
// than 0 to 4.
void CheckXlaEnvironment();

}  // namespace cuxla::pjrt
