#include "pipeline/stream_uri.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace vapipe {
namespace {

// "~/videos/a.mp4" in a config is the user's, as in a shell; it was taken relative to the config's
// folder ("/etc/vapipe/~/videos/a.mp4").
TEST(StreamUri, APathStartingWithATildeIsInAHomeFolder) {
  const char* saved = std::getenv("HOME");
  const std::string before = saved ? saved : "";
  setenv("HOME", "/home/operator", 1);
  EXPECT_EQ(expand_home("~/videos/a.mp4"), "/home/operator/videos/a.mp4");
  EXPECT_EQ(expand_home("~"), "/home/operator");
  EXPECT_EQ(expand_home("~root/a.mp4"), "/root/a.mp4");
  EXPECT_EQ(expand_home("~no-such-user-here/a.mp4"), "~no-such-user-here/a.mp4");
  EXPECT_EQ(expand_home("videos/~/a.mp4"), "videos/~/a.mp4");
  auto parsed = parse_stream_uri("~/videos/lobby 1.mp4", "/etc/vapipe");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->uri, "file:///home/operator/videos/lobby%201.mp4");
  if (saved) {
    setenv("HOME", before.c_str(), 1);
  } else {
    unsetenv("HOME");
  }
}

// What no URI may hold as it is (a space in an NVR's channel name, a non-ASCII path) is percent-escaped
// in a network URI, as a browser does; what is already escaped, and reserved characters, stay.
TEST(StreamUri, ANetworkUriWithSpacesOrNonAsciiIsEscaped) {
  for (const auto& [given, sent] : std::vector<std::pair<std::string, std::string>>{
           {"rtsp://10.0.0.1:554/Camera 1", "rtsp://10.0.0.1:554/Camera%201"},
           {"rtsp://10.0.0.1/cam\xC3\xA9ra?channel=1&subtype=0", "rtsp://10.0.0.1/cam%C3%A9ra?channel=1&subtype=0"},
           {"rtsp://admin:p%40ss@10.0.0.1/Streaming/Channels/101", "rtsp://admin:p%40ss@10.0.0.1/Streaming/Channels/101"},
           {"http://host/a%20b.mp4", "http://host/a%20b.mp4"},
           {"rtsp://[fe80::1]:554/live", "rtsp://[fe80::1]:554/live"}}) {
    auto parsed = parse_stream_uri(given, "");
    ASSERT_TRUE(parsed.ok()) << given << ": " << parsed.status().message();
    EXPECT_EQ(parsed->uri, sent) << given;
  }
}

TEST(StreamUri, TestUriParameters) {
  auto u = parse_stream_uri("test://ball?frames=5&width=320&height=200&fps=25&motion=sweep&speed=-3&format=NV12&live=true", "");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->kind, UriKind::kTest);
  EXPECT_EQ(u->test.pattern, "ball");
  EXPECT_EQ(u->test.frames, 5u);
  EXPECT_EQ(u->test.width, 320u);
  EXPECT_EQ(u->test.height, 200u);
  EXPECT_EQ(u->test.fps, 25u);
  EXPECT_EQ(u->test.motion, "sweep");
  EXPECT_EQ(u->test.speed, -3);
  EXPECT_EQ(u->test.format, "NV12");
  EXPECT_TRUE(u->test.live);
}

TEST(StreamUri, RejectsUnknownParameterAndBadValues) {
  EXPECT_FALSE(parse_stream_uri("test://ball?colour=red", "").ok());
  EXPECT_FALSE(parse_stream_uri("test://ball?width=abc", "").ok());
  EXPECT_FALSE(parse_stream_uri("test://ball?format=YUY2", "").ok());
  EXPECT_FALSE(parse_stream_uri("file://relative/path.mp4", "").ok());
  EXPECT_FALSE(parse_stream_uri("", "").ok());
}

// A video file served over HTTP (a recording on a web server, an object store's presigned URL) ends;
// a camera's HTTP stream, an MPEG-TS or an HLS playlist may not.
TEST(StreamUri, AVideoFileOverHttpIsToldByItsPathsExtension) {
  for (const char* file : {"http://nvr.local/exports/gate.mp4", "https://bucket.example/a/b.MKV", "http://h:8080/x/clip.mov#t=3",
                           "https://cdn.example/v.webm",
                           // an object store's presigned link to a recording (its query signs it)
                           "https://bucket.s3.amazonaws.com/a/b.mp4?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc",
                           "https://storage.googleapis.com/b/v.mp4?X-Goog-Algorithm=x&X-Goog-Signature=s",
                           "https://acct.blob.core.windows.net/c/v.mp4?sv=2022-11-02&se=2026-12-08&sr=b&sp=r&sig=x%3D",
                           "https://d1.cloudfront.net/v.mp4?Expires=1&Signature=s&Key-Pair-Id=K"}) {
    EXPECT_TRUE(names_a_video_file_over_http(file)) << file;
  }
  // (a query: go2rtc's live fragmented MP4 of a camera is /api/stream.mp4?src=cam1; HTTP-FLV is live)
  for (const char* stream : {"http://cam/video.cgi", "http://cam/mjpg/video.mjpg", "http://tv/live.ts", "https://cdn/live.m3u8",
                             "http://cam.mp4", "http://h/a.mp4/stream", "rtsp://cam/a.mp4", "file:///a.mp4", "http://h/?f=a.mp4",
                             "http://go2rtc:1984/api/stream.mp4?src=cam1", "http://srs/live/cam1.flv",
                             "http://go2rtc:1984/api/stream.mp4?src=cam1&signature_of=x"}) {
    EXPECT_FALSE(names_a_video_file_over_http(stream)) << stream;
  }
}

