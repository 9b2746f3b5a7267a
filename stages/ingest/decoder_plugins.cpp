#include "stages/ingest/decoder_plugins.h"

namespace vapipe {

std::string decoder_plugin_load_failure(const GstCaps* caps) {
  if (!caps) return "";
  GList* decoders = gst_element_factory_list_get_elements(GST_ELEMENT_FACTORY_TYPE_DECODER, GST_RANK_MARGINAL);
  GList* takers = gst_element_factory_list_filter(decoders, caps, GST_PAD_SINK, FALSE);
  gst_plugin_feature_list_free(decoders);
  std::string failure;
  for (GList* it = takers; it && failure.empty(); it = it->next) {
    GstPluginFeature* feature = GST_PLUGIN_FEATURE(it->data);
    GstPlugin* plugin = gst_plugin_feature_get_plugin(feature);
    if (!plugin) continue;  // a static plug-in: loaded with the program
    if (!gst_plugin_is_loaded(plugin) && gst_plugin_get_filename(plugin)) {
      const std::string file = gst_plugin_get_filename(plugin);
      GError* error = nullptr;
      if (GstPlugin* loaded = gst_plugin_load_file(file.c_str(), &error)) {
        gst_object_unref(loaded);
      } else {
        failure = std::string(gst_plugin_feature_get_name(feature)) + " (" + file +
                  ") is installed but could not be loaded: " + (error ? error->message : "no reason given");
      }
      if (error) g_error_free(error);
    }
    gst_object_unref(plugin);
  }
  gst_plugin_feature_list_free(takers);
  return failure;
}

}  // namespace vapipe
