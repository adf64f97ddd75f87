#include "pjrt/sharded_array.h"

#include <string>

#include "pjrt/text.h"

namespace cuxla {
namespace {

using pjrt::TupleText;

[[noreturn]] void Bad(const std::string& message) { throw Error(ErrorKind::kValue, message); }

}  // namespace

ShardedArray::ShardedArray(std::vector<Array> shards, Sharding sharding)
    : shards_(std::move(shards)), sharding_(std::move(sharding)) {
  if (shards_.empty()) Bad("a sharded array needs at least one shard");
  if (shards_.size() != sharding_.partitions())
    Bad(std::to_string(shards_.size()) + " shards given for " + sharding_.Description());
  const Array& first = shards_.front();
  if (first.dims().size() != sharding_.tiles.size())
    Bad("shards of shape " + TupleText(first.dims()) + " for " + sharding_.Description());
  for (size_t i = 0; i < shards_.size(); ++i) {
    const Array& shard = shards_[i];
    if (shard.dtype() != first.dtype() || shard.dims() != first.dims())
      Bad("shard " + std::to_string(i) + " is " + std::string(DTypeName(shard.dtype())) + TupleText(shard.dims()) +
          ", shard 0 " + std::string(DTypeName(first.dtype())) + TupleText(first.dims()));
    if (shard.state()->client.get() != first.state()->client.get())
      Bad("shard " + std::to_string(i) + " belongs to another client than shard 0");
    for (size_t j = 0; j < i; ++j)
      if (shards_[j].device().id == shard.device().id)
        Bad("shards " + std::to_string(j) + " and " + std::to_string(i) + " are both on device " +
            std::to_string(shard.device().id));
  }
  dims_ = sharding_.GlobalDims(first.dims());
}

ShardedArray ShardedArray::Of(std::vector<Array> shards, const Mesh& mesh, const PartitionSpec& spec) {
  if (shards.empty()) Bad("no shards given");
  for (size_t i = 0; i < shards.size() && i < mesh.devices.size(); ++i)
    if (shards[i].device().handle != mesh.devices[i]->handle)
      Bad("shard " + std::to_string(i) + " is on device " + std::to_string(shards[i].device().id) +
          ", the mesh's device " + std::to_string(i) + " is " + std::to_string(mesh.devices[i]->id));
  const size_t rank = shards.front().dims().size();
  Sharding sharding = Sharding::Of(mesh, spec, rank);
  return ShardedArray(std::move(shards), std::move(sharding));
}

ShardedCall PrepareSharded(const Executable& executable, std::span<const ShardedArray* const> args) {
  const auto& expected = executable.parameter_shardings();
  std::vector<std::vector<const Array*>> lists(executable.num_partitions());
  for (size_t i = 0; i < args.size(); ++i) {
    const ShardedArray& arg = *args[i];
    const std::optional<Sharding> wanted = i < expected.size() ? expected[i] : std::nullopt;
    if (!wanted) Bad("the program splits parameter " + std::to_string(i) + " in a way cuxla does not describe");
    if (arg.sharding() != *wanted)
      Bad("argument " + std::to_string(i) + " is split in " + arg.sharding().Description() +
          ", the program takes it in " + wanted->Description());
    for (size_t p = 0; p < lists.size(); ++p) lists[p].push_back(&arg.shards()[p]);
  }
  if (executable.results().size() != executable.num_outputs())
    Bad("the program has results cuxla does not describe (tuples, tokens)");
  ShardedCall sharded{executable.PreparePartitions(lists), {}};
  const auto& shardings = executable.result_shardings();
  for (size_t r = 0; r < executable.num_outputs(); ++r) {
    const std::optional<Sharding> sharding = r < shardings.size() ? shardings[r] : std::nullopt;
    if (!sharding) Bad("the program splits result " + std::to_string(r) + " in a way cuxla does not describe");
    sharded.result_shardings.push_back(*sharding);
  }
  return sharded;
}

std::vector<ShardedArray> RunSharded(const Executable& executable, const ShardedCall& call) {
  std::vector<std::vector<Array>> outputs = executable.RunPartitions(call.call);
  std::vector<ShardedArray> results;
  for (size_t r = 0; r < call.result_shardings.size(); ++r) {
    std::vector<Array> shards;
    for (auto& partition : outputs) shards.push_back(std::move(partition[r]));
    results.emplace_back(std::move(shards), call.result_shardings[r]);
  }
  return results;
}

std::vector<ShardedArray> ExecuteSharded(const Executable& executable,
                                         std::span<const ShardedArray* const> args) {
  return RunSharded(executable, PrepareSharded(executable, args));
}

}  // namespace cuxla
