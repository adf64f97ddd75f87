#include "pjrt/programs/strided_copy.h"

#include <optional>
#include <string>

#include "pjrt/executable.h"
#include "pjrt/layout.h"
#include "pjrt/text.h"

namespace cuxla::pjrt {
namespace {

std::string TensorType(std::span<const int64_t> dims, std::string_view element) {
  std::string text = "tensor<";
  for (int64_t d : dims) text += std::to_string(d) + "x";
  return text.append(element).append(">");
}

// out[i] = flat[origin + sum_k i_k * strides[k]] for i over `dims`: iotas
// scaled by the strides give each element's index, and one gather reads them.
std::string GatherProgram(std::string_view element, int64_t span, std::span<const int64_t> dims,
                          std::span<const int64_t> strides, int64_t origin) {
  const std::string out = TensorType(dims, element);
  const std::string index = TensorType(dims, "i64");
  std::vector<int64_t> index_dims(dims.begin(), dims.end());
  index_dims.push_back(1);
  const std::string index_vector = TensorType(index_dims, "i64");
  const size_t rank = dims.size();

  std::string p = "func.func public @main(%flat: tensor<" + std::to_string(span) + "x" +
                  std::string(element) + ">) -> " + out + " {\n";
  p += "  %i = stablehlo.constant dense<" + std::to_string(origin) + "> : " + index + "\n";
  std::string sum = "%i";
  for (size_t k = 0; k < rank; ++k) {
    const std::string n = std::to_string(k);
    p += "  %iota" + n + " = stablehlo.iota dim = " + n + " : " + index + "\n";
    p += "  %stride" + n + " = stablehlo.constant dense<" + std::to_string(strides[k]) + "> : " + index + "\n";
    p += "  %step" + n + " = stablehlo.multiply %iota" + n + ", %stride" + n + " : " + index + "\n";
    p += "  %sum" + n + " = stablehlo.add " + sum + ", %step" + n + " : " + index + "\n";
    sum = "%sum" + n;
  }
  p += "  %idx = stablehlo.reshape " + sum + " : (" + index + ") -> " + index_vector + "\n";
  p += "  %out = \"stablehlo.gather\"(%flat, %idx) {dimension_numbers = #stablehlo.gather<"
       "collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = " +
       std::to_string(rank) + ">, slice_sizes = array<i64: 1>} : (tensor<" + std::to_string(span) +
       "x" + std::string(element) + ">, " + index_vector + ") -> " + out + "\n";
  p += "  return %out : " + out + "\n}\n";
  return p;
}

}  // namespace

Array CopyStrided(const std::shared_ptr<const ClientState>& state, const Device& device,
                  const StridedTensor& tensor, void (*release)(void* data, void* arg),
                  void* release_arg) {
  const size_t alignment = state->buffer_alignment();
  const auto item = static_cast<int64_t>(DTypeSize(tensor.dtype));
  // The elements' offsets run from `low` to `high` (negative strides go below 0).
  int64_t low = 0, high = 0;
  for (size_t k = 0; k < tensor.dims.size(); ++k) {
    const int64_t reach = (tensor.dims[k] - 1) * tensor.strides[k];
    (reach < 0 ? low : high) += reach;
  }
  // View the whole span as a flat tensor starting at an aligned address.
  const auto first = reinterpret_cast<uintptr_t>(tensor.data) + low * item;
  const uintptr_t base = first & ~(static_cast<uintptr_t>(alignment) - 1);
  const int64_t lead = static_cast<int64_t>(first - base) / item;
  const int64_t span = lead + high - low + 1;

  DeviceView flat;
  flat.data = reinterpret_cast<void*>(base);
  flat.dtype = tensor.dtype;
  flat.dims = {span};
  flat.on_delete = release;  // after the copy below has read the memory
  flat.on_delete_arg = release_arg;
  flat.order = tensor.order;
  std::optional<Array> source;
  try {
    if ((first - base) % item != 0)
      throw Error(ErrorKind::kBuffer,
                  "data at address " + AddressText(reinterpret_cast<const void*>(first)) + " is not aligned to its " +
                      std::to_string(item) + "-byte elements, so it cannot be copied on the device");
    source.emplace(Array::CreateView(state, flat, device));
  } catch (...) {
    release(flat.data, release_arg);  // no view owns the memory: release it here
    throw;
  }

  auto program = state->programs->Compiled(
      GatherProgram(MlirTypeName(tensor.dtype), span, tensor.dims, tensor.strides, lead - low), device);
  const Array* args[] = {&*source};
  return std::move(program->Execute(args).front());
}

Array RowMajor(const Array& array) {
  if (array.is_row_major()) return array;
  // The copy reads the buffer through a second view; the reference keeps the
  // buffer alive until that view is done with it.
  auto* reference = new Array::ExternalReference(array);
  const std::vector<int64_t> strides = CompactStrides(array.dims(), array.layout());
  StridedTensor tensor{reference->data(), array.dtype(), array.dims(), strides, {}};
  if (array.device().platform == Platform::kCuda) {
    // The second view is read only once the array is ready (a view may still
    // wait for its producer's writes): the stream the copy runs on waits for
    // it — the compute stream itself when known, else an external-ready
    // stream that the second view is given.
    try {
      const ClientState& state = *array.state();
      const intptr_t compute = state.compute_stream(array.device()).stream;
      tensor.order.ready_stream = compute != 0 ? 0 : state.ExternalReadyStream(array.device());
      array.WaitUntilReadyOnStream(compute != 0 ? compute : tensor.order.ready_stream);
    } catch (...) {
      delete reference;
      throw;
    }
  }
  auto release = [](void*, void* arg) { delete static_cast<Array::ExternalReference*>(arg); };
  return CopyStrided(array.state(), array.device(), tensor, release, reference);
}

}  // namespace cuxla::pjrt
