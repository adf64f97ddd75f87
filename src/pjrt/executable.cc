#include "pjrt/executable.h"

#include <algorithm>
#include <string>

#include "pjrt/array.h"
#include "pjrt/compile_options.h"
#include "pjrt/strided_copy.h"

namespace cuxla {
namespace {

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + (dims.size() == 1 ? ",)" : ")");
}

// The optimized program's entry shape (PJRT offers no other way to learn the
// parameters).
pjrt::ProgramShape OptimizedProgramShape(const pjrt::Api& api, PJRT_Executable* executable) {
  PJRT_Program program = CUXLA_PJRT_ARGS(PJRT_Program);
  static constexpr std::string_view kHlo = "hlo";
  program.format = kHlo.data();
  program.format_size = kHlo.size();
  auto args = CUXLA_PJRT_ARGS(PJRT_Executable_OptimizedProgram_Args);
  args.executable = executable;
  args.program = &program;
  CUXLA_PJRT_CALL(api, PJRT_Executable_OptimizedProgram, &args);  // sizes code_size
  std::string code(program.code_size, '\0');
  program.code = code.data();
  CUXLA_PJRT_CALL(api, PJRT_Executable_OptimizedProgram, &args);
  return pjrt::EntryProgramShape(std::string_view(program.format, program.format_size), code);
}

}  // namespace

std::shared_ptr<const Executable> Executable::Compile(std::shared_ptr<const ClientState> state,
                                                      std::string_view program,
                                                      const Device& device) {
  if (program.empty()) throw Error(ErrorKind::kValue, "cannot compile an empty program");
  const pjrt::Api& api = state->api();
  // The client's own record of the device; throws for another client's device.
  const Device& placed = state->DeviceOf(device.handle);
  static constexpr std::string_view kFormat = "mlir";  // StableHLO text or bytecode
  PJRT_Program pjrt_program = CUXLA_PJRT_ARGS(PJRT_Program);
  // PJRT only reads `code` during compilation.
  pjrt_program.code = const_cast<char*>(program.data());
  pjrt_program.code_size = program.size();
  pjrt_program.format = kFormat.data();
  pjrt_program.format_size = kFormat.size();

  const std::string options = pjrt::SingleDeviceCompileOptions(placed.id);
  auto args = CUXLA_PJRT_ARGS(PJRT_Client_Compile_Args);
  args.client = state->client.get();
  args.program = &pjrt_program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  CUXLA_PJRT_CALL(api, PJRT_Client_Compile, &args);
  pjrt::LoadedExecutablePtr loaded(args.executable, pjrt::LoadedExecutableDestroy{&api});
  return std::make_shared<const Executable>(std::move(state), std::move(loaded), placed);
}

Executable::Executable(std::shared_ptr<const ClientState> state, pjrt::LoadedExecutablePtr loaded,
                       const Device& device)
    : state_(std::move(state)), loaded_(std::move(loaded)), device_(&device) {
  const pjrt::Api& api = state_->api();
  auto get_args = CUXLA_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get_args.loaded_executable = loaded_.get();
  CUXLA_PJRT_CALL(api, PJRT_LoadedExecutable_GetExecutable, &get_args);
  pjrt::ExecutablePtr executable(get_args.executable, pjrt::ExecutableDestroy{&api});

  auto name_args = CUXLA_PJRT_ARGS(PJRT_Executable_Name_Args);
  name_args.executable = executable.get();
  CUXLA_PJRT_CALL(api, PJRT_Executable_Name, &name_args);
  name_.assign(name_args.executable_name, name_args.executable_name_size);

  auto out_args = CUXLA_PJRT_ARGS(PJRT_Executable_NumOutputs_Args);
  out_args.executable = executable.get();
  CUXLA_PJRT_CALL(api, PJRT_Executable_NumOutputs, &out_args);
  num_outputs_ = out_args.num_outputs;
  shape_ = OptimizedProgramShape(api, executable.get());
  // Outputs are described from the results when these are complete.
  const bool described = shape_.results.size() == num_outputs_ &&
                         std::all_of(shape_.results.begin(), shape_.results.end(),
                                     [](const pjrt::HloShape& s) { return s.dtype.has_value(); });
  if (!described) shape_.results.clear();
}

