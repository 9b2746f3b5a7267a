#define GST_USE_UNSTABLE_API 1
#include "stages/ingest/nvdec_support.h"

#include <cuda_runtime_api.h>
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudamemory.h>
#include <gst/cuda/gstcudautils.h>

#include <cstring>
#include <map>
#include <mutex>

namespace vapipe {
namespace {

// One wrapped context per GPU per process, shared by every stream's pipeline.
struct SharedContexts {
  std::mutex mutex;
  std::map<int, GstCudaContext*> by_gpu;  // owned (one reference each), for the process lifetime
};
SharedContexts& shared_contexts() {
  static SharedContexts s;
  return s;
}

GstCudaContext* primary_context(int gpu, std::string* why) {
  SharedContexts& s = shared_contexts();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (auto it = s.by_gpu.find(gpu); it != s.by_gpu.end()) return it->second;
  if (!gst_cuda_load_library()) {
    *why = "GStreamer's CUDA library cannot load libcuda (no NVIDIA driver?)";
    return nullptr;
  }
  // Make the runtime create (or reuse) GPU `gpu`'s primary context, current on this thread; take it
  // off the thread's stack to learn its handle, then put it back.
  cudaError_t err = cudaSetDevice(gpu);
  if (err == cudaSuccess) err = cudaFree(nullptr);
  if (err != cudaSuccess) {
    *why = std::string("cannot start CUDA on GPU ") + std::to_string(gpu) + ": " + cudaGetErrorString(err);
    return nullptr;
  }
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  if (CuCtxPopCurrent(&ctx) != CUDA_SUCCESS || !ctx || CuCtxPushCurrent(ctx) != CUDA_SUCCESS ||
      CuDeviceGet(&device, gpu) != CUDA_SUCCESS) {
    *why = "cannot find the primary CUDA context of GPU " + std::to_string(gpu);
    return nullptr;
  }
  GstCudaContext* wrapped = gst_cuda_context_new_wrapped(ctx, device);
  if (!wrapped) {
    *why = "gst_cuda_context_new_wrapped failed for GPU " + std::to_string(gpu);
    return nullptr;
  }
  s.by_gpu[gpu] = wrapped;
  return wrapped;
}

GstBusSyncReply on_bus_message(GstBus*, GstMessage* msg, gpointer user) {
  if (GST_MESSAGE_TYPE(msg) != GST_MESSAGE_NEED_CONTEXT) return GST_BUS_PASS;
  const gchar* type = nullptr;
  if (!gst_message_parse_context_type(msg, &type) || std::strcmp(type, GST_CUDA_CONTEXT_TYPE) != 0) {
    return GST_BUS_PASS;
  }
  auto* context = static_cast<GstCudaContext*>(user);
  GstContext* gst_context = gst_context_new_cuda_context(context);
  gst_element_set_context(GST_ELEMENT(GST_MESSAGE_SRC(msg)), gst_context);
  gst_context_unref(gst_context);
  return GST_BUS_PASS;
}

}  // namespace

bool nvdec_built_in() { return true; }

std::string prefer_nvdec_decoders() {
  static std::once_flag once;
  static std::string found;
  std::call_once(once, [] {
    // Every GPU's decoders: nvcodec registers the first GPU's as nvh264dec and lowers the others' rank
    // (nvh264device1dec ...), which would leave another GPU's lane to a software decoder.
    GList* decoders = gst_element_factory_list_get_elements(GST_ELEMENT_FACTORY_TYPE_DECODER, GST_RANK_NONE);
    for (GList* l = decoders; l; l = l->next) {
      GstPluginFeature* f = GST_PLUGIN_FEATURE(l->data);
      const gchar* plugin = gst_plugin_feature_get_plugin_name(f);
      if (!plugin || std::strcmp(plugin, "nvcodec") != 0) continue;
      gst_plugin_feature_set_rank(f, GST_RANK_PRIMARY + 100);
      found += (found.empty() ? "" : ", ") + std::string(gst_plugin_feature_get_name(f));
    }
    gst_plugin_feature_list_free(decoders);
  });
  return found;
}

void sync_cuda_buffer(GstBuffer* buffer) {
#if GST_CHECK_VERSION(1, 24, 0)
  for (guint i = 0; i < gst_buffer_n_memory(buffer); ++i) {
    GstMemory* mem = gst_buffer_peek_memory(buffer, i);
    if (gst_is_cuda_memory(mem)) gst_cuda_memory_sync(GST_CUDA_MEMORY_CAST(mem));
  }
#else
  (void)buffer;
#endif
}

bool share_cuda_context(GstElement* pipeline, int gpu, std::string* why) {
  GstCudaContext* context = primary_context(gpu, why);
  if (!context) return false;
  GstBus* bus = gst_element_get_bus(pipeline);
  gst_bus_set_sync_handler(bus, &on_bus_message, context, nullptr);
  gst_object_unref(bus);
  return true;
}

}  // namespace vapipe
