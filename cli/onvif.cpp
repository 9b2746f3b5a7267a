#include "cli/onvif.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>

namespace vapipe::onvif {
namespace {

std::string local_name(const std::string& qualified) {
  const size_t colon = qualified.find(':');
  return colon == std::string::npos ? qualified : qualified.substr(colon + 1);
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// What XML escapes, in text and attribute values.
std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

void append_utf8(std::string& out, unsigned long cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class XmlReader {
 public:
  explicit XmlReader(const std::string& text) : s_(text) {}

  Result<XmlElement> document() {
    if (starts("\xEF\xBB\xBF")) pos_ = 3;  // a UTF-8 byte order mark, as some web servers send
    skip_misc();
    if (pos_ >= s_.size() || s_[pos_] != '<') return error("no element");
    XmlElement root;
    if (Status st = element(root, 0); !st.ok()) return st;
    skip_misc();
    if (pos_ < s_.size()) return error("text after the document's element");
    return root;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;

  Status error(const std::string& what) const {
    return InvalidArgument("not XML that can be read: " + what + " at byte " + std::to_string(pos_));
  }
  bool starts(const char* p) const { return s_.compare(pos_, std::char_traits<char>::length(p), p) == 0; }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool skip_past(const char* end) {
    const size_t at = s_.find(end, pos_);
    if (at == std::string::npos) return false;
    pos_ = at + std::char_traits<char>::length(end);
    return true;
  }
  // Declarations, comments, processing instructions and blanks between elements.
  void skip_misc() {
    for (;;) {
      skip_space();
      if (starts("<?")) {
        if (!skip_past("?>")) pos_ = s_.size();
      } else if (starts("<!--")) {
        if (!skip_past("-->")) pos_ = s_.size();
      } else if (starts("<!DOCTYPE")) {
        if (!skip_past(">")) pos_ = s_.size();
      } else {
        return;
      }
    }
  }
  std::string name() {
    const size_t b = pos_;
    while (pos_ < s_.size() && !std::isspace(static_cast<unsigned char>(s_[pos_])) && s_[pos_] != '>' &&
           s_[pos_] != '/' && s_[pos_] != '=') {
      ++pos_;
    }
    return s_.substr(b, pos_ - b);
  }
  Result<std::string> decode(const std::string& raw) const {
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      // Some cameras write a URI's '&' unescaped ("...?channel=1&subtype=0"): an '&' that starts no
      // entity is taken as itself, as browsers do, rather than losing the answer.
      const size_t semi = raw.find(';', i);
      const std::string ent = semi == std::string::npos || semi - i > 12 ? "" : raw.substr(i + 1, semi - i - 1);
      const bool named = ent == "amp" || ent == "lt" || ent == "gt" || ent == "quot" || ent == "apos";
      if (!named && (ent.empty() || ent[0] != '#')) {
        out += '&';
        continue;
      }
      if (ent == "amp") out += '&';
      else if (ent == "lt") out += '<';
      else if (ent == "gt") out += '>';
      else if (ent == "quot") out += '"';
      else if (ent == "apos") out += '\'';
      else if (!ent.empty() && ent[0] == '#') {
        char* end = nullptr;
        const bool hex = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X');
        const unsigned long cp = std::strtoul(ent.c_str() + (hex ? 2 : 1), &end, hex ? 16 : 10);
        if (!end || *end != '\0' || cp > 0x10FFFF) return error("a character reference '&" + ent + ";'");
        append_utf8(out, cp);
      }
      i = semi;
    }
    return out;
  }
  Status element(XmlElement& e, int depth) {
    if (depth > 64) return error("elements nested deeper than 64");
    ++pos_;  // '<'
    e.name = local_name(name());
    if (e.name.empty()) return error("an element without a name");
    for (;;) {
      skip_space();
      if (pos_ >= s_.size()) return error("the end inside the tag <" + e.name + ">");
      if (starts("/>")) {
        pos_ += 2;
        return Status();
      }
      if (s_[pos_] == '>') {
        ++pos_;
        break;
      }
      const std::string attr = name();
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '=') return error("an attribute without a value in <" + e.name + ">");
      ++pos_;
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) return error("an unquoted attribute value");
      const char quote = s_[pos_++];
      const size_t end = s_.find(quote, pos_);
      if (end == std::string::npos) return error("an attribute value that does not end");
      auto value = decode(s_.substr(pos_, end - pos_));
      if (!value.ok()) return value.status();
      pos_ = end + 1;
      if (attr.rfind("xmlns", 0) != 0) e.attributes[local_name(attr)] = *value;
    }
    // Content: text, CDATA, comments, children, then the end tag.
    for (;;) {
      if (pos_ >= s_.size()) return error("the end before </" + e.name + ">");
      if (starts("</")) {
        pos_ += 2;
        const std::string closing = local_name(name());
        skip_space();
        if (closing != e.name || pos_ >= s_.size() || s_[pos_] != '>') {
          return error("</" + closing + "> where </" + e.name + "> was due");
        }
        ++pos_;
        return Status();
      }
      if (starts("<!--")) {
        if (!skip_past("-->")) return error("a comment that does not end");
      } else if (starts("<![CDATA[")) {
        pos_ += 9;
        const size_t end = s_.find("]]>", pos_);
        if (end == std::string::npos) return error("a CDATA section that does not end");
        e.text += s_.substr(pos_, end - pos_);
        pos_ = end + 3;
      } else if (starts("<?")) {
        if (!skip_past("?>")) return error("a processing instruction that does not end");
      } else if (s_[pos_] == '<') {
        e.children.emplace_back();
        if (Status st = element(e.children.back(), depth + 1); !st.ok()) return st;
      } else {
        const size_t end = s_.find('<', pos_);
        if (end == std::string::npos) return error("the end inside <" + e.name + ">");
        auto text = decode(s_.substr(pos_, end - pos_));
        if (!text.ok()) return text.status();
        e.text += *text;
        pos_ = end;
      }
    }
  }
};

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string> split_blanks(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    const size_t b = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > b) out.push_back(s.substr(b, i - b));
  }
  return out;
}

