// A real RTSP server on loopback (gst-rtsp-server) for tests: serves a videotestsrc pattern as
// H.264 over RTP at rtsp://127.0.0.1:PORT/test. Runs its own GLib main loop on a thread.
#pragma once

#include <string>
#include <thread>

typedef struct _GMainLoop GMainLoop;
typedef struct _GMainContext GMainContext;

namespace vapipe::testing {

class RtspTestServer {
 public:
  // `pattern`: a videotestsrc pattern, or "cycle" (four of them in turn, 2.5 s each); frames are paced
  // in real time (is-live). `encoder_options`:
  // x264enc's, for its GOP (a key frame every 15 frames by default; "intra-refresh=true" refreshes by
  // intra slices instead, with no key frame after the first), and caps after it: "bframes=2 !
  // video/x-h264,profile=main" sends B-frames (the payloader would otherwise settle on baseline).
  // Other codecs, as cameras send: "h265:OPTIONS" (x265enc's OPTIONS: "tune=zerolatency
  // key-int-max=15", or "key-int-max=15 option-string=bframes=2" for B-frames), "mjpeg:OPTIONS"
  // (jpegenc's: "quality=80"), each over its own RTP payloader. "...+audio" (at the end): a G.711 audio
  // track too, as a camera with a microphone sends. "...+rtploss" (at the end, H.264): 5% of its RTP
  // packets are never sent, as a lossy network drops them.
  // `credentials` ("user:password"): clients must give them (basic authentication; "digest:user:password":
  // digest authentication, as most cameras ask); "": anyone.
  // `tls_cert_file` and `tls_key_file` (PEM): RTSP over TLS (rtsps://) with that certificate.
  RtspTestServer(int port, const std::string& pattern, int width = 320, int height = 240,
                 const std::string& encoder_options = "key-int-max=15", const std::string& credentials = "",
                 const std::string& tls_cert_file = "", const std::string& tls_key_file = "");
  ~RtspTestServer();
  bool ok() const { return ok_; }
  std::string uri() const { return (tls_ ? "rtsps://" : "rtsp://") + std::string("127.0.0.1:") + std::to_string(port_) + "/test"; }

 private:
  int port_;
  bool tls_ = false;
  bool ok_ = false;
  GMainContext* context_ = nullptr;
  GMainLoop* loop_ = nullptr;
  std::thread thread_;
};

}  // namespace vapipe::testing
