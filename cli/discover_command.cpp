// `vapipe discover`: the ONVIF cameras that answer a WS-Discovery probe, and each one's stream URIs,
// printed as `streams:` entries to paste into a config (cli/onvif.h has the messages).
#include <arpa/inet.h>
#include <cstdint>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>
#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/onvif.h"
#include "cli/open_streams.h"
#include "pipeline/logging.h"
#include "pipeline/stream_uri.h"

namespace vapipe::cli {
namespace {

using onvif::Credentials;
using onvif::Device;
using onvif::Profile;
using onvif::XmlElement;

constexpr const char* kUsage =
    "usage: vapipe discover [--timeout S] [--probe HOST[:PORT]]... [--no-multicast] [--interface ADDR]\n"
    "                       [--user NAME --password-file FILE] [--password-var NAME]\n"
    "                       [--profiles all|smallest|largest] [--open [--open-timeout S]] [--config FILE]\n"
    "                       [--json]\n";

// A UDP socket, closed when it goes.
class UdpSocket {
 public:
  UdpSocket() : fd_(socket(AF_INET, SOCK_DGRAM, 0)) {}
  ~UdpSocket() {
    if (fd_ >= 0) close(fd_);
  }
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

Result<sockaddr_in> resolve_ipv4(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0 || !found) {
    return NotFound("'" + host + "' does not resolve to an IPv4 address (" + gai_strerror(rc) + ")");
  }
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

std::string address_text(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

// This host's IPv4 interface addresses (getifaddrs).
std::vector<onvif::InterfaceAddress> host_interfaces() {
  std::vector<onvif::InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char ip[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, ip, sizeof ip);
    out.push_back({i->ifa_name ? i->ifa_name : "", ip, (i->ifa_flags & IFF_UP) != 0,
                   (i->ifa_flags & IFF_MULTICAST) != 0, (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  freeifaddrs(list);
  return out;
}

struct Found {
  Device device;
  std::string from;  // the answer's source address (IP)
};

// Sends the probe to each target (three times: UDP may lose a probe or its answers) and collects the
// ProbeMatches that arrive until `timeout_s`, one device per endpoint.
// `multicast_from`: the interfaces' addresses a multicast target is sent out of, each in turn (empty:
// the routing table's choice).
Result<std::vector<Found>> probe(const std::vector<sockaddr_in>& targets, const std::vector<std::string>& multicast_from,
                                 double timeout_s) {
  UdpSocket sock;
  if (sock.fd() < 0) return Unavailable(std::string("cannot open a UDP socket: ") + std::strerror(errno));
  const unsigned char ttl = 1, loop = 1;  // the local network only; and this host's own devices
  setsockopt(sock.fd(), IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
  setsockopt(sock.fd(), IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop);
  std::vector<in_addr> interfaces;
  for (const std::string& a : multicast_from) {
    in_addr ifaddr{};
    if (inet_pton(AF_INET, a.c_str(), &ifaddr) != 1) return InvalidArgument("'" + a + "' is not an IPv4 address");
    interfaces.push_back(ifaddr);
  }
  // Many cameras answer at once (each within half a second of the probe, as WS-Discovery has them):
  // room for a few hundred answers before they are read.
  const int want = 4 << 20;
  if (setsockopt(sock.fd(), SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof want) != 0) {
    setsockopt(sock.fd(), SOL_SOCKET, SO_RCVBUF, &want, sizeof want);  // up to net.core.rmem_max
  }
  auto send_all = [&] {
    // A fresh MessageID each time: a camera answers a MessageID once, and an answer lost (UDP, a
    // full buffer) comes again only for a new probe.
    const std::string message = onvif::probe_message("uuid:" + onvif::random_uuid());
    std::string failed;
    auto send_to = [&](const sockaddr_in& t, const std::string& via) {
      if (sendto(sock.fd(), message.data(), message.size(), 0, reinterpret_cast<const sockaddr*>(&t), sizeof t) < 0) {
        failed += (failed.empty() ? "" : "; ") + address_text(t) + via + ": " + std::strerror(errno);
      }
    };
    for (const sockaddr_in& t : targets) {
      if (!IN_MULTICAST(ntohl(t.sin_addr.s_addr)) || interfaces.empty()) {
        send_to(t, "");
        continue;
      }
      for (const in_addr& ifaddr : interfaces) {
        // Each network of this host in turn: an NVR's camera network is rarely its default route's.
        if (setsockopt(sock.fd(), IPPROTO_IP, IP_MULTICAST_IF, &ifaddr, sizeof ifaddr) != 0) {
          failed += (failed.empty() ? "" : "; ") + std::string("the interface of ") + inet_ntoa(ifaddr) + ": " +
                    std::strerror(errno);
          continue;
        }
        send_to(t, std::string(" from ") + inet_ntoa(ifaddr));
      }
    }
    return failed;
  };
  const std::string first_failed = send_all();
  if (!first_failed.empty() && targets.size() == 1 && interfaces.size() <= 1) {
    return Unavailable("cannot send the probe to " + first_failed);
  }
  if (!first_failed.empty()) std::fprintf(stderr, "vapipe discover: cannot send the probe to %s\n", first_failed.c_str());
  // Three probes, a third of the timeout apart.
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  int probes_sent = 1;
  auto next_probe = [&] { return start + std::chrono::duration<double>(timeout_s * probes_sent / 3); };
  std::vector<Found> found;
  std::vector<char> buffer(65536);
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    if (probes_sent < 3 && now >= next_probe()) {
      send_all();
      ++probes_sent;
    }
    const auto until = probes_sent < 3 ? std::min(deadline, next_probe()) : deadline;
    pollfd p{sock.fd(), POLLIN, 0};
    const int wait_ms =
        std::max(1, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()));
    if (poll(&p, 1, wait_ms) <= 0) continue;
    sockaddr_in from{};
    socklen_t from_len = sizeof from;
    const ssize_t n = recvfrom(sock.fd(), buffer.data(), buffer.size(), 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n <= 0) continue;
    auto devices = onvif::parse_probe_matches(std::string(buffer.data(), static_cast<size_t>(n)));
    if (!devices.ok()) {
      std::fprintf(stderr, "vapipe discover: an answer from %s that is not a probe match: %s\n",
                   address_text(from).c_str(), devices.status().message().c_str());
      continue;
    }
    char ip[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
    for (Device& d : *devices) {
      bool seen = false;
      for (const Found& f : found) seen = seen || f.device.endpoint == d.endpoint;
      if (!seen) found.push_back(Found{std::move(d), ip});
    }
  }
  return found;
}

struct Url {
  std::string origin;  // "http://host:port"
  std::string path;    // "/onvif/device_service"
  std::string host;
};
Result<Url> split_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return InvalidArgument("'" + url + "' is not a URL");
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return InvalidArgument("'" + url + "' is not http(s)");
  const size_t path = url.find('/', scheme_end + 3);
  Url u;
  u.origin = url.substr(0, path);
  u.path = path == std::string::npos ? "/" : url.substr(path);
  std::string authority = url.substr(scheme_end + 3, path == std::string::npos ? std::string::npos : path - scheme_end - 3);
  if (!authority.empty() && authority.front() == '[') {
    u.host = authority.substr(0, authority.find(']') + 1);
  } else {
    u.host = authority.substr(0, authority.find(':'));
  }
  return u;
}

// A SOAP call's answer; `refused`: the camera wants (other) credentials (NotAuthorized, HTTP 401).
struct Answer {
  Result<XmlElement> doc = Unavailable("not asked");
  bool refused = false;
};

// A camera's SOAP services, asked with the user's credentials (a WS-Security UsernameToken timed by
// the camera's own clock; HTTP Digest when the camera's web server asks for it instead).
class Camera {
 public:
  explicit Camera(Credentials credentials) : credentials_(std::move(credentials)) {}
  void set_clock_offset(std::time_t offset) { clock_offset_ = offset; }

  Answer call(const std::string& url, const std::string& body, bool authenticated = true) const {
    Answer a;
    auto u = split_url(url);
    if (!u.ok()) {
      a.doc = u.status();
      return a;
    }
    httplib::Client client(u->origin);
    client.set_connection_timeout(3, 0);
    client.set_read_timeout(5, 0);
    client.set_write_timeout(5, 0);
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT  // Debian's cpp-httplib has it (its pkg-config flags)
    client.enable_server_certificate_verification(false);  // cameras' certificates are their own
#endif
    const Credentials none;
    const Credentials& with = authenticated ? credentials_ : none;
    std::string nonce(16, '\0');
    RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size()));
    const std::string envelope =
        onvif::soap_envelope(body, with, onvif::utc_timestamp(std::time(nullptr) + clock_offset_), nonce);
    const std::string action = onvif::soap_action_of(body);
    const std::string type_text =
        "application/soap+xml; charset=utf-8" + (action.empty() ? std::string() : "; action=\"" + action + "\"");
    const char* type = type_text.c_str();
    auto res = client.Post(u->path, envelope, type);
    if (res && res->status == 401 && with.given()) {
      client.set_digest_auth(with.user, with.password);  // its web server's own authentication
      res = client.Post(u->path, envelope, type);
    }
    if (!res) {
      a.doc = Unavailable(url + ": no answer (" + httplib::to_string(res.error()) + ")");
      return a;
    }
    auto doc = onvif::parse_xml(res->body);
    const std::string fault = doc.ok() ? onvif::fault_of(*doc) : "";
    a.refused = res->status == 401 || fault.find("NotAuthorized") != std::string::npos;
    if (!fault.empty()) {
      a.doc = FailedPrecondition(fault);
    } else if (res->status != 200) {
      a.doc = FailedPrecondition("HTTP " + std::to_string(res->status));
    } else {
      a.doc = std::move(doc);
    }
    return a;
  }

 private:
  Credentials credentials_;
  std::time_t clock_offset_ = 0;
};

struct Listed {
  Found found;
  std::string xaddr;
  std::vector<Profile> profiles;
  std::string error;  // why it has no stream URIs
  std::string clock_note;
};

std::string refused_text(const Answer& a, bool have_credentials) {
  const std::string what = a.doc.ok() ? std::string("no error") : a.doc.status().message();
  if (!a.refused) return what;
  return have_credentials ? "the camera refused the user name and password (" + what + ")"
                          : "the camera wants a user name and password (" + what +
                                "): give --user NAME and --password-file FILE";
}

// The device service to ask: the one whose host sent the answer (a camera with several networks lists
// an address of each), else the first http(s) one.
std::string device_service(const Found& f) {
  std::string first;
  for (const std::string& x : f.device.xaddrs) {
    auto u = split_url(x);
    if (!u.ok()) continue;
    if (u->host == f.from) return x;
    if (first.empty()) first = x;
  }
  return first;
}

Listed list_streams(const Found& f, const Credentials& credentials) {
  Listed out{f, device_service(f), {}, "", ""};
  if (out.xaddr.empty()) {
    out.error = "it gave no http(s) address for its device service";
    return out;
  }
  Camera camera(credentials);
  // Its clock first (asked without credentials, as ONVIF allows): a UsernameToken's time must be the
  // camera's, and a camera's clock is often off by minutes or hours.
  bool clock_known = false;
  if (Answer now = camera.call(out.xaddr, onvif::get_system_date_and_time_body(), false); now.doc.ok()) {
    if (auto t = onvif::device_utc_time(*now.doc); t.ok()) {
      clock_known = true;
      const std::time_t offset = *t - std::time(nullptr);
      camera.set_clock_offset(offset);
      if (offset > 60 || offset < -60) {
        out.clock_note = "its clock is " + std::to_string(offset > 0 ? offset : -offset) + " s " +
                         (offset > 0 ? "ahead of" : "behind") + " this machine's";
      }
    }
  }
  Answer capabilities = camera.call(out.xaddr, onvif::get_capabilities_body());
  if (!capabilities.doc.ok() && !capabilities.refused &&
      capabilities.doc.status().code() != StatusCode::kUnavailable) {
    capabilities = camera.call(out.xaddr, onvif::get_services_body());  // a device of GetServices only
  }
  if (!capabilities.doc.ok()) {
    out.error = "its capabilities: " + refused_text(capabilities, credentials.given());
    if (capabilities.refused && credentials.given() && !clock_known) {
      out.error += "; if they are right: the camera did not say its time, and a UsernameToken is refused when the "
                   "two clocks differ by more than a few seconds (set the camera's clock, or NTP)";
    }
    return out;
  }
  auto media = onvif::media_service_of(*capabilities.doc);
  if (!media.ok()) {
    out.error = media.status().message();
    return out;
  }
  Answer profiles_doc = camera.call(*media, onvif::get_profiles_body());
  auto device_url = split_url(out.xaddr);
  auto media_url = split_url(*media);
  if (!profiles_doc.doc.ok() && profiles_doc.doc.status().code() == StatusCode::kUnavailable && device_url.ok() &&
      media_url.ok() && media_url->host != device_url->host) {
    // It names its media service by an address that does not answer here (its other network, an
    // address it had before): the one it was found at.
    const std::string moved = onvif::with_host(*media, device_url->host);
    Answer again = camera.call(moved, onvif::get_profiles_body());
    if (again.doc.ok()) {
      out.clock_note += std::string(out.clock_note.empty() ? "" : "; ") + "its media service " + *media +
                        " did not answer: asked at " + moved;
      media = moved;
      profiles_doc = std::move(again);
    }
  }
  if (!profiles_doc.doc.ok()) {
    out.error = "its media profiles: " + refused_text(profiles_doc, credentials.given());
    return out;
  }
  auto profiles = onvif::profiles_of(*profiles_doc.doc);
  if (!profiles.ok()) {
    out.error = profiles.status().message();
    return out;
  }
  if (profiles->empty()) out.error = "it has no media profiles";
  for (Profile& p : *profiles) {
    Answer uri_doc = camera.call(*media, onvif::get_stream_uri_body(p.token));
    if (!uri_doc.doc.ok()) {
      p.error = refused_text(uri_doc, credentials.given());
      continue;
    }
    auto uri = onvif::stream_uri_of(*uri_doc.doc);
    if (uri.ok()) {
      p.uri = *uri;
    } else {
      p.error = uri.status().message();
    }
  }
  out.profiles = std::move(*profiles);
  return out;
}

std::string describe(const Profile& p) {
  std::string d = "profile '" + p.token + "'" + (p.name.empty() || p.name == p.token ? "" : " (" + p.name + ")");
  std::string video = p.encoding;
  if (p.width > 0 && p.height > 0) video += (video.empty() ? "" : " ") + std::to_string(p.width) + "x" + std::to_string(p.height);
  if (p.fps > 0) {
    char fps[32];
    std::snprintf(fps, sizeof fps, ", %g fps", p.fps);
    video += fps;
  }
  return video.empty() ? d : d + ": " + video;
}

std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

int discover_command(const std::vector<std::string>& args) {
  double timeout_s = 3;
  std::vector<std::string> probes;
  bool multicast = true, json_out = false, open = false;
  long open_timeout_s = 15;
  std::string config_path;
  std::string interface_addr, password_file, password_var = "CAMERA_PASSWORD", which_profiles = "all";
  Credentials credentials;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--timeout" && has_value) {
      char* end = nullptr;
      timeout_s = std::strtod(args[++i].c_str(), &end);
      if (!end || *end || timeout_s <= 0 || timeout_s > 600) {
        std::fprintf(stderr, "vapipe discover: --timeout takes seconds, more than 0 and at most 600\n");
        return 1;
      }
    } else if (a == "--probe" && has_value) {
      probes.push_back(args[++i]);
    } else if (a == "--no-multicast") {
      multicast = false;
    } else if (a == "--interface" && has_value) {
      interface_addr = args[++i];
    } else if (a == "--user" && has_value) {
      credentials.user = args[++i];
    } else if (a == "--password-file" && has_value) {
      password_file = args[++i];
    } else if (a == "--password-var" && has_value) {
      password_var = args[++i];
    } else if (a == "--profiles" && has_value) {
      which_profiles = args[++i];
      if (which_profiles != "all" && which_profiles != "smallest" && which_profiles != "largest") {
        std::fprintf(stderr, "vapipe discover: --profiles takes all, smallest or largest, got '%s'\n",
                     which_profiles.c_str());
        return 1;
      }
    } else if (a == "--open") {
      open = true;
    } else if (a == "--open-timeout" && has_value) {
      char* end = nullptr;
      open_timeout_s = std::strtol(args[++i].c_str(), &end, 10);
      if (!end || *end || open_timeout_s < 1 || open_timeout_s > 3600) {
        std::fprintf(stderr, "vapipe discover: --open-timeout takes whole seconds from 1 to 3600\n");
        return 1;
      }
    } else if (a == "--config" && has_value) {
      config_path = args[++i];
    } else if (a == "--json") {
      json_out = true;
    } else {
      std::fprintf(stderr, "vapipe discover: unexpected argument '%s'\n%s", a.c_str(), kUsage);
      return 1;
    }
  }
  if (credentials.given() != !password_file.empty()) {
    std::fprintf(stderr, "vapipe discover: give --user and --password-file together\n%s", kUsage);
    return 1;
  }
  if (!password_file.empty()) {
    std::ifstream in(password_file);
    if (!in || !std::getline(in, credentials.password) || credentials.password.empty()) {
      std::fprintf(stderr, "vapipe discover: --password-file %s: cannot be read, or its first line is empty\n",
                   password_file.c_str());
      return 1;
    }
    if (!credentials.password.empty() && credentials.password.back() == '\r') credentials.password.pop_back();
  }
  for (char c : password_var) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) {
      std::fprintf(stderr, "vapipe discover: --password-var %s: not an environment variable's name\n",
                   password_var.c_str());
      return 1;
    }
  }
  // --config: a job's streams, read as they are written (no ${VAR} expanded: a password variable unset
  // here is no matter), so that a camera already there is said, and new ids take none of its ids.
  std::vector<std::string> config_ids;
  std::map<std::string, std::string> config_stream_of;  // stream_key -> its id
  if (!config_path.empty()) {
    try {
      const YAML::Node root = YAML::LoadFile(config_path);
      for (const YAML::Node& s : root["streams"]) {
        const std::string id = s["id"] ? s["id"].as<std::string>() : "";
        if (!id.empty()) config_ids.push_back(id);
        if (s["uri"] && !id.empty()) config_stream_of.emplace(onvif::stream_key(s["uri"].as<std::string>()), id);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vapipe discover: --config %s: %s\n", config_path.c_str(), e.what());
      return 1;
    }
  }
  std::vector<sockaddr_in> targets;
  std::string asked;
  std::vector<std::string> multicast_from;
  if (multicast) {
    auto group = resolve_ipv4(onvif::kDiscoveryAddress, onvif::kDiscoveryPort);
    targets.push_back(*group);
    asked = address_text(*group);
    std::string via;
    if (!interface_addr.empty()) {
      in_addr check{};
      if (inet_pton(AF_INET, interface_addr.c_str(), &check) != 1) {
        std::fprintf(stderr, "vapipe discover: --interface %s: not an IPv4 address (give one of this host's)\n",
                     interface_addr.c_str());
        return 1;
      }
      multicast_from.push_back(interface_addr);
    } else {
      for (const onvif::InterfaceAddress& a : onvif::multicast_interfaces(host_interfaces())) {
        multicast_from.push_back(a.address);
        via += (via.empty() ? "" : ", ") + a.name;
      }
    }
    if (!via.empty()) asked += " (" + via + ")";
  }
  for (const std::string& p : probes) {
    const size_t colon = p.rfind(':');
    const std::string host = colon == std::string::npos ? p : p.substr(0, colon);
    const int port = colon == std::string::npos ? onvif::kDiscoveryPort : std::atoi(p.c_str() + colon + 1);
    if (port <= 0 || port > 65535) {
      std::fprintf(stderr, "vapipe discover: --probe %s: expected HOST or HOST:PORT\n", p.c_str());
      return 1;
    }
    auto addr = resolve_ipv4(host, port);
    if (!addr.ok()) {
      std::fprintf(stderr, "vapipe discover: --probe %s: %s\n", p.c_str(), addr.status().message().c_str());
      return 1;
    }
    targets.push_back(*addr);
    asked += (asked.empty() ? "" : " and ") + address_text(*addr);
  }
  if (targets.empty()) {
    std::fprintf(stderr, "vapipe discover: --no-multicast needs a --probe HOST\n");
    return 1;
  }
  const auto started = std::chrono::steady_clock::now();
  auto found = probe(targets, multicast_from, timeout_s);
  if (!found.ok()) {
    std::fprintf(stderr, "vapipe discover: %s\n", found.status().message().c_str());
    return 2;
  }
  // Each camera asked on a thread of its own, 16 at once: one that does not answer (its web server
  // off, a firewall) costs its timeouts, not every camera after it.
  std::vector<Listed> listed(found->size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> askers;
  for (size_t t = 0; t < std::min<size_t>(16, found->size()); ++t) {
    askers.emplace_back([&] {
      for (size_t k; (k = next.fetch_add(1)) < found->size();) listed[k] = list_streams((*found)[k], credentials);
    });
  }
  for (std::thread& t : askers) t.join();
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // --profiles smallest|largest: one stream a camera, by its picture's size (profiles of unknown size
  // and those without a URI are not chosen while another has both).
  bool several_profiles = false;
  for (Listed& l : listed) {
    size_t with_uri = 0;
    for (const Profile& p : l.profiles) with_uri += !p.uri.empty();
    several_profiles = several_profiles || with_uri > 1;
    if (which_profiles == "all" || with_uri < 2) continue;
    const Profile* pick = nullptr;
    for (const Profile& p : l.profiles) {
      if (p.uri.empty()) continue;
      const long area = static_cast<long>(p.width) * p.height;
      const long best = pick ? static_cast<long>(pick->width) * pick->height : -1;
      const bool better = !pick || (area > 0 && (best <= 0 || (which_profiles == "smallest" ? area < best : area > best)));
      if (better) pick = &p;
    }
    std::vector<Profile> kept{*pick};
    l.profiles = std::move(kept);
  }

  // Ids: from each camera's name, else its host; unique across the cameras listed (and the config's).
  std::vector<std::string> ids = config_ids;
  std::vector<std::vector<std::string>> ids_of(listed.size());
  std::vector<std::vector<std::string>> in_config(listed.size());  // the config's id of that stream, or ""
  size_t streams = 0, known = 0;
  for (size_t k = 0; k < listed.size(); ++k) {
    const Listed& l = listed[k];
    auto host = split_url(l.xaddr);
    const std::string base = !l.found.device.name.empty() ? l.found.device.name : host.ok() ? host->host : "camera";
    for (const Profile& p : l.profiles) {
      const auto there = p.uri.empty() ? config_stream_of.end() : config_stream_of.find(onvif::stream_key(p.uri));
      in_config[k].push_back(there == config_stream_of.end() ? "" : there->second);
      if (there != config_stream_of.end()) ++known;
      if (p.uri.empty()) {
        ids_of[k].push_back("");
        continue;
      }
      ids_of[k].push_back(in_config[k].back().empty() ? onvif::stream_id_for(base, ids) : in_config[k].back());
      ids.push_back(ids_of[k].back());
      ++streams;
    }
  }
  // --open: each stream opened for real until its first frame, with the password itself (an RTSP
  // server may want other credentials than the camera's ONVIF service, or none).
  std::map<std::pair<size_t, size_t>, OpenedStream> opened;
  size_t opened_ok = 0;
  if (open && streams > 0) {
    init_logging("discover", "off");  // the readers' own lines would repeat the listing's
    std::vector<StreamConfig> to_open;
    std::vector<std::pair<size_t, size_t>> where;
    for (size_t k = 0; k < listed.size(); ++k) {
      for (size_t j = 0; j < listed[k].profiles.size(); ++j) {
        const Profile& p = listed[k].profiles[j];
        if (p.uri.empty()) continue;
        auto parsed = parse_stream_uri(onvif::uri_with_password(p.uri, credentials.user, credentials.password), "");
        if (!parsed.ok()) {
          opened[{k, j}] = OpenedStream{ids_of[k][j], false, parsed.status().message()};
          continue;
        }
        StreamConfig stream;
        stream.id = ids_of[k][j];
        stream.parsed = *parsed;
        stream.uri = stream.parsed.uri;
        to_open.push_back(std::move(stream));
        where.emplace_back(k, j);
      }
    }
    const std::vector<OpenedStream> results =
        open_each_stream(to_open, IngestConfig{}, std::chrono::seconds(open_timeout_s), 8);
    for (size_t i = 0; i < results.size() && i < where.size(); ++i) opened[where[i]] = results[i];
    for (const auto& [at, o] : opened) opened_ok += o.ok;
  }
  auto opened_of = [&](size_t k, size_t j) -> const OpenedStream* {
    auto it = opened.find({k, j});
    return it == opened.end() ? nullptr : &it->second;
  };
  if (json_out) {
    nlohmann::json cameras = nlohmann::json::array();
    for (size_t k = 0; k < listed.size(); ++k) {
      const Listed& l = listed[k];
      nlohmann::json profiles = nlohmann::json::array();
      for (size_t j = 0; j < l.profiles.size(); ++j) {
        const Profile& p = l.profiles[j];
        profiles.push_back({{"token", p.token}, {"name", p.name}, {"encoding", p.encoding}, {"width", p.width},
                            {"height", p.height}, {"fps", p.fps}, {"uri", p.uri}, {"error", p.error},
                            {"id", ids_of[k][j]},
                            {"in_config", in_config[k][j].empty() ? nlohmann::json() : nlohmann::json(in_config[k][j])},
                            {"opened", opened_of(k, j) ? nlohmann::json{{"ok", opened_of(k, j)->ok},
                                                                        {"what", opened_of(k, j)->what}}
                                                       : nlohmann::json()},
                            {"config_uri", p.uri.empty() ? "" : onvif::uri_with_credentials(p.uri, credentials.user, password_var)}});
      }
      cameras.push_back({{"endpoint", l.found.device.endpoint}, {"name", l.found.device.name},
                         {"hardware", l.found.device.hardware}, {"location", l.found.device.location},
                         {"answered_from", l.found.from}, {"device_service", l.xaddr}, {"error", l.error},
                         {"clock", l.clock_note}, {"profiles", profiles}});
    }
    std::printf("%s\n", nlohmann::json{{"cameras", cameras}, {"seconds", took_s}}.dump(1).c_str());
  } else {
    std::printf("# vapipe discover: %zu camera%s answered a WS-Discovery probe to %s in %.1f s; %zu stream%s%s\n",
                listed.size(), listed.size() == 1 ? "" : "s", asked.c_str(), took_s, streams, streams == 1 ? "" : "s",
                (open && streams > 0 ? ", " + std::to_string(opened_ok) + " of them opened" : std::string()).append(
                    known ? ", " + std::to_string(known) + " already in " + config_path : std::string()).c_str());
    if (streams > known) {
      std::printf("# Paste the ones you want under `streams:` in a job's config (docs/config.md).\n");
      if (several_profiles && which_profiles == "all") {
        // The model sees 224x224 either way; decoding is what a bigger picture costs.
        std::printf("# A camera's smaller profile (its sub stream) classifies as well and decodes at a fraction "
                    "of the cost (640x360: about a ninth of 1080p's): --profiles smallest lists that one alone.\n");
      }
      if (credentials.given()) {
        // The variable's value goes into the URI as it is: what URIs reserve must be escaped there.
        const bool reserved = credentials.password.find_first_of(":@/?#[]%") != std::string::npos;
        std::printf("# The password is read from the environment where the job runs: export %s=...%s\n",
                    password_var.c_str(),
                    reserved ? " (this one holds characters a URI reserves: percent-escape them there, '@' as %40, "
                               "'#' as %23, ':' as %3A, '/' as %2F, '%' as %25)"
                             : "");
      }
    }
    for (size_t k = 0; k < listed.size(); ++k) {
      const Listed& l = listed[k];
      const Device& d = l.found.device;
      std::printf("\n# '%s'%s at %s (%s)%s\n", one_line(d.name.empty() ? "(no name)" : d.name).c_str(),
                  d.hardware.empty() ? "" : (" (" + one_line(d.hardware) + ")").c_str(),
                  one_line(l.xaddr.empty() ? l.found.from : l.xaddr).c_str(), one_line(d.endpoint).c_str(),
                  l.clock_note.empty() ? "" : ("; " + l.clock_note).c_str());
      if (!l.error.empty()) std::printf("#   no stream URIs: %s\n", one_line(l.error).c_str());
      for (size_t j = 0; j < l.profiles.size(); ++j) {
        const Profile& p = l.profiles[j];
        if (p.uri.empty()) {
          std::printf("#   %s: no stream URI: %s\n", one_line(describe(p)).c_str(), one_line(p.error).c_str());
          continue;
        }
        if (!in_config[k][j].empty()) {
          std::printf("#   %s: already in %s as '%s'%s\n", one_line(describe(p)).c_str(), config_path.c_str(),
                      in_config[k][j].c_str(),
                      opened_of(k, j) ? ((opened_of(k, j)->ok ? " (opened: " : " (FAILED to open: ") +
                                         one_line(opened_of(k, j)->what) + ")").c_str()
                                      : "");
          continue;
        }
        std::printf("- id: %s    # %s\n  uri: %s\n", ids_of[k][j].c_str(), one_line(describe(p)).c_str(),
                    yaml_quoted(onvif::uri_with_credentials(one_line(p.uri), credentials.user, password_var)).c_str());
        if (const OpenedStream* o = opened_of(k, j)) {
          std::printf("  # %s %s\n", o->ok ? "opened:" : "FAILED to open:", one_line(o->what).c_str());
        }
      }
    }
  }
  if (listed.empty()) {
    std::fprintf(stderr, "vapipe discover: no camera answered in %.1f s (cameras on another network do not hear a "
                         "multicast probe: give --probe CAMERA_IP; ONVIF may be off in the camera's settings)\n", took_s);
    return 2;
  }
  if (open && streams > 0 && opened_ok == 0) return 3;  // none of them gives a picture
  return streams > 0 ? 0 : 3;
}

}  // namespace vapipe::cli