TEST(StreamUri, ClassifiesFileAndNetworkUris) {
  auto f = parse_stream_uri("file:///a/b%20c.mp4", "");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, UriKind::kFile);
  EXPECT_EQ(file_uri_path(f->uri), "/a/b c.mp4");
  auto n = parse_stream_uri("rtsp://cam.local:8554/live", "");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->kind, UriKind::kNetwork);
  auto p = parse_stream_uri("../clips/x.mkv", "/jobs/a");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->uri, "file:///jobs/clips/x.mkv");
}

// Archive files are named by people and cameras: "Camera 1 #2 50% été.mp4". A plain path becomes a
// file:// URI with what URIs reserve escaped (uridecodebin found no such file otherwise), and the
// path comes back whole from it.
TEST(StreamUri, APlainPathWithSpacesHashesPercentsOrAccentsBecomesAnEscapedFileUri) {
  const std::string path = "/data/Camera 1 #2 50% \xC3\xA9t\xC3\xA9?.mp4";
  auto p = parse_stream_uri(path, "");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, UriKind::kFile);
  EXPECT_EQ(p->uri, "file:///data/Camera%201%20%232%2050%25%20%C3%A9t%C3%A9%3F.mp4");
  EXPECT_EQ(file_uri_path(p->uri), path);
  // What needs no escape stays as it is.
  auto plain = parse_stream_uri("/data/cam-1_(2024)+x@y,z.mp4", "");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->uri, "file:///data/cam-1_(2024)+x@y,z.mp4");
}

// Camera passwords hold '@', '#', '/' or '?' (and ${CAMERA_PASSWORD} puts them in unescaped): the URI
// then names another host or is cut short, and rtspsrc says only that no server answered. Refused at
// load, saying what to escape, without the password; escaped, the same password is accepted.
TEST(StreamUri, AnUnescapedAtHashSlashOrQuestionMarkInAPasswordIsRefusedWithoutShowingIt) {
  for (const std::string password : {"p@ss", "p#ss", "p/ss", "p?ss", "p@ss#w:rd"}) {
    auto p = parse_stream_uri("rtsp://admin:" + password + "@10.0.0.5:554/stream1", "");
    ASSERT_FALSE(p.ok()) << password;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message().find(password), std::string::npos) << p.status().message();
    const char* escape = password.find('@') != std::string::npos ? "%40" : password.find('/') != std::string::npos ? "%2F" : "%23";
    EXPECT_NE(p.status().message().find(escape), std::string::npos)
        << password << ": " << p.status().message();
  }
  // A '/' with an '@' in it: the host was read from inside the password (the log then showed its rest).
  for (const std::string uri : {"rtsp://admin:p@s/s@127.0.0.1:40301/stream1", "rtsp://admin:p@ss:w/o%rd@127.0.0.1:40301/s",
                                "rtsp://admin:p@s/s@10.0.0.5/stream1"}) {
    auto p = parse_stream_uri(uri, "");
    ASSERT_FALSE(p.ok()) << uri;
    EXPECT_NE(p.status().message().find("holds a '/' (its authority ends there, and the host is read from inside it): "
                                        "write it as %2F (percent-escaped), and an '@' as %40"), std::string::npos)
        << p.status().message();
  }
  // A password whose part before its '/' reads as a port (digits), or a user name with a '/': the same.
  for (const std::string uri : {"rtsp://admin:2024/07@192.168.1.10:554/live", "rtsp://admin:12/34@cam.local:554/live",
                                "rtsp://ad/min:abcd@192.168.1.10/live"}) {
    auto p = parse_stream_uri(uri, "");
    ASSERT_FALSE(p.ok()) << uri;
    EXPECT_NE(p.status().message().find("holds a '/' (its authority ends there, and the host is read from inside it): "
                                        "write it as %2F (percent-escaped)"), std::string::npos)
        << p.status().message();
    EXPECT_EQ(p.status().message().find("2024/07"), std::string::npos);
  }
  for (const std::string password : {"50%off", "pass%", "a%4"}) {  // a '%' that starts no escape
    auto p = parse_stream_uri("rtsp://admin:" + password + "@10.0.0.5:554/stream1", "");
    ASSERT_FALSE(p.ok()) << password;
    EXPECT_NE(p.status().message().find("holds a '%' that starts no escape: write it as %25"), std::string::npos)
        << p.status().message();
    EXPECT_EQ(p.status().message().find(password), std::string::npos) << p.status().message();
  }
  for (const std::string uri : {"rtsp://admin:p%40ss%23w%3Ard@10.0.0.5:554/stream1", "rtsp://admin:secret@cam/ch1?x=@",
                                "rtsp://10.0.0.5:554/live@main", "http://host/a@b.mp4", "rtsp://[fe80::1]:554/s",
                                "udp://@239.0.0.1:5000", "rtsp://admin@cam.local/s", "rtsps://u:p:q@cam:322/s",
                                "rtsp://admin:pw@cam/live@main", "http://u:p@host/a@b.mp4"}) {
    EXPECT_TRUE(parse_stream_uri(uri, "").ok()) << uri;
  }
  EXPECT_FALSE(parse_stream_uri("rtsp://cam.local:abc/s", "").ok());
}

