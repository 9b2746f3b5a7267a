#include "tests/fakes/rtsp_test_server.h"

#include <gst/gst.h>
#include <gst/rtsp-server/rtsp-server.h>

#include <condition_variable>
#include <mutex>

namespace vapipe::testing {

namespace {

// Pattern "cycle": ball, smpte, pinwheel and gamut in turn, 75 frames (2.5 s) each, so that a camera's
// label changes mid-GOP (segments that begin between key frames).
GstPadProbeReturn next_pattern(GstPad*, GstPadProbeInfo*, gpointer source) {
  static const char* const kPatterns[] = {"ball", "smpte", "pinwheel", "gamut"};
  auto* src = static_cast<GstElement*>(source);
  const auto frames = reinterpret_cast<guintptr>(g_object_get_data(G_OBJECT(src), "frames")) + 1;
  g_object_set_data(G_OBJECT(src), "frames", reinterpret_cast<gpointer>(frames));
  if (frames % 75 == 0) gst_util_set_object_arg(G_OBJECT(src), "pattern", kPatterns[(frames / 75) % 4]);
  return GST_PAD_PROBE_OK;
}

void on_media_configure(GstRTSPMediaFactory*, GstRTSPMedia* media, gpointer) {
  GstElement* bin = gst_rtsp_media_get_element(media);
  if (GstElement* src = gst_bin_get_by_name_recurse_up(GST_BIN(bin), "cycle")) {
    GstPad* pad = gst_element_get_static_pad(src, "src");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, &next_pattern, src, nullptr);
    gst_object_unref(pad);
    gst_object_unref(src);
  }
  gst_object_unref(bin);
}

// "h265:OPTIONS" and "mjpeg:OPTIONS" for those codecs, else x264enc's OPTIONS.
std::string encoder_and_payloader(const std::string& encoder_options) {
  if (encoder_options.rfind("h265:", 0) == 0) {
    // No tune=zerolatency of its own: with it x265 refuses option-string=bframes=N.
    // 4:2:0, as cameras send (x265enc would take the test source's 4:4:4).
    return "videoconvert ! video/x-raw,format=I420 ! x265enc speed-preset=ultrafast " + encoder_options.substr(5) +
           " ! rtph265pay name=pay0 pt=96 config-interval=1";
  }
  if (encoder_options.rfind("mjpeg:", 0) == 0) {
    // RTP's JPEG (RFC 2435) carries 4:2:0 and 4:2:2 only: rtpjpegpay refuses what jpegenc makes of 4:4:4.
    return "videoconvert ! video/x-raw,format=I420 ! jpegenc " + encoder_options.substr(6) +
           " ! rtpjpegpay name=pay0 pt=26";
  }
  if (encoder_options == "unavailable") {
    // A media that cannot start (x264enc takes no RGB): the server answers DESCRIBE with 503 Service
    // Unavailable, as a camera at its limit of viewers does.
    return "videoconvert ! video/x-raw,format=RGB ! x264enc ! rtph264pay name=pay0 pt=96";
  }
  return "x264enc tune=zerolatency speed-preset=ultrafast " + encoder_options + " ! rtph264pay name=pay0 pt=96 config-interval=1";
}

}  // namespace

