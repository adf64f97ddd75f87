// pjrt/sharded_array.h — cuxla::ShardedArray: one array split over the
// devices of a mesh, one Array (a tile) per device, and SPMD execution on it.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "pjrt/array.h"
#include "pjrt/executable.h"
#include "pjrt/sharding.h"

namespace cuxla {

class ShardedArray {
 public:
  // `shards[i]` is partition i's tile, each on its own device; all of one
  // dtype and one shape (sharding.TileDims of the array's). ValueError-kind
  // Error otherwise, naming the shard.
  ShardedArray(std::vector<Array> shards, Sharding sharding);
  // `shards[i]` on mesh.devices[i] (ValueError-kind Error otherwise), the
  // array split as `spec` says.
  static ShardedArray Of(std::vector<Array> shards, const Mesh& mesh, const PartitionSpec& spec);

  const std::vector<Array>& shards() const noexcept { return shards_; }
  const Sharding& sharding() const noexcept { return sharding_; }
  const std::vector<int64_t>& dims() const noexcept { return dims_; }  // the whole array's
  DType dtype() const noexcept { return shards_.front().dtype(); }

 private:
  std::vector<Array> shards_;
  Sharding sharding_;
  std::vector<int64_t> dims_;
};

// An SPMD execution's arguments, checked and held, and how its results are split.
struct ShardedCall {
  Executable::Call call;
  std::vector<Sharding> result_shardings;
};

// Checks sharded arguments for an SPMD program: each must be split as the
// program's parameter is and have its shards on the program's devices, in
// partition order (ValueError-kind Error otherwise). Host work only, as
// Executable::PreparePartitions.
ShardedCall PrepareSharded(const Executable& executable, std::span<const ShardedArray* const> args);
// Runs it (as Executable::RunPartitions: without the GIL) and returns the
// results, sharded as the program makes them.
std::vector<ShardedArray> RunSharded(const Executable& executable, const ShardedCall& call);
// Both in one (for callers holding no lock PJRT's threads need).
std::vector<ShardedArray> ExecuteSharded(const Executable& executable,
                                         std::span<const ShardedArray* const> args);

}  // namespace cuxla
