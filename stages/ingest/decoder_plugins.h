// Why no decoder took a stream GStreamer's registry has a decoder for: the decoder's plug-in failed to
// load. Under an address-space limit (`ulimit -v`, a batch slot's memory cap) libav's plug-in cannot
// map its libraries, and decodebin then says only "missing a plug-in", for a plug-in that is installed.
#pragma once

#include <gst/gst.h>

#include <string>

namespace vapipe {

// "avdec_h264 (/usr/lib/.../libgstlibav.so) is installed but could not be loaded: <the loader's words>"
// for the first decoder listed for `caps` whose plug-in does not load; "" when there is none (no decoder
// is installed for them, or those there load).
std::string decoder_plugin_load_failure(const GstCaps* caps);

}  // namespace vapipe
