#include "pjrt/executable.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>

#include "pjrt/compile_options.h"
#include "pjrt/disk_cache.h"
#include "pjrt/text.h"
#include "pjrt/xla_environment.h"

namespace cuxla {
namespace {

using pjrt::TupleText;

// The optimized program's entry shape (PJRT offers no other way to learn the
// parameters).
pjrt::ProgramShape OptimizedProgramShape(const pjrt::Api& api, PJRT_Executable* executable,
                                         size_t partitions) {
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
  return pjrt::EntryProgramShape(std::string_view(program.format, program.format_size), code, partitions);
}

// Whether this plugin can write and read back executables: without both
// entries there is no disk cache, silently.
bool CanSerialize(const pjrt::Api& api) noexcept {
  return api.Has(&PJRT_Api::PJRT_Executable_Serialize) && api.Has(&PJRT_Api::PJRT_Executable_DeserializeAndLoad);
}

// Everything an executable depends on besides the program and its options:
// the plugin (file name, PJRT API version, its own version attributes, the
// platform version), XLA's flags (command buffers, autotuning) and the
// devices' kinds. A new plugin, other flags or another GPU model mean other
// entries, never a load of one made elsewhere.
std::string DiskCacheKey(const ClientState& state, std::span<const Device* const> devices,
                         std::string_view options, std::string_view program) {
  std::string key = "cuxla-executable-v1";
  auto field = [&key](std::string_view text) {
    key += '\0' + std::to_string(text.size()) + ':';
    key.append(text);
  };
  const pjrt::Api& api = state.api();
  field(std::filesystem::path(api.plugin_path()).filename().string());
  field(api.version());
  for (const auto& [name, value] : state.plugin->Attributes()) {
    field(name);
    field(value);
  }
  const auto version = CUXLA_PJRT_QUERY(api, PJRT_Client_PlatformVersion, client, state.client.get());
  field(std::string_view(version.platform_version, version.platform_version_size));
  field(state.platform_name);
  field(pjrt::XlaFlagsInEffect());
  for (const Device* device : devices) field(device->kind);
  field(options);
  field(program);
  return key;
}

// The executable in `bytes` loaded onto the client with `options` (our
// device assignment), or null when the plugin refuses it (another build,
// damaged bytes that passed the checksum).
pjrt::LoadedExecutablePtr Deserialize(const ClientState& state, std::string_view bytes, std::string_view options) {
  const pjrt::Api& api = state.api();
  auto args = CUXLA_PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args);
  args.client = state.client.get();
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  args.overridden_serialized_compile_options = options.data();
  args.overridden_serialized_compile_options_size = options.size();
  try {
    CUXLA_PJRT_CALL(api, PJRT_Executable_DeserializeAndLoad, &args);
  } catch (const Error&) {
    return nullptr;
  }
  return pjrt::LoadedExecutablePtr(args.loaded_executable, pjrt::LoadedExecutableDestroy{&api});
}

// The compiled executable behind a loaded one (names, shapes, statistics, serialization).
pjrt::ExecutablePtr ExecutableOf(const pjrt::Api& api, PJRT_LoadedExecutable* loaded) {
  return pjrt::ExecutablePtr(
      CUXLA_PJRT_QUERY(api, PJRT_LoadedExecutable_GetExecutable, loaded_executable, loaded).executable,
      pjrt::ExecutableDestroy{&api});
}

// Writes `loaded` as `key`'s entry; a plugin that cannot serialize this
// executable just leaves no entry.
void StoreSerialized(const ClientState& state, PJRT_LoadedExecutable* loaded, const std::string& dir,
                     std::string_view key, uint64_t max_bytes) {
  const pjrt::Api& api = state.api();
  try {
    const pjrt::ExecutablePtr executable = ExecutableOf(api, loaded);
    auto args = CUXLA_PJRT_ARGS(PJRT_Executable_Serialize_Args);
    args.executable = executable.get();
    CUXLA_PJRT_CALL(api, PJRT_Executable_Serialize, &args);
    struct Free {
      decltype(args.serialized_executable_deleter) deleter;
      void operator()(PJRT_SerializedExecutable* s) const noexcept {
        if (deleter != nullptr) deleter(s);
      }
    };
    std::unique_ptr<PJRT_SerializedExecutable, Free> owner(args.serialized_executable,
                                                           Free{args.serialized_executable_deleter});
    pjrt::StoreEntry(dir, key, std::string_view(args.serialized_bytes, args.serialized_bytes_size), max_bytes);
  } catch (const Error&) {
    pjrt::CountDiskCacheError();
  }
}

}  // namespace

