// Built without the CUDA toolkit or gstreamer-cuda-1.0: NVDEC output cannot reach our code.
#include "stages/ingest/nvdec_support.h"

namespace vapipe {

bool nvdec_built_in() { return false; }
std::string prefer_nvdec_decoders() { return {}; }
void sync_cuda_buffer(GstBuffer*) {}
bool share_cuda_context(GstElement*, int, std::string* why) {
  *why = "vapipe was built without the CUDA toolkit or gstreamer-cuda-1.0";
  return false;
}

}  // namespace vapipe
