// The CUDA preprocessor (host-only header: no CUDA includes, so any file may include it). Same
// contract and the same arithmetic as the CPU reference (bilinear with half-pixel centres, YUV->RGB,
// mean/std), one thread per output pixel, a whole batch of frames per launch, on its own stream.
// Frames and tensors in GPU memory (device pool slots) are used in place; host ones are staged.
// tests/stages/preprocess/cuda_preprocessor_test.cpp checks parity with the CPU implementation
// (ctest label gpu; tolerance 1e-3 in normalised units).
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
