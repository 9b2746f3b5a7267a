// Built when no CUDA toolkit was found at configure time.
#include "stages/preprocess/cuda/cuda_preprocessor.h"

namespace vapipe {

bool cuda_available(std::string* why) {
  if (why) *why = "this build has no CUDA support (no CUDA toolkit was found when it was configured)";
  return false;
}

Result<std::unique_ptr<Preprocessor>> make_cuda_preprocessor(const PreprocessSpec&, int) {
  std::string why;
  cuda_available(&why);
  return FailedPrecondition(why);
}

}  // namespace vapipe