std::shared_ptr<const Executable> Executable::Compile(std::shared_ptr<const ClientState> state,
                                                      std::string_view program,
                                                      const Device& device) {
  const Device* devices[] = {&device};
  return Compile(std::move(state), program, devices);
}

std::shared_ptr<const Executable> Executable::Compile(std::shared_ptr<const ClientState> state,
                                                      std::string_view program,
                                                      std::span<const Device* const> devices) {
  if (program.empty()) throw Error(ErrorKind::kCompile, "cannot compile an empty program");
  if (devices.empty()) throw Error(ErrorKind::kValue, "cannot compile for no device");
  const pjrt::Api& api = state->api();
  // The client's own records of the devices; throws for another client's device.
  std::vector<const Device*> placed;
  std::vector<int64_t> ids;
  for (const Device* device : devices) {
    const Device& own = state->DeviceOf(device->handle);
    if (std::find(placed.begin(), placed.end(), &own) != placed.end())
      throw Error(ErrorKind::kValue, "device " + std::to_string(own.id) + " is given twice");
    placed.push_back(&own);
    ids.push_back(own.id);
  }
  static constexpr std::string_view kFormat = "mlir";  // StableHLO text or bytecode
  PJRT_Program pjrt_program = CUXLA_PJRT_ARGS(PJRT_Program);
  // PJRT only reads `code` during compilation.
  pjrt_program.code = const_cast<char*>(program.data());
  pjrt_program.code_size = program.size();
  pjrt_program.format = kFormat.data();
  pjrt_program.format_size = kFormat.size();

  const std::string options = pjrt::CompileOptions(ids);

  // The disk cache first: a usable entry spares the compile; anything wrong
  // with it (damaged, foreign, refused by the plugin) means compiling again.
  const std::optional<std::string> cache_dir = CanSerialize(api) ? pjrt::DiskCacheDir() : std::nullopt;
  const uint64_t cache_max_bytes = cache_dir ? pjrt::DiskCacheMaxBytes() : 0;
  std::string cache_key;
  if (cache_dir) {
    try {
      cache_key = DiskCacheKey(*state, placed, options, program);
    } catch (const Error&) {
      pjrt::CountDiskCacheError();  // no key, no cache: compile as if off
    }
  }
  if (!cache_key.empty()) {
    if (std::optional<std::string> bytes = pjrt::LoadEntry(*cache_dir, cache_key)) {
      if (pjrt::LoadedExecutablePtr loaded = Deserialize(*state, *bytes, options)) {
        try {
          auto executable = std::make_shared<const Executable>(state, std::move(loaded), placed);
          pjrt::CountDiskCacheHit();
          return executable;
        } catch (const Error&) {
          // Loaded but not describable: treat as a damaged entry.
        }
      }
      pjrt::CountDiskCacheError();
    }
    pjrt::CountDiskCacheMiss();
  }

  auto args = CUXLA_PJRT_ARGS(PJRT_Client_Compile_Args);
  args.client = state->client.get();
  args.program = &pjrt_program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  try {
    CUXLA_PJRT_CALL(api, PJRT_Client_Compile, &args);
  } catch (const Error& e) {
    // Whatever code the plugin gave, a refused program is one error type; running out of memory stays that.
    if (e.kind() == ErrorKind::kMemory) throw;
    throw Error(ErrorKind::kCompile, e.what());
  }
  pjrt::LoadedExecutablePtr loaded(args.executable, pjrt::LoadedExecutableDestroy{&api});
  if (!cache_key.empty()) StoreSerialized(*state, loaded.get(), *cache_dir, cache_key, cache_max_bytes);
  return std::make_shared<const Executable>(std::move(state), std::move(loaded), std::move(placed));
}