constexpr const char* kSoapNamespaces =
    "xmlns:s=\"http://www.w3.org/2003/05/soap-envelope\" "
    "xmlns:tds=\"http://www.onvif.org/ver10/device/wsdl\" "
    "xmlns:trt=\"http://www.onvif.org/ver10/media/wsdl\" "
    "xmlns:tt=\"http://www.onvif.org/ver10/schema\"";

}  // namespace

const XmlElement* XmlElement::find(const std::string& wanted) const {
  for (const XmlElement& c : children) {
    if (c.name == wanted) return &c;
    if (const XmlElement* deeper = c.find(wanted)) return deeper;
  }
  return nullptr;
}

std::vector<const XmlElement*> XmlElement::find_all(const std::string& wanted) const {
  std::vector<const XmlElement*> out;
  std::function<void(const XmlElement&)> walk = [&](const XmlElement& e) {
    for (const XmlElement& c : e.children) {
      if (c.name == wanted) out.push_back(&c);
      walk(c);
    }
  };
  walk(*this);
  return out;
}

std::string XmlElement::text_at(const std::vector<std::string>& path) const {
  const XmlElement* at = this;
  for (const std::string& p : path) {
    at = at->find(p);
    if (!at) return "";
  }
  return trim(at->text);
}

Result<XmlElement> parse_xml(const std::string& text) { return XmlReader(text).document(); }

std::string random_uuid() {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof b) != 1) {
    for (unsigned char& c : b) c = static_cast<unsigned char>(std::rand());
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0F) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3F) | 0x80);
  char out[37];
  std::snprintf(out, sizeof out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

std::vector<InterfaceAddress> multicast_interfaces(const std::vector<InterfaceAddress>& all) {
  std::vector<InterfaceAddress> out;
  std::set<std::string> names;
  for (const InterfaceAddress& a : all) {
    if (!a.up || !a.multicast || a.loopback || a.address.empty() || !names.insert(a.name).second) continue;
    out.push_back(a);
  }
  return out;
}

std::string probe_message(const std::string& message_id) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
         "<s:Envelope xmlns:s=\"http://www.w3.org/2003/05/soap-envelope\" "
         "xmlns:a=\"http://schemas.xmlsoap.org/ws/2004/08/addressing\" "
         "xmlns:d=\"http://schemas.xmlsoap.org/ws/2005/04/discovery\" "
         "xmlns:dn=\"http://www.onvif.org/ver10/network/wsdl\">"
         "<s:Header>"
         "<a:Action s:mustUnderstand=\"1\">http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe</a:Action>"
         "<a:MessageID>" + xml_escape(message_id) + "</a:MessageID>"
         "<a:ReplyTo><a:Address>http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous</a:Address></a:ReplyTo>"
         "<a:To s:mustUnderstand=\"1\">urn:schemas-xmlsoap-org:ws:2005:04:discovery</a:To>"
         "</s:Header>"
         "<s:Body><d:Probe><d:Types>dn:NetworkVideoTransmitter</d:Types></d:Probe></s:Body>"
         "</s:Envelope>";
}

