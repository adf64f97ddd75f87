// python/bindings/call_views.cc — the table of kept call views, each dropped when its tensor dies.
#include "call_views.h"

#include <unordered_map>
#include <utility>

#include "interop/export.h"

namespace cuxla::bindings {
namespace {

// Beyond this many, every kept view is dropped at once and kept afresh.
constexpr size_t kMaxKept = 4096;

// A tensor seen once: a weak reference to it (another tensor at its address
// later is not it) and its memory then. Kept in a small table of sets of two
// by address, so that a tensor passed to every call and one made for each
// call at an address of the same set (an input) do not keep pushing each
// other out; a newer tensor takes the place of a dead or the older one.
struct Sighting {
  PyObject* weakref = nullptr;  // owned
  void* data = nullptr;
};
struct SightingSet {
  Sighting ways[2];
  size_t older = 0;  // the way to take when both hold live tensors
};
constexpr size_t kSightingSets = 128;

struct Kept {
  nb::object weakref;  // to the tensor; its callback drops this entry
  TensorDescription described;
  std::shared_ptr<const Array> view;
};

struct Views {
  SightingSet seen[kSightingSets];
  std::unordered_map<PyObject*, Kept> by_tensor;
  std::unordered_map<PyObject*, PyObject*> tensor_of_weakref;
  nb::object on_tensor_death;  // the weak references' callback
};

// Never destroyed: views are dropped by ForgetCallViews (at exit, from
// cuxla.torch) while Python still runs, never by a static destructor.
Views& AllViews() {
  static auto* views = new Views();
  return *views;
}

void Drop(Views& views, std::unordered_map<PyObject*, Kept>::iterator it) {
  views.tensor_of_weakref.erase(it->second.weakref.ptr());
  // Out of the map before it goes: letting go of a view may run a producer's
  // deleter, which may run Python code that calls back in here.
  Kept gone = std::move(it->second);
  views.by_tensor.erase(it);
}

void OnTensorDeath(nb::handle weakref) {
  Views& views = AllViews();
  const auto tensor = views.tensor_of_weakref.find(weakref.ptr());
  if (tensor == views.tensor_of_weakref.end()) return;
  const auto it = views.by_tensor.find(tensor->second);
  if (it != views.by_tensor.end()) Drop(views, it);
}

// The object `weakref` refers to (borrowed), or null once it died.
PyObject* Referent(PyObject* weakref) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* referent = nullptr;
  if (PyWeakref_GetRef(weakref, &referent) <= 0) return nullptr;
  Py_DECREF(referent);  // compared by address only, while the caller holds the tensor
  return referent;
#else
  PyObject* referent = PyWeakref_GetObject(weakref);
  return referent == Py_None ? nullptr : referent;
#endif
}

}  // namespace

TensorDescription::TensorDescription(const DLTensor& tensor)
    : data(tensor.data),
      byte_offset(tensor.byte_offset),
      device(tensor.device),
      dtype(tensor.dtype),
      shape(tensor.shape, tensor.shape + tensor.ndim),
      strides(tensor.strides != nullptr ? std::vector<int64_t>(tensor.strides, tensor.strides + tensor.ndim)
                                        : std::vector<int64_t>()) {}

bool TensorDescription::Describes(const DLTensor& tensor) const noexcept {
  DLTensor described{data, device, static_cast<int32_t>(shape.size()), dtype, const_cast<int64_t*>(shape.data()),
                     strides.empty() ? nullptr : const_cast<int64_t*>(strides.data()), byte_offset};
  return interop::SameReading(described, tensor);
}

std::shared_ptr<const Array> FindCallView(nb::handle tensor, const DLTensor& now, const ClientState& state,
                                          const Device& device) {
  Views& views = AllViews();
  const auto it = views.by_tensor.find(tensor.ptr());
  if (it == views.by_tensor.end()) return nullptr;
  const Array& view = *it->second.view;
  if (view.state().get() != &state || &view.device() != &device || !it->second.described.Describes(now)) {
    Drop(views, it);  // of the tensor's memory as it was: not to be held any longer
    return nullptr;
  }
  return it->second.view;
}

bool SeenBefore(nb::handle tensor, const DLTensor& now) {
  SightingSet& set = AllViews().seen[(reinterpret_cast<uintptr_t>(tensor.ptr()) >> 4) % kSightingSets];
  Sighting* free_way = nullptr;  // a way holding nothing, a dead tensor, or this one on other memory
  for (Sighting& way : set.ways) {
    PyObject* referent = way.weakref != nullptr ? Referent(way.weakref) : nullptr;
    if (referent == tensor.ptr() && way.data == now.data) {
      Py_CLEAR(way.weakref);
      way.data = nullptr;
      return true;
    }
    if (referent == nullptr || referent == tensor.ptr()) free_way = &way;
  }
  if (free_way == nullptr) free_way = &set.ways[set.older];
  set.older = free_way == &set.ways[0] ? 1 : 0;  // the other one is older now
  Py_CLEAR(free_way->weakref);
  free_way->weakref = PyWeakref_NewRef(tensor.ptr(), nullptr);
  if (free_way->weakref == nullptr) PyErr_Clear();  // no weak references to it: never kept
  free_way->data = now.data;
  return false;
}

std::shared_ptr<const Array> StoreCallView(nb::handle tensor, TensorDescription described, Array view) {
  auto shared = std::make_shared<const Array>(std::move(view));
  Views& views = AllViews();
  if (views.by_tensor.size() >= kMaxKept) ForgetCallViews();
  if (!views.on_tensor_death.is_valid()) views.on_tensor_death = nb::cpp_function(&OnTensorDeath);
  PyObject* weakref = PyWeakref_NewRef(tensor.ptr(), views.on_tensor_death.ptr());
  if (weakref == nullptr) {
    PyErr_Clear();  // no weak references to this type: nothing tells when it dies
    return shared;
  }
  const auto old = views.by_tensor.find(tensor.ptr());
  if (old != views.by_tensor.end()) Drop(views, old);  // made of the tensor as it was before
  views.tensor_of_weakref.emplace(weakref, tensor.ptr());
  views.by_tensor.emplace(tensor.ptr(), Kept{nb::steal(weakref), std::move(described), shared});
  return shared;
}

void ForgetCallViews() {
  Views& views = AllViews();
  // Moved out first, for the reason Drop gives.
  std::unordered_map<PyObject*, Kept> gone = std::move(views.by_tensor);
  views.by_tensor.clear();
  views.tensor_of_weakref.clear();
}

size_t CallViewCount() { return AllViews().by_tensor.size(); }

}  // namespace cuxla::bindings
