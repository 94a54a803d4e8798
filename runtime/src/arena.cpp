// Arena: one aligned block carved into tensors at planned byte offsets.
#include <cstring>
#include <limits>
#include <string>

#include "internal.hpp"
#include "wfgen/runtime.hpp"

namespace wfgen::rt {

Arena::Arena(std::size_t bytes) : block_(Storage::allocate(bytes)) {}

std::size_t Arena::capacity() const noexcept { return block_ ? block_->bytes() : 0; }

std::byte* Arena::data() const noexcept { return block_ ? block_->data() : nullptr; }

void Arena::reserve(std::size_t bytes) {
  if (bytes <= capacity()) return;
  // Tensors already issued share the old block and keep it alive; they keep
  // working but no longer see writes made through the new block.
  std::shared_ptr<Storage> bigger = Storage::allocate(bytes);
  if (block_ && block_->bytes()) std::memcpy(bigger->data(), block_->data(), block_->bytes());
  block_ = std::move(bigger);
}

Tensor Arena::tensor(DType dtype, const Shape& shape, std::size_t byte_offset) const {
  const std::size_t esize = dtype_size(dtype);
  if (byte_offset % esize != 0) {
    fail(ErrorCode::InvalidArgument,
                "arena byte offset " + std::to_string(byte_offset) + " is not a multiple of " +
                    std::to_string(esize) + ", expected an offset aligned for dtype " +
                    dtype_name(dtype));
  }
  const auto numel = static_cast<std::size_t>(internal::checked_numel(shape, "arena tensor"));
  if (numel > std::numeric_limits<std::size_t>::max() / esize) {
    fail(ErrorCode::SizeOverflow, "arena tensor of shape " + shape_to_string(shape) + " is too large");
  }
  const std::size_t need = numel * esize;
  if (byte_offset > capacity() || need > capacity() - byte_offset) {
    fail(ErrorCode::OutOfBounds,
                "arena tensor of shape " + shape_to_string(shape) + " needs bytes [" +
                    std::to_string(byte_offset) + ", " + std::to_string(byte_offset + need) +
                    "), but the arena holds " + std::to_string(capacity()) + " bytes");
  }
  // The slice holds a reference to the block, so the tensor stays valid even
  // if the arena grows or is destroyed first.
  auto slice = Storage::borrow(block_ ? block_->data() + byte_offset : nullptr, need, block_);
  return Tensor::make(dtype, shape, std::move(slice), 0);
}

}  // namespace wfgen::rt