Result<std::vector<Device>> parse_probe_matches(const std::string& xml) {
  auto doc = parse_xml(xml);
  if (!doc.ok()) return doc.status();
  std::vector<Device> devices;
  for (const XmlElement* match : doc->find_all("ProbeMatch")) {
    Device d;
    d.endpoint = match->text_at({"EndpointReference", "Address"});
    d.xaddrs = split_blanks(match->text_at({"XAddrs"}));
    for (const std::string& scope : split_blanks(match->text_at({"Scopes"}))) {
      for (const auto& [key, field] : {std::pair<const char*, std::string*>{"onvif://www.onvif.org/name/", &d.name},
                                       {"onvif://www.onvif.org/hardware/", &d.hardware},
                                       {"onvif://www.onvif.org/location/", &d.location}}) {
        const std::string prefix = key;
        if (scope.rfind(prefix, 0) == 0 && field->empty()) *field = percent_decode(scope.substr(prefix.size()));
      }
    }
    if (d.endpoint.empty() && !d.xaddrs.empty()) d.endpoint = d.xaddrs.front();
    devices.push_back(std::move(d));
  }
  return devices;
}

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

std::string password_digest(const std::string& nonce, const std::string& created, const std::string& password) {
  const std::string input = nonce + created + password;
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  return base64(std::string(reinterpret_cast<const char*>(digest), sizeof digest));
}

