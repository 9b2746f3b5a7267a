// vapipe_rtsp_test_server PORT PATTERN [WIDTH HEIGHT [X264_OPTIONS [USER:PASSWORD [CERT.pem KEY.pem]]]]: a
// real RTSP server on loopback for the end-to-end tests; runs until SIGTERM/SIGINT. X264_OPTIONS: its
// GOP ("intra-refresh=true"), or B-frames ("bframes=2 ! video/x-h264,profile=main"); "h265:X265_OPTIONS"
// or "mjpeg:JPEGENC_OPTIONS" for those codecs. USER:PASSWORD: clients must give them (basic authentication; "" for
// none). CERT.pem KEY.pem: RTSP over TLS (rtsps://) with that certificate.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "tests/fakes/rtsp_test_server.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PORT PATTERN [WIDTH HEIGHT [X264_OPTIONS [USER:PASSWORD [CERT.pem KEY.pem]]]]\n",
                 argv[0]);
    return 1;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // the server thread inherits the mask
  vapipe::testing::RtspTestServer server(std::atoi(argv[1]), argv[2], argc > 4 ? std::atoi(argv[3]) : 320,
                                         argc > 4 ? std::atoi(argv[4]) : 240, argc > 5 ? argv[5] : "key-int-max=15",
                                         argc > 6 ? argv[6] : "", argc > 8 ? argv[7] : "", argc > 8 ? argv[8] : "");
  if (!server.ok()) {
    std::fprintf(stderr, "cannot serve on port %s\n", argv[1]);
    return 1;
  }
  std::printf("%s\n", server.uri().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}