RtspTestServer::RtspTestServer(int port, const std::string& pattern, int width, int height,
                               const std::string& encoder_options, const std::string& credentials,
                               const std::string& tls_cert_file, const std::string& tls_key_file)
    : port_(port), tls_(!tls_cert_file.empty()) {
  gst_init(nullptr, nullptr);
  context_ = g_main_context_new();
  loop_ = g_main_loop_new(context_, FALSE);
  std::mutex m;
  std::condition_variable cv;
  bool ready = false;
  thread_ = std::thread([&, pattern, width, height, encoder_options, credentials, tls_cert_file, tls_key_file] {
    g_main_context_push_thread_default(context_);
    GstRTSPServer* server = gst_rtsp_server_new();
    g_object_set(server, "address", "127.0.0.1", "service", std::to_string(port_).c_str(), nullptr);
    GstRTSPMediaFactory* factory = gst_rtsp_media_factory_new();
    const bool cycle = pattern == "cycle";
    const std::string source = cycle ? "videotestsrc name=cycle is-live=true pattern=ball" : "videotestsrc is-live=true pattern=" + pattern;
    // "...+audio": a G.711 audio track beside the video, as cameras with a microphone send.
    const bool with_audio = encoder_options.size() >= 6 && encoder_options.compare(encoder_options.size() - 6, 6, "+audio") == 0;
    const std::string video_options = with_audio ? encoder_options.substr(0, encoder_options.size() - 6) : encoder_options;
    const std::string audio = with_audio ? " audiotestsrc is-live=true wave=ticks ! audio/x-raw,rate=8000,channels=1 ! "
                                           "alawenc ! rtppcmapay name=pay1 pt=8"
                                         : "";
    // "...+rtploss" (at the end, H.264 only): 5% of the RTP packets are never sent, as a network loses
    // them (the payloader numbers them before, so the client sees the gaps).
    const bool rtp_loss = video_options.size() >= 8 && video_options.compare(video_options.size() - 8, 8, "+rtploss") == 0;
    std::string video = encoder_and_payloader(rtp_loss ? video_options.substr(0, video_options.size() - 8) : video_options);
    if (rtp_loss) {
      video.replace(video.find("name=pay0"), 9, "name=payloader");
      video += " ! identity name=pay0 drop-probability=0.05";
    }
    const std::string launch = "( " + source + " ! video/x-raw,width=" + std::to_string(width) +
                               ",height=" + std::to_string(height) + ",framerate=30/1 ! " + video + audio + " )";
    gst_rtsp_media_factory_set_launch(factory, launch.c_str());
    gst_rtsp_media_factory_set_shared(factory, TRUE);
    if (cycle) g_signal_connect(factory, "media-configure", G_CALLBACK(&on_media_configure), nullptr);
    // "digest:user:password": Digest authentication only (as most cameras ask), else Basic.
    const bool digest = credentials.rfind("digest:", 0) == 0;
    const std::string user_password = digest ? credentials.substr(7) : credentials;
    const size_t colon = user_password.find(':');
    if (colon != std::string::npos || tls_) {
      GstRTSPAuth* auth = gst_rtsp_auth_new();
      GstRTSPToken* token = gst_rtsp_token_new(GST_RTSP_TOKEN_MEDIA_FACTORY_ROLE, G_TYPE_STRING, "viewer", nullptr);
      if (colon != std::string::npos) {
        // The one user may see and make the media; nobody else.
        if (digest) {
          gst_rtsp_auth_add_digest(auth, user_password.substr(0, colon).c_str(), user_password.substr(colon + 1).c_str(),
                                   token);
          gst_rtsp_auth_set_supported_methods(auth, GST_RTSP_AUTH_DIGEST);
        } else {
          gchar* basic =
              gst_rtsp_auth_make_basic(user_password.substr(0, colon).c_str(), user_password.substr(colon + 1).c_str());
          gst_rtsp_auth_add_basic(auth, basic, token);
          g_free(basic);
        }
      } else {
        gst_rtsp_auth_set_default_token(auth, token);  // TLS alone: anyone may watch
      }
      if (tls_) {
        GError* error = nullptr;
        GTlsCertificate* cert = g_tls_certificate_new_from_files(tls_cert_file.c_str(), tls_key_file.c_str(), &error);
        if (cert) {
          gst_rtsp_auth_set_tls_certificate(auth, cert);
          g_object_unref(cert);
        } else {
          g_printerr("rtsp test server: %s\n", error ? error->message : "cannot read the certificate");
          g_clear_error(&error);
        }
      }
      gst_rtsp_token_unref(token);
      gst_rtsp_server_set_auth(server, auth);
      g_object_unref(auth);
      gst_rtsp_media_factory_add_role(factory, "viewer", GST_RTSP_PERM_MEDIA_FACTORY_ACCESS, G_TYPE_BOOLEAN, TRUE,
                                      GST_RTSP_PERM_MEDIA_FACTORY_CONSTRUCT, G_TYPE_BOOLEAN, TRUE, nullptr);
    }
    GstRTSPMountPoints* mounts = gst_rtsp_server_get_mount_points(server);
    gst_rtsp_mount_points_add_factory(mounts, "/test", factory);
    g_object_unref(mounts);
    const guint id = gst_rtsp_server_attach(server, context_);
    {
      std::lock_guard<std::mutex> lock(m);
      ok_ = id != 0;
      ready = true;
    }
    cv.notify_one();
    if (id != 0) g_main_loop_run(loop_);
    if (id != 0) {
      if (GSource* source = g_main_context_find_source_by_id(context_, id)) g_source_destroy(source);
    }
    g_object_unref(server);
    g_main_context_pop_thread_default(context_);
  });
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return ready; });
}

RtspTestServer::~RtspTestServer() {
  g_main_loop_quit(loop_);
  if (thread_.joinable()) thread_.join();
  g_main_loop_unref(loop_);
  g_main_context_unref(context_);
}

}  // namespace vapipe::testing
