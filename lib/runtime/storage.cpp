#include "nimble/runtime/storage.hpp"

#include "runtime/object_pool.hpp"
#include "support/check.hpp"

namespace nimble {

Ref<Storage> Storage::allocate(std::size_t nbytes, Device device) {
  return allocate(nbytes, allocator_for(device));
}

Ref<Storage> Storage::allocate(std::size_t nbytes, Allocator& allocator) {
  void* data = allocator.allocate(nbytes);
  // If creating the handle throws (bad_alloc), give the block back.
  try {
    return Ref<Storage>(new Storage(data, nbytes, allocator.device(), &allocator), Ref<Storage>::fresh);
  } catch (...) {
    allocator.deallocate(data, nbytes);
    throw;
  }
}

Ref<Storage> Storage::borrow(void* data, std::size_t nbytes, Device device) {
  if (data == nullptr && nbytes != 0)
    throw_error(ErrorKind::invalid_argument,
                "borrowed memory: expected a non-null pointer for {} bytes, got nullptr", nbytes);
  return Ref<Storage>(new Storage(data, nbytes, device, nullptr), Ref<Storage>::fresh);
}

void* Storage::operator new(std::size_t bytes) { return detail::pool_allocate(bytes); }

void Storage::operator delete(void* p, std::size_t bytes) noexcept { detail::pool_deallocate(p, bytes); }

Storage::~Storage() {
  if (allocator_) allocator_->deallocate(data_, nbytes_);
}

}  // namespace nimble