std::string utc_timestamp(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

std::string soap_envelope(const std::string& body, const Credentials& credentials, const std::string& created,
                          const std::string& nonce) {
  std::string header;
  if (credentials.given()) {
    header =
        "<s:Header><wsse:Security s:mustUnderstand=\"1\" "
        "xmlns:wsse=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd\" "
        "xmlns:wsu=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd\">"
        "<wsse:UsernameToken><wsse:Username>" + xml_escape(credentials.user) + "</wsse:Username>"
        "<wsse:Password Type=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0"
        "#PasswordDigest\">" + password_digest(nonce, created, credentials.password) + "</wsse:Password>"
        "<wsse:Nonce EncodingType=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-soap-message-security-1.0"
        "#Base64Binary\">" + base64(nonce) + "</wsse:Nonce>"
        "<wsu:Created>" + xml_escape(created) + "</wsu:Created>"
        "</wsse:UsernameToken></wsse:Security></s:Header>";
  }
  return std::string("<?xml version=\"1.0\" encoding=\"UTF-8\"?><s:Envelope ") + kSoapNamespaces + ">" + header +
         "<s:Body>" + body + "</s:Body></s:Envelope>";
}

std::string soap_action_of(const std::string& body) {
  for (const auto& [prefix, ns] : {std::pair<const char*, const char*>{"<tds:", "http://www.onvif.org/ver10/device/wsdl/"},
                                   {"<trt:", "http://www.onvif.org/ver10/media/wsdl/"}}) {
    const std::string p = prefix;
    if (body.rfind(p, 0) != 0) continue;
    const size_t end = body.find_first_of(" />", p.size());
    if (end == std::string::npos) return "";
    return ns + body.substr(p.size(), end - p.size());
  }
  return "";
}

std::string get_system_date_and_time_body() { return "<tds:GetSystemDateAndTime/>"; }
std::string get_capabilities_body() {
  return "<tds:GetCapabilities><tds:Category>Media</tds:Category></tds:GetCapabilities>";
}
std::string get_profiles_body() { return "<trt:GetProfiles/>"; }
std::string get_stream_uri_body(const std::string& profile_token) {
  return "<trt:GetStreamUri><trt:StreamSetup><tt:Stream>RTP-Unicast</tt:Stream><tt:Transport><tt:Protocol>RTSP"
         "</tt:Protocol></tt:Transport></trt:StreamSetup><trt:ProfileToken>" + xml_escape(profile_token) +
         "</trt:ProfileToken></trt:GetStreamUri>";
}

std::string fault_of(const XmlElement& doc) {
  const XmlElement* fault = doc.name == "Fault" ? &doc : doc.find("Fault");
  if (!fault) return "";
  // SOAP 1.2: Code/Value, Code/Subcode/Value (ONVIF's ter:NotAuthorized), Reason/Text; SOAP 1.1:
  // faultcode, faultstring.
  std::string code;
  if (const XmlElement* c = fault->find("Code")) {
    code = c->text_at({"Value"});
    for (const XmlElement* sub = c->find("Subcode"); sub; sub = sub->find("Subcode")) {
      const std::string v = sub->text_at({"Value"});
      if (!v.empty()) code = v;
    }
  }
  if (code.empty()) code = fault->text_at({"faultcode"});
  std::string reason = fault->text_at({"Reason", "Text"});
  if (reason.empty()) reason = fault->text_at({"faultstring"});
  if (code.empty()) return reason.empty() ? "a SOAP fault" : reason;
  return reason.empty() ? code : code + ": " + reason;
}

Result<std::time_t> device_utc_time(const XmlElement& doc) {
  const XmlElement* utc = doc.find("UTCDateTime");
  if (!utc) return NotFound("no UTCDateTime in its GetSystemDateAndTime answer");
  std::tm tm{};
  try {
    tm.tm_year = std::stoi(utc->text_at({"Date", "Year"})) - 1900;
    tm.tm_mon = std::stoi(utc->text_at({"Date", "Month"})) - 1;
    tm.tm_mday = std::stoi(utc->text_at({"Date", "Day"}));
    tm.tm_hour = std::stoi(utc->text_at({"Time", "Hour"}));
    tm.tm_min = std::stoi(utc->text_at({"Time", "Minute"}));
    tm.tm_sec = std::stoi(utc->text_at({"Time", "Second"}));
  } catch (const std::exception&) {
    return InvalidArgument("its UTCDateTime is not a date and time");
  }
  return timegm(&tm);
}

Result<std::string> media_service_of(const XmlElement& doc) {
  for (const XmlElement* service : doc.find_all("Service")) {
    if (service->text_at({"Namespace"}) == "http://www.onvif.org/ver10/media/wsdl") {
      const std::string xaddr = service->text_at({"XAddr"});
      if (!xaddr.empty()) return xaddr;
    }
  }
  const XmlElement* media = doc.find("Media");
  const std::string xaddr = media ? media->text_at({"XAddr"}) : "";
  if (xaddr.empty()) return NotFound("its capabilities name no media service");
  return xaddr;
}

std::string get_services_body() {
  return "<tds:GetServices><tds:IncludeCapability>false</tds:IncludeCapability></tds:GetServices>";
}

std::string with_host(const std::string& url, const std::string& host_port) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos || host_port.empty()) return url;
  const size_t authority = scheme_end + 3;
  const size_t path = url.find_first_of("/?#", authority);
  const std::string old = url.substr(authority, path == std::string::npos ? std::string::npos : path - authority);
  const size_t at = old.rfind('@');
  const std::string userinfo = at == std::string::npos ? "" : old.substr(0, at + 1);
  std::string hostport = at == std::string::npos ? old : old.substr(at + 1);
  // Keep the URL's own port unless `host_port` gives one.
  const bool bracketed = !host_port.empty() && host_port.front() == '[';
  const size_t new_colon = bracketed ? host_port.find("]:") : host_port.rfind(':');
  std::string replaced = host_port;
  if (new_colon == std::string::npos) {
    const bool old_bracketed = !hostport.empty() && hostport.front() == '[';
    const size_t old_colon = old_bracketed ? hostport.find("]:") : hostport.rfind(':');
    if (old_colon != std::string::npos) replaced += hostport.substr(old_colon + (old_bracketed ? 1 : 0));
  }
  return url.substr(0, authority) + userinfo + replaced + (path == std::string::npos ? "" : url.substr(path));
}

