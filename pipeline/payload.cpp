#include "pipeline/payload.h"

#include <vector>

namespace vapipe {
namespace {

class HeapStorage final : public PayloadStorage {
 public:
  explicit HeapStorage(size_t size) : bytes_(size) {}
  std::byte* data() override { return bytes_.data(); }
  size_t capacity() const override { return bytes_.size(); }

 private:
  std::vector<std::byte> bytes_;
};

}  // namespace

Payload Payload::heap(size_t size) { return Payload(std::make_shared<HeapStorage>(size), size); }

}  // namespace vapipe