Executable::Executable(std::shared_ptr<const ClientState> state, pjrt::LoadedExecutablePtr loaded,
                       std::vector<const Device*> devices)
    : state_(std::move(state)), loaded_(std::move(loaded)), devices_(std::move(devices)) {
  const pjrt::Api& api = state_->api();
  const pjrt::ExecutablePtr executable = ExecutableOf(api, loaded_.get());
  const auto name_args = CUXLA_PJRT_QUERY(api, PJRT_Executable_Name, executable, executable.get());
  name_.assign(name_args.executable_name, name_args.executable_name_size);
  num_outputs_ = CUXLA_PJRT_QUERY(api, PJRT_Executable_NumOutputs, executable, executable.get()).num_outputs;
  shape_ = OptimizedProgramShape(api, executable.get(), devices_.size());
  // Outputs are described from the results when these are complete.
  const bool described = shape_.results.size() == num_outputs_ &&
                         std::all_of(shape_.results.begin(), shape_.results.end(),
                                     [](const pjrt::HloShape& s) { return s.dtype.has_value(); });
  if (!described) shape_.results.clear();
}

std::optional<Executable::MemorySizes> Executable::memory_sizes() const {
  const pjrt::Api& api = state_->api();
  if (!api.Has(&PJRT_Api::PJRT_Executable_GetCompiledMemoryStats)) return std::nullopt;
  const pjrt::ExecutablePtr executable = ExecutableOf(api, loaded_.get());
  // Statistics, not results: a plugin that answers with an error (one that
  // does not implement them) says nothing, and the caller's work goes on.
  auto stats = CUXLA_PJRT_ARGS(PJRT_Executable_GetCompiledMemoryStats_Args);
  stats.executable = executable.get();
  if (PJRT_Error* error = api.Get(&PJRT_Api::PJRT_Executable_GetCompiledMemoryStats,
                                  "PJRT_Executable_GetCompiledMemoryStats")(&stats)) {
    pjrt::Discard(&api, error);
    return std::nullopt;
  }
  return MemorySizes{.arguments = stats.argument_size_in_bytes,
                     .outputs = stats.output_size_in_bytes,
                     .aliased = stats.alias_size_in_bytes,
                     .scratch = stats.temp_size_in_bytes,
                     .code = stats.generated_code_size_in_bytes};
}

Executable::Call Executable::PreparePartitions(std::span<const std::vector<const Array*>> args) const {
  if (args.size() != devices_.size())
    throw Error(ErrorKind::kValue, "the program has " + std::to_string(devices_.size()) + " partitions, " +
                                       std::to_string(args.size()) + " argument lists given");
  const std::vector<pjrt::HloShape>& parameters = shape_.parameters;
  Call call;
  // Outputs belong to the arguments' client: the same as state_, which for an
  // internal program (InternalPrograms::Compiled) does not own the client.
  call.owner = args.front().empty() ? state_ : args.front().front()->state();
  for (size_t p = 0; p < args.size(); ++p) {
    // Names for messages, spelled only when one is thrown.
    auto where = [&] { return devices_.size() > 1 ? " of partition " + std::to_string(p) : std::string(); };
    if (args[p].size() != parameters.size())
      throw Error(ErrorKind::kValue, "the program takes " + std::to_string(parameters.size()) +
                                         " arguments, " + std::to_string(args[p].size()) + " given" + where());
    auto& held = call.args.emplace_back();
    held.reserve(parameters.size());
    for (size_t i = 0; i < parameters.size(); ++i) {
      const Array& arg = *args[p][i];
      auto name = [&] { return "argument " + std::to_string(i) + where(); };
      if (arg.state()->client.get() != state_->client.get())
        throw Error(ErrorKind::kValue, name() + " belongs to another client than the executable");
      if (arg.device().id != devices_[p]->id)
        throw Error(ErrorKind::kValue, name() + " is on device " + std::to_string(arg.device().id) +
                                           ", the program runs it on device " + std::to_string(devices_[p]->id));
      const pjrt::HloShape& expected = parameters[i];
      if (expected.dtype != arg.dtype() || expected.dims != arg.dims())
        throw Error(ErrorKind::kValue,
                    name() + " is " + std::string(DTypeName(arg.dtype())) + TupleText(arg.dims()) +
                        ", the program expects " +
                        (expected.dtype ? std::string(DTypeName(*expected.dtype)) : "another type") +
                        TupleText(expected.dims));
      // The program reads its parameters row-major (cuxla compiles with default
      // layouts): Run copies a view in another layout into that order first.
      if (arg.is_row_major())
        held.emplace_back(arg.shared_buffer());
      else
        held.emplace_back(Array(arg));
    }
  }
  return call;
}

