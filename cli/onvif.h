// ONVIF, as far as `vapipe discover` needs it: finding the cameras of a network (WS-Discovery: a
// Probe sent to 239.255.255.250:3702, each camera's ProbeMatch answered to the sender) and asking each
// for its stream URIs (SOAP over HTTP: GetSystemDateAndTime, GetCapabilities, GetProfiles,
// GetStreamUri, with a WS-Security UsernameToken), so that an operator gets `streams:` entries to
// paste instead of hunting each model's RTSP path. The messages and their answers are here, free of
// sockets, for the tests; cli/discover_command.cpp does the network.
#pragma once

#include <cstdint>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "pipeline/status.h"

namespace vapipe::onvif {

// An element of an XML document, by its local name (a namespace prefix left out: cameras use their
// own, `tt:`, `trt:`, `ns2:`...). Text is the element's own character data, entities decoded.
struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;  // by local name
  std::string text;
  std::vector<XmlElement> children;

  // The first element named `name` among this one's descendants, depth first (null: none).
  const XmlElement* find(const std::string& name) const;
  // Every such element, in document order.
  std::vector<const XmlElement*> find_all(const std::string& name) const;
  // The text of find(path[0])->find(path[1])..., trimmed; empty when any is missing.
  std::string text_at(const std::vector<std::string>& path) const;
};

// A small XML reader for SOAP answers (no DTDs, no validation). The error says where it stopped.
Result<XmlElement> parse_xml(const std::string& text);

// WS-Discovery.
inline constexpr const char* kDiscoveryAddress = "239.255.255.250";
inline constexpr int kDiscoveryPort = 3702;
// An IPv4 address of one of this host's interfaces.
struct InterfaceAddress {
  std::string name;     // "eth1"
  std::string address;  // "192.168.10.1"
  bool up = false, multicast = false, loopback = false;
};
// Those a multicast probe goes out of, each in turn: every interface that is up and takes multicast,
// loopback left out (this host's own devices hear the probe through the multicast loop), one address
// per interface. An NVR with a camera network of its own (a PoE switch on a second port) is probed on
// both, not only on its default route's.
std::vector<InterfaceAddress> multicast_interfaces(const std::vector<InterfaceAddress>& all);

// A Probe for ONVIF video devices (Types dn:NetworkVideoTransmitter), with this MessageID ("uuid:...").
std::string probe_message(const std::string& message_id);
std::string random_uuid();

struct Device {
  std::string endpoint;             // its EndpointReference (urn:uuid:...), or its first XAddr
  std::vector<std::string> xaddrs;  // device service URLs (http://HOST/onvif/device_service)
  std::string name;                 // from its scopes (onvif://www.onvif.org/name/...), decoded
  std::string hardware;             // onvif://www.onvif.org/hardware/...
  std::string location;             // onvif://www.onvif.org/location/...
};
// The devices of a ProbeMatches answer (empty for any other message). A match without XAddrs is kept
// (it needs a Resolve, which vapipe does not send): it is listed as found, without its streams.
Result<std::vector<Device>> parse_probe_matches(const std::string& xml);

// WS-Security's UsernameToken digest: Base64(SHA-1(nonce + created + password)), `nonce` raw bytes.
std::string password_digest(const std::string& nonce, const std::string& created, const std::string& password);
std::string base64(const std::string& bytes);
// "2026-12-02T15:04:05Z".
std::string utc_timestamp(std::time_t t);

struct Credentials {
  std::string user;
  std::string password;
  bool given() const { return !user.empty(); }
};
// A SOAP 1.2 envelope around `body` (which declares its own namespaces); with credentials, a
// UsernameToken header made at `created` (the camera's clock: its digest is refused when the two
// clocks differ) with `nonce` (raw bytes).
std::string soap_envelope(const std::string& body, const Credentials& credentials = {}, const std::string& created = "",
                          const std::string& nonce = "");

// The SOAP 1.2 action of a request body made below ("http://www.onvif.org/ver10/media/wsdl/GetProfiles"),
// for its Content-Type's `action` parameter (some devices route by it); empty for another body.
std::string soap_action_of(const std::string& body);

// The requests' bodies.
std::string get_system_date_and_time_body();
std::string get_capabilities_body();
std::string get_profiles_body();
std::string get_stream_uri_body(const std::string& profile_token);

// What a SOAP Fault says ("ter:NotAuthorized: Sender not Authorized"); empty when `doc` is none.
std::string fault_of(const XmlElement& doc);
// The camera's clock (GetSystemDateAndTimeResponse's UTCDateTime), as seconds since 1970.
Result<std::time_t> device_utc_time(const XmlElement& doc);
// The media service's URL: GetCapabilitiesResponse's Media XAddr, or GetServicesResponse's service of
// the media namespace (devices that answer only GetServices).
Result<std::string> media_service_of(const XmlElement& doc);
std::string get_services_body();
// `url` with its host (and port, when `host_port` has one) taken from `host_port`: a camera behind NAT
// (or with a second network) names its services by an address the asker cannot reach.
std::string with_host(const std::string& url, const std::string& host_port);

struct Profile {
  std::string token;
  std::string name;
  std::string encoding;  // "H264", "H265", "JPEG"
  int width = 0, height = 0;
  double fps = 0;        // its encoder's FrameRateLimit (0: not said)
  std::string uri;       // from GetStreamUri
  std::string error;     // why there is none
};
Result<std::vector<Profile>> profiles_of(const XmlElement& doc);
Result<std::string> stream_uri_of(const XmlElement& doc);

// What names one camera's stream whatever the URI's form: without credentials, the scheme and host in
// lower case, rtspt/rtspu as rtsp, and a default port left out ("RTSP://u:p@Cam:554/s1" and
// "rtsp://cam/s1" give the same), for finding a discovered stream among a config's.
std::string stream_key(const std::string& uri);

// A stream id for a camera's `name` (or, without one, its host), as vapipe's ids allow:
// "Front Door (east)" -> "front-door-east"; `taken` ids get "-2", "-3", ...
std::string stream_id_for(const std::string& name, const std::vector<std::string>& taken);
// `uri` with "USER:${VAR}@" put in (the user name percent-escaped); a URI with credentials of its own,
// or without a user given, is left as it is.
std::string uri_with_credentials(const std::string& uri, const std::string& user, const std::string& password_var);
// The same with the password itself, percent-escaped (what the config's `${VAR}` must expand to): for
// opening the stream now.
std::string uri_with_password(const std::string& uri, const std::string& user, const std::string& password);

}  // namespace vapipe::onvif
