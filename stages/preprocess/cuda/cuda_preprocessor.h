// The CUDA preprocessor (host-only header: no CUDA includes, so any file may include it). Same
// contract and the same arithmetic as the CPU reference (bilinear with half-pixel centres, YUV->RGB,
// mean/std), one thread per output pixel; tests/stages/preprocess/cuda_preprocessor_test.cpp checks
// parity with the CPU implementation (ctest label gpu). Today it takes host frames (copied to the
// device, processed, copied back); frames that already live on the device come with NVDEC.
#pragma once

#include <memory>
#include <string>

#include "stages/preprocess/preprocessor.h"

namespace vapipe {

// Whether this build has CUDA sources and the machine has a usable device; `why` says which fails.
bool cuda_available(std::string* why = nullptr);

// kFailedPrecondition (naming the reason) when CUDA is not built in or no device is usable.
Result<std::unique_ptr<Preprocessor>> make_cuda_preprocessor(const PreprocessSpec& spec, int device = 0);

}  // namespace vapipe