Executable::Call Executable::Prepare(std::span<const Array* const> args) const {
  const std::vector<pjrt::HloShape>& parameters = shape_.parameters;
  if (args.size() != parameters.size())
    throw Error(ErrorKind::kValue, "the program takes " + std::to_string(parameters.size()) +
                                       " arguments, " + std::to_string(args.size()) + " given");
  Call call;
  call.buffers.reserve(args.size());
  // Outputs belong to the arguments' client: the same as state_, which for an
  // internal program (ClientState::InternalProgram) does not own the client.
  call.owner = args.empty() ? state_ : args.front()->state();
  for (size_t i = 0; i < args.size(); ++i) {
    const Array& arg = *args[i];
    if (arg.state()->client.get() != state_->client.get())
      throw Error(ErrorKind::kValue, "argument " + std::to_string(i) +
                                         " belongs to another client than the executable");
    if (arg.device().id != device_->id)
      throw Error(ErrorKind::kValue, "argument " + std::to_string(i) + " is on device " +
                                         std::to_string(arg.device().id) +
                                         ", the executable runs on device " +
                                         std::to_string(device_->id));
    const pjrt::HloShape& expected = parameters[i];
    if (expected.dtype != arg.dtype() || expected.dims != arg.dims())
      throw Error(ErrorKind::kValue,
                  "argument " + std::to_string(i) + " is " + std::string(DTypeName(arg.dtype())) +
                      DimsText(arg.dims()) + ", the program expects " +
                      (expected.dtype ? std::string(DTypeName(*expected.dtype)) : "another type") +
                      DimsText(expected.dims));
    // The program reads its parameters row-major (cuxla compiles with default
    // layouts); a view in another layout is copied into that order first.
    call.buffers.push_back(arg.is_row_major() ? arg.shared_buffer() : RowMajor(arg).shared_buffer());
  }
  return call;
}

std::vector<Array> Executable::Execute(std::span<const Array* const> args) const {
  return Run(Prepare(args));
}

std::vector<Array> Executable::Run(const Call& call) const {
  const pjrt::Api& api = state_->api();
  std::vector<PJRT_Buffer*> buffers;
  buffers.reserve(call.buffers.size());
  for (const auto& buffer : call.buffers) buffers.push_back(buffer.get());

  PJRT_ExecuteOptions options = CUXLA_PJRT_ARGS(PJRT_ExecuteOptions);
  std::vector<PJRT_Buffer*> outputs(num_outputs_, nullptr);
  PJRT_Buffer* const* argument_list = buffers.data();
  PJRT_Buffer** output_list = outputs.data();

  auto exec_args = CUXLA_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  exec_args.executable = loaded_.get();
  exec_args.options = &options;
  exec_args.argument_lists = &argument_list;
  exec_args.num_devices = 1;
  exec_args.num_args = buffers.size();
  exec_args.output_lists = &output_list;
  CUXLA_PJRT_CALL(api, PJRT_LoadedExecutable_Execute, &exec_args);

  // Own every output before constructing Arrays, so a failure leaks none.
  std::vector<pjrt::BufferPtr> owned;
  owned.reserve(outputs.size());
  for (PJRT_Buffer* buffer : outputs) owned.emplace_back(buffer, pjrt::BufferDestroy{&api});
  const std::shared_ptr<const ClientState>& owner = call.owner;
  std::vector<Array> result;
  result.reserve(owned.size());
  for (size_t i = 0; i < owned.size(); ++i) {
    if (shape_.results.empty()) {
      result.emplace_back(owner, std::move(owned[i]));
      continue;
    }
    const pjrt::HloShape& out = shape_.results[i];
    result.emplace_back(owner, std::move(owned[i]), ArrayShape{*out.dtype, out.dims, out.minor_to_major},
                        *device_, /*is_view=*/false);
  }
  return result;
}

}  // namespace cuxla