TEST(StreamUri, RedactsCredentials) {
  EXPECT_EQ(redact_uri("rtsp://admin:hunter2@10.1.2.3:554/ch1?x=@"), "rtsp://***@10.1.2.3:554/ch1?x=@");
  EXPECT_EQ(redact_uri("rtsp://10.1.2.3/ch1"), "rtsp://10.1.2.3/ch1");
  EXPECT_EQ(redact_uri("file:///a@b.mp4"), "file:///a@b.mp4");
}

// A camera's CGI password and a signed URL's token in the query: their values hidden, the keys and the
// rest of the URL kept (found 2026-12-07: in validate's output, ingest's log and every event's uri).
TEST(StreamUri, RedactsTheSecretsOfAQuery) {
  EXPECT_EQ(redact_uri("http://cam/cgi-bin/CGIStream.cgi?cmd=GetMJStream&usr=admin&pwd=PwdInQuery77"),
            "http://cam/cgi-bin/CGIStream.cgi?cmd=GetMJStream&usr=admin&pwd=***");
  EXPECT_EQ(redact_uri("https://cdn.example/live/index.m3u8?token=SignedTok88&Signature=Sig99&Key-Pair-Id=K#frag"),
            "https://cdn.example/live/index.m3u8?token=***&Signature=***&Key-Pair-Id=***#frag");
  EXPECT_EQ(redact_uri("https://s3/b/v.mp4?X-Amz-Credential=AK%2F1&X-Amz-Date=20261207&X-Amz-Signature=ab12"),
            "https://s3/b/v.mp4?X-Amz-Credential=***&X-Amz-Date=20261207&X-Amz-Signature=***");
  EXPECT_EQ(redact_uri("rtsp://u:p@cam/live?channel=1&subtype=0&auth_token=t"),
            "rtsp://***@cam/live?channel=1&subtype=0&auth_token=***");
  EXPECT_EQ(redact_uri("http://go2rtc:1984/api/stream.mp4?src=gate"), "http://go2rtc:1984/api/stream.mp4?src=gate");
  EXPECT_EQ(redact_uri("http://cam/x?pwd="), "http://cam/x?pwd=");  // (nothing to hide)
  EXPECT_EQ(redact_uri("test://ball?frames=10&key=3"), "test://ball?frames=10&key=3");  // a source's settings
}

// Two streams of one camera (two regions of it, say) open two connections and decode it twice: named
// so, credentials aside; files and test sources are not connections.
TEST(StreamUri, NamesTheNetworkSourcesThatSeveralStreamsRead) {
  const auto shared = shared_network_sources({{"door", "rtsp://admin:secret@10.0.0.5/stream1"},
                                              {"yard", "rtsp://10.0.0.6/stream1"},
                                              {"till", "rtsp://viewer:other@10.0.0.5/stream1"},
                                              {"clip", "file:///data/a.mp4"},
                                              {"clip-left", "file:///data/a.mp4"},
                                              {"syn", "test://ball"},
                                              {"syn2", "test://ball"},
                                              {"shelf", "rtsp://10.0.0.5/stream1"}});
  ASSERT_EQ(shared.size(), 1u);
  EXPECT_EQ(shared[0].uri, "rtsp://10.0.0.5/stream1");
  EXPECT_EQ(shared[0].stream_ids, (std::vector<std::string>{"door", "till", "shelf"}));
  const std::string text = describe(shared[0]);
  EXPECT_EQ(text.rfind("streams 'door', 'till' and 'shelf' read the same source rtsp://10.0.0.5/stream1: ", 0), 0u)
      << text;
  EXPECT_EQ(text.find("secret"), std::string::npos);
  EXPECT_TRUE(shared_network_sources({{"a", "rtsp://h/x"}, {"b", "rtsp://h/y"}}).empty());
}

}  // namespace
}  // namespace vapipe