Result<std::vector<Profile>> profiles_of(const XmlElement& doc) {
  const XmlElement* response = doc.name == "GetProfilesResponse" ? &doc : doc.find("GetProfilesResponse");
  if (!response) return NotFound("no GetProfilesResponse in its answer");
  std::vector<Profile> out;
  for (const XmlElement& p : response->children) {
    if (p.name != "Profiles") continue;
    Profile profile;
    const auto token = p.attributes.find("token");
    if (token != p.attributes.end()) profile.token = token->second;
    for (const XmlElement& c : p.children) {
      if (c.name == "Name") profile.name = trim(c.text);
    }
    if (const XmlElement* video = p.find("VideoEncoderConfiguration")) {
      profile.encoding = video->text_at({"Encoding"});
      try {
        const std::string w = video->text_at({"Resolution", "Width"}), h = video->text_at({"Resolution", "Height"});
        if (!w.empty()) profile.width = std::stoi(w);
        if (!h.empty()) profile.height = std::stoi(h);
        const std::string fps = video->text_at({"RateControl", "FrameRateLimit"});
        if (!fps.empty()) profile.fps = std::stod(fps);
      } catch (const std::exception&) {
        // A value that is not a number: not shown.
      }
    }
    if (!profile.token.empty()) out.push_back(std::move(profile));
  }
  return out;
}

Result<std::string> stream_uri_of(const XmlElement& doc) {
  const std::string uri = doc.text_at({"MediaUri", "Uri"});
  if (uri.empty()) return NotFound("no MediaUri in its GetStreamUri answer");
  return uri;
}

std::string stream_key(const std::string& uri) {
  const size_t scheme_end = uri.find("://");
  if (scheme_end == std::string::npos) return uri;
  std::string scheme = uri.substr(0, scheme_end);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme == "rtspt" || scheme == "rtspu") scheme = "rtsp";
  const size_t authority = scheme_end + 3;
  const size_t path = uri.find_first_of("/?#", authority);
  std::string host = uri.substr(authority, path == std::string::npos ? std::string::npos : path - authority);
  if (const size_t at = host.rfind('@'); at != std::string::npos) host = host.substr(at + 1);
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string default_port = scheme == "rtsp" ? ":554" : scheme == "http" ? ":80" : scheme == "https" ? ":443"
                                   : scheme == "rtsps" ? ":322" : "";
  if (!default_port.empty() && host.size() > default_port.size() &&
      host.compare(host.size() - default_port.size(), default_port.size(), default_port) == 0) {
    host.resize(host.size() - default_port.size());
  }
  std::string rest = path == std::string::npos ? "/" : uri.substr(path);
  if (rest.empty() || rest[0] != '/') rest = "/" + rest;
  return scheme + "://" + host + rest;
}

std::string stream_id_for(const std::string& name, const std::vector<std::string>& taken) {
  std::string id;
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) && u < 0x80) {
      id += static_cast<char>(std::tolower(u));
    } else if (c == '_' || c == '.') {
      id += c;
    } else if (!id.empty() && id.back() != '-') {
      id += '-';
    }
  }
  while (!id.empty() && (id.back() == '-' || id.back() == '.')) id.pop_back();
  while (!id.empty() && id.front() == '.') id.erase(id.begin());
  if (id.size() > 56) id.resize(56);
  if (id.empty()) id = "camera";
  const std::set<std::string> used(taken.begin(), taken.end());
  if (!used.count(id)) return id;
  for (int n = 2;; ++n) {
    const std::string candidate = id + "-" + std::to_string(n);
    if (!used.count(candidate)) return candidate;
  }
}

namespace {

std::string percent_escape_user_info(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      escaped += c;
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", u);
      escaped += hex;
    }
  }
  return escaped;
}

// `uri` with "USER_INFO@" put before its host, unless it has credentials of its own.
std::string with_user_info(const std::string& uri, const std::string& user_info) {
  const size_t scheme_end = uri.find("://");
  if (scheme_end == std::string::npos) return uri;
  const size_t authority = scheme_end + 3;
  const size_t path = uri.find_first_of("/?#", authority);
  const std::string host = uri.substr(authority, path == std::string::npos ? std::string::npos : path - authority);
  if (host.find('@') != std::string::npos) return uri;  // the camera put credentials of its own in it
  return uri.substr(0, authority) + user_info + "@" + uri.substr(authority);
}

}  // namespace

std::string uri_with_credentials(const std::string& uri, const std::string& user, const std::string& password_var) {
  if (user.empty()) return uri;
  return with_user_info(uri, percent_escape_user_info(user) + ":${" + password_var + "}");
}

std::string uri_with_password(const std::string& uri, const std::string& user, const std::string& password) {
  if (user.empty()) return uri;
  return with_user_info(uri, percent_escape_user_info(user) + ":" + percent_escape_user_info(password));
}

}  // namespace vapipe::onvif
