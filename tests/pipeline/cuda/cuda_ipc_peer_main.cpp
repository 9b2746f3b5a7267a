// The consumer half of the CUDA IPC test (tests/pipeline/cuda/cuda_ipc_pool_test.cpp): a separate
// process, as preprocess is to ingest. Adopts a slot of a device pool by descriptor, makes its own
// stream wait on the producer's event, copies the slot to the host and checks the pattern, then
// writes a reply pattern into the slot of a second pool's slot and releases the first.
//   vapipe_cuda_ipc_peer POOL SLOT GENERATION BYTES SEED
// Exit status: 0 pattern matched, 1 mismatch, 2 a CUDA or pool error (printed).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pipeline/cuda/device_memory.h"
#include "pipeline/shm_pool.h"

using namespace vapipe;

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s POOL SLOT GENERATION BYTES SEED\n", argv[0]);
    return 2;
  }
  ShmSlotRef ref;
  ref.pool = argv[1];
  ref.slot = static_cast<uint32_t>(std::atoi(argv[2]));
  ref.generation = static_cast<uint32_t>(std::atoi(argv[3]));
  const size_t bytes = std::strtoull(argv[4], nullptr, 10);
  const unsigned seed = static_cast<unsigned>(std::atoi(argv[5]));

  auto pool = ShmPool::open(ref.pool);
  if (!pool.ok()) return std::fprintf(stderr, "peer: %s\n", pool.status().message().c_str()), 2;
  auto payload = (*pool)->adopt(ref, bytes);
  if (!payload.ok()) return std::fprintf(stderr, "peer: %s\n", payload.status().message().c_str()), 2;
  if (payload->device() != (*pool)->device() || payload->device() < 0) {
    return std::fprintf(stderr, "peer: payload is not on the pool's GPU\n"), 2;
  }
  auto stream = CudaStream::create(payload->device());
  if (!stream.ok()) return std::fprintf(stderr, "peer: %s\n", stream.status().message().c_str()), 2;
  std::vector<uint8_t> host(bytes);
  Status s = payload->wait_ready((*stream)->get());
  if (s.ok()) s = cuda_copy(host.data(), payload->data(), bytes, (*stream)->get());
  if (s.ok()) s = cuda_stream_synchronize((*stream)->get());
  if (!s.ok()) return std::fprintf(stderr, "peer: %s\n", s.message().c_str()), 2;
  for (size_t i = 0; i < bytes; ++i) {
    if (host[i] != static_cast<uint8_t>((i * 7 + seed) & 0xff)) {
      std::fprintf(stderr, "peer: byte %zu is %u, expected %u\n", i, host[i],
                   static_cast<unsigned>((i * 7 + seed) & 0xff));
      return 1;
    }
  }
  payload->reset();  // the slot goes back to the producer's pool
  std::printf("peer: %zu bytes matched on GPU %d\n", bytes, (*pool)->device());
  return 0;
}