std::vector<std::vector<Array>> Executable::RunPartitions(const Call& call) const {
  const pjrt::Api& api = state_->api();
  const size_t partitions = call.args.size();
  std::vector<Array> row_major;  // copies made here, alive until the launch holds them
  std::vector<std::vector<PJRT_Buffer*>> buffers(partitions);
  std::vector<PJRT_Buffer* const*> argument_lists;
  for (size_t p = 0; p < partitions; ++p) {
    buffers[p].reserve(call.args[p].size());
    for (const auto& arg : call.args[p]) {
      if (const auto* buffer = std::get_if<std::shared_ptr<PJRT_Buffer>>(&arg)) {
        buffers[p].push_back(buffer->get());
      } else {
        row_major.push_back(state_->programs->RowMajor(std::get<Array>(arg)));
        buffers[p].push_back(row_major.back().buffer());
      }
    }
    argument_lists.push_back(buffers[p].data());
  }
  std::vector<std::vector<PJRT_Buffer*>> outputs(partitions, std::vector<PJRT_Buffer*>(num_outputs_, nullptr));
  std::vector<PJRT_Buffer**> output_lists;
  for (auto& list : outputs) output_lists.push_back(list.data());

  PJRT_ExecuteOptions options = CUXLA_PJRT_ARGS(PJRT_ExecuteOptions);
  // Each launch its own id: XLA keys the rendezvous of a collective by it,
  // and two launches in flight with one id would join each other's.
  static std::atomic<uint32_t> launches{0};  // wraps around: ids stay in [1, 2^31 - 1]
  options.launch_id =
      partitions > 1 ? static_cast<int>(launches.fetch_add(1, std::memory_order_relaxed) % 0x7fffffffu + 1) : 0;
  auto exec_args = CUXLA_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  exec_args.executable = loaded_.get();
  exec_args.options = &options;
  exec_args.argument_lists = argument_lists.data();
  exec_args.num_devices = partitions;
  exec_args.num_args = shape_.parameters.size();
  exec_args.output_lists = output_lists.data();
  CUXLA_PJRT_CALL(api, PJRT_LoadedExecutable_Execute, &exec_args);

  // Own every output before constructing Arrays, so a failure leaks none.
  std::vector<std::vector<pjrt::BufferPtr>> owned(partitions);
  for (size_t p = 0; p < partitions; ++p) {
    owned[p].reserve(num_outputs_);
    for (PJRT_Buffer* buffer : outputs[p]) owned[p].emplace_back(buffer, pjrt::BufferDestroy{&api});
  }
  std::vector<std::vector<Array>> result(partitions);
  for (size_t p = 0; p < partitions; ++p) {
    result[p].reserve(num_outputs_);
    for (size_t i = 0; i < num_outputs_; ++i) {
      if (shape_.results.empty()) {
        result[p].emplace_back(call.owner, std::move(owned[p][i]));
        continue;
      }
      const pjrt::HloShape& out = shape_.results[i];
      result[p].emplace_back(call.owner, std::move(owned[p][i]),
                             ArrayShape{*out.dtype, out.dims, out.minor_to_major}, *devices_[p],
                             /*is_view=*/false);
    }
  }
  return result;
}

Executable::Call Executable::Prepare(std::span<const Array* const> args) const {
  const std::vector<const Array*> list(args.begin(), args.end());
  return PreparePartitions(std::span(&list, 1));
}

std::vector<Array> Executable::Run(const Call& call) const {
  return std::move(RunPartitions(call).front());
}

std::vector<Array> Executable::Execute(std::span<const Array* const> args) const {
  return Run(Prepare(args));
}

}  // namespace cuxla
