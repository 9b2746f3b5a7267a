#include "cli/onvif.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vapipe::onvif {
namespace {

// As an Axis camera answers a probe (its own prefixes; several scopes; two addresses).
const char* kProbeMatches = R"(<?xml version="1.0" encoding="UTF-8"?>
<SOAP-ENV:Envelope xmlns:SOAP-ENV="http://www.w3.org/2003/05/soap-envelope"
    xmlns:wsa="http://schemas.xmlsoap.org/ws/2004/08/addressing"
    xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery" xmlns:dn="http://www.onvif.org/ver10/network/wsdl">
  <SOAP-ENV:Header>
    <wsa:MessageID>uuid:4f7c1c1e-5b2a-11ed-8000-accc8e123456</wsa:MessageID>
    <wsa:RelatesTo>uuid:0a6dc791-2be6-4991-9af1-454778a1917a</wsa:RelatesTo>
    <wsa:Action>http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches</wsa:Action>
  </SOAP-ENV:Header>
  <SOAP-ENV:Body>
    <d:ProbeMatches>
      <d:ProbeMatch>
        <wsa:EndpointReference><wsa:Address>urn:uuid:cc5c3b8e-accc-8e12-3456-accc8e123456</wsa:Address></wsa:EndpointReference>
        <d:Types>dn:NetworkVideoTransmitter tds:Device</d:Types>
        <d:Scopes>onvif://www.onvif.org/type/video_encoder onvif://www.onvif.org/name/Front%20door%20(east)
          onvif://www.onvif.org/hardware/P3245-LV onvif://www.onvif.org/location/country/sweden</d:Scopes>
        <d:XAddrs>http://192.168.1.20/onvif/device_service http://[fe80::1]/onvif/device_service</d:XAddrs>
        <d:MetadataVersion>1</d:MetadataVersion>
      </d:ProbeMatch>
    </d:ProbeMatches>
  </SOAP-ENV:Body>
</SOAP-ENV:Envelope>)";

TEST(OnvifXml, ReadsElementsByLocalNameWithEntitiesCdataAndComments) {
  auto doc = parse_xml(
      "<?xml version='1.0'?><!-- a comment --><a:Root xmlns:a='urn:x' a:id=\"7\"><b:Uri>rtsp://cam/s?a=1&amp;b=2"
      "</b:Uri><Empty/><Text><![CDATA[<not a tag>]]> &#233;&#x41;</Text><!-- between --></a:Root>");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->name, "Root");
  EXPECT_EQ(doc->attributes.at("id"), "7");
  EXPECT_EQ(doc->attributes.count("a"), 0u);  // xmlns declarations are not attributes
  EXPECT_EQ(doc->text_at({"Uri"}), "rtsp://cam/s?a=1&b=2");
  ASSERT_NE(doc->find("Empty"), nullptr);
  EXPECT_EQ(doc->text_at({"Text"}), "<not a tag> \xC3\xA9" "A");
  EXPECT_EQ(doc->text_at({"Missing", "Uri"}), "");
  // As some cameras write them: a byte order mark, and a URI's '&' unescaped (taken as itself).
  auto sloppy = parse_xml("\xEF\xBB\xBF<Uri>rtsp://cam/cam/realmonitor?channel=1&subtype=0&amp;x=1&#38;y=2 &nbsp;</Uri>");
  ASSERT_TRUE(sloppy.ok()) << sloppy.status().message();
  EXPECT_EQ(sloppy->text, "rtsp://cam/cam/realmonitor?channel=1&subtype=0&x=1&y=2 &nbsp;");
  for (const char* bad : {"", "<a>", "<a></b>", "<a x=1/>", "<a>&#xZZ;</a>", "<a/>trailing"}) {
    auto r = parse_xml(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("at byte"), std::string::npos) << r.status().message();
    }
  }
}

TEST(OnvifDiscovery, TheProbeAsksForVideoTransmittersAndAnswersGiveTheirAddressesAndNames) {
  auto probe = parse_xml(probe_message("uuid:1234"));
  ASSERT_TRUE(probe.ok()) << probe.status().message();
  EXPECT_EQ(probe->text_at({"Header", "MessageID"}), "uuid:1234");
  EXPECT_EQ(probe->text_at({"Header", "Action"}), "http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe");
  EXPECT_EQ(probe->text_at({"Body", "Probe", "Types"}), "dn:NetworkVideoTransmitter");
  EXPECT_NE(random_uuid(), random_uuid());
  EXPECT_EQ(random_uuid().size(), 36u);

  auto devices = parse_probe_matches(kProbeMatches);
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  ASSERT_EQ(devices->size(), 1u);
  const Device& d = devices->front();
  EXPECT_EQ(d.endpoint, "urn:uuid:cc5c3b8e-accc-8e12-3456-accc8e123456");
  EXPECT_EQ(d.xaddrs, (std::vector<std::string>{"http://192.168.1.20/onvif/device_service",
                                                "http://[fe80::1]/onvif/device_service"}));
  EXPECT_EQ(d.name, "Front door (east)");
  EXPECT_EQ(d.hardware, "P3245-LV");
  EXPECT_EQ(d.location, "country/sweden");
  // Another device's Probe (a camera that also searches) is not an answer.
  auto none = parse_probe_matches(probe_message("uuid:5678"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(parse_probe_matches("not xml").ok());
}

// The UsernameToken digest against Python's hashlib (base64(sha1(nonce + created + password))).
// An NVR: its uplink, a camera network of its own, a second address on that port, a link that is down,
// loopback, and a tunnel that takes no multicast.
TEST(OnvifDiscovery, TheMulticastProbeGoesOutOfEveryNetworkThatTakesIt) {
  const std::vector<InterfaceAddress> all = {
      {"lo", "127.0.0.1", true, false, true},        {"eth0", "10.1.0.20", true, true, false},
      {"eth1", "192.168.10.1", true, true, false},   {"eth1", "192.168.11.1", true, true, false},
      {"eth2", "172.16.0.1", false, true, false},    {"wg0", "10.200.0.2", true, false, false}};
  std::vector<std::string> chosen;
  for (const InterfaceAddress& a : multicast_interfaces(all)) chosen.push_back(a.name + " " + a.address);
  EXPECT_EQ(chosen, (std::vector<std::string>{"eth0 10.1.0.20", "eth1 192.168.10.1"}));
  EXPECT_TRUE(multicast_interfaces({{"lo", "127.0.0.1", true, false, true}}).empty());
}

TEST(OnvifSoap, TheUsernameTokenCarriesTheDigestOfNonceCreatedAndPassword) {
  EXPECT_EQ(password_digest("0123456789abcdef", "2026-12-02T15:04:05Z", "Adm1n@2024#"), "7MxpxP6/+OZ7vqZtYSCHrAMkcrY=");
  EXPECT_EQ(base64("0123456789abcdef"), "MDEyMzQ1Njc4OWFiY2RlZg==");
  EXPECT_EQ(utc_timestamp(1796223845), "2026-12-02T15:04:05Z");
  auto doc = parse_xml(soap_envelope(get_stream_uri_body("main<1>"), Credentials{"admin&co", "Adm1n@2024#"},
                                     "2026-12-02T15:04:05Z", "0123456789abcdef"));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->text_at({"Security", "UsernameToken", "Username"}), "admin&co");
  EXPECT_EQ(doc->text_at({"Security", "UsernameToken", "Password"}), "7MxpxP6/+OZ7vqZtYSCHrAMkcrY=");
  EXPECT_EQ(doc->text_at({"Security", "UsernameToken", "Nonce"}), "MDEyMzQ1Njc4OWFiY2RlZg==");
  EXPECT_EQ(doc->text_at({"Security", "UsernameToken", "Created"}), "2026-12-02T15:04:05Z");
  EXPECT_EQ(doc->text_at({"Body", "GetStreamUri", "ProfileToken"}), "main<1>");
  EXPECT_EQ(doc->text_at({"Body", "GetStreamUri", "StreamSetup", "Transport", "Protocol"}), "RTSP");
  EXPECT_EQ(soap_action_of(get_stream_uri_body("x")), "http://www.onvif.org/ver10/media/wsdl/GetStreamUri");
  EXPECT_EQ(soap_action_of(get_profiles_body()), "http://www.onvif.org/ver10/media/wsdl/GetProfiles");
  EXPECT_EQ(soap_action_of(get_system_date_and_time_body()),
            "http://www.onvif.org/ver10/device/wsdl/GetSystemDateAndTime");
  EXPECT_EQ(soap_action_of(get_capabilities_body()), "http://www.onvif.org/ver10/device/wsdl/GetCapabilities");
  EXPECT_EQ(soap_action_of("<other/>"), "");
  // Without credentials, no header.
  auto plain = parse_xml(soap_envelope(get_system_date_and_time_body()));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->find("Security"), nullptr);
  ASSERT_NE(plain->find("GetSystemDateAndTime"), nullptr);
}

TEST(OnvifSoap, AnswersGiveTheClockTheMediaServiceTheProfilesAndTheirUris) {
  auto clock = parse_xml(
      "<e:Envelope xmlns:e='x'><e:Body><tds:GetSystemDateAndTimeResponse><tds:SystemDateAndTime>"
      "<tt:DateTimeType>NTP</tt:DateTimeType><tt:UTCDateTime><tt:Time><tt:Hour>15</tt:Hour><tt:Minute>4</tt:Minute>"
      "<tt:Second>5</tt:Second></tt:Time><tt:Date><tt:Year>2026</tt:Year><tt:Month>12</tt:Month><tt:Day>2</tt:Day>"
      "</tt:Date></tt:UTCDateTime></tds:SystemDateAndTime></tds:GetSystemDateAndTimeResponse></e:Body></e:Envelope>");
  ASSERT_TRUE(clock.ok());
  auto t = device_utc_time(*clock);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, 1796223845);

  auto caps = parse_xml("<Envelope><Body><GetCapabilitiesResponse><Capabilities><Media><XAddr>"
                        "http://192.168.1.20/onvif/media_service</XAddr></Media></Capabilities>"
                        "</GetCapabilitiesResponse></Body></Envelope>");
  ASSERT_TRUE(caps.ok());
  auto media = media_service_of(*caps);
  ASSERT_TRUE(media.ok()) << media.status().message();
  EXPECT_EQ(*media, "http://192.168.1.20/onvif/media_service");
  EXPECT_FALSE(media_service_of(*clock).ok());
  // A device that answers GetServices only: the service of media's namespace.
  auto services = parse_xml(
      "<Envelope><Body><GetServicesResponse><Service><Namespace>http://www.onvif.org/ver10/device/wsdl</Namespace>"
      "<XAddr>http://10.0.0.5/onvif/device_service</XAddr></Service><Service><Namespace>"
      "http://www.onvif.org/ver10/media/wsdl</Namespace><XAddr>http://10.0.0.5/onvif/Media</XAddr></Service>"
      "</GetServicesResponse></Body></Envelope>");
  ASSERT_TRUE(services.ok());
  auto from_services = media_service_of(*services);
  ASSERT_TRUE(from_services.ok()) << from_services.status().message();
  EXPECT_EQ(*from_services, "http://10.0.0.5/onvif/Media");
  ASSERT_NE(parse_xml(soap_envelope(get_services_body())).value().find("GetServices"), nullptr);
  // A service named by an address the asker cannot reach, moved to the one the camera was found at.
  EXPECT_EQ(with_host("http://172.16.0.9/onvif/Media", "192.168.1.20"), "http://192.168.1.20/onvif/Media");
  EXPECT_EQ(with_host("http://172.16.0.9:8080/onvif/Media", "192.168.1.20"), "http://192.168.1.20:8080/onvif/Media");
  EXPECT_EQ(with_host("http://172.16.0.9:8080/x", "192.168.1.20:80"), "http://192.168.1.20:80/x");
  EXPECT_EQ(with_host("http://[fe80::2]:8080/x", "[fe80::1]"), "http://[fe80::1]:8080/x");
  EXPECT_EQ(with_host("http://u:p@172.16.0.9", "10.0.0.1"), "http://u:p@10.0.0.1");

  auto profiles_doc = parse_xml(R"(<s:Envelope xmlns:s="x"><s:Body><trt:GetProfilesResponse>
    <trt:Profiles token="profile_1_h264" fixed="true"><tt:Name>MainStream</tt:Name>
      <tt:VideoSourceConfiguration token="vs"><tt:Name>source</tt:Name></tt:VideoSourceConfiguration>
      <tt:VideoEncoderConfiguration token="ve1"><tt:Name>enc</tt:Name><tt:Encoding>H264</tt:Encoding>
        <tt:Resolution><tt:Width>1920</tt:Width><tt:Height>1080</tt:Height></tt:Resolution>
        <tt:RateControl><tt:FrameRateLimit>30</tt:FrameRateLimit></tt:RateControl></tt:VideoEncoderConfiguration>
    </trt:Profiles>
    <trt:Profiles token="sub"><tt:Name>SubStream</tt:Name></trt:Profiles>
    <trt:Profiles><tt:Name>no token</tt:Name></trt:Profiles>
  </trt:GetProfilesResponse></s:Body></s:Envelope>)");
  ASSERT_TRUE(profiles_doc.ok()) << profiles_doc.status().message();
  auto profiles = profiles_of(*profiles_doc);
  ASSERT_TRUE(profiles.ok()) << profiles.status().message();
  ASSERT_EQ(profiles->size(), 2u);
  EXPECT_EQ((*profiles)[0].token, "profile_1_h264");
  EXPECT_EQ((*profiles)[0].name, "MainStream");  // the profile's own name, not its configurations'
  EXPECT_EQ((*profiles)[0].encoding, "H264");
  EXPECT_EQ((*profiles)[0].width, 1920);
  EXPECT_EQ((*profiles)[0].height, 1080);
  EXPECT_DOUBLE_EQ((*profiles)[0].fps, 30);
  EXPECT_EQ((*profiles)[1].token, "sub");
  EXPECT_EQ((*profiles)[1].width, 0);

  auto uri = parse_xml("<Envelope><Body><GetStreamUriResponse><MediaUri><Uri>rtsp://192.168.1.20/axis-media/"
                       "media.amp?profile=1&amp;x=y</Uri><Timeout>PT0S</Timeout></MediaUri></GetStreamUriResponse>"
                       "</Body></Envelope>");
  ASSERT_TRUE(uri.ok());
  auto stream = stream_uri_of(*uri);
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  EXPECT_EQ(*stream, "rtsp://192.168.1.20/axis-media/media.amp?profile=1&x=y");
}

TEST(OnvifSoap, FaultsSayTheirSubcodeAndReason) {
  auto fault = parse_xml(R"(<env:Envelope xmlns:env="x"><env:Body><env:Fault>
    <env:Code><env:Value>env:Sender</env:Value><env:Subcode><env:Value>ter:NotAuthorized</env:Value></env:Subcode></env:Code>
    <env:Reason><env:Text xml:lang="en">Sender not Authorized</env:Text></env:Reason></env:Fault></env:Body></env:Envelope>)");
  ASSERT_TRUE(fault.ok());
  EXPECT_EQ(fault_of(*fault), "ter:NotAuthorized: Sender not Authorized");
  auto soap11 = parse_xml("<Envelope><Body><Fault><faultcode>SOAP-ENV:Client</faultcode><faultstring>Bad request"
                          "</faultstring></Fault></Body></Envelope>");
  ASSERT_TRUE(soap11.ok());
  EXPECT_EQ(fault_of(*soap11), "SOAP-ENV:Client: Bad request");
  auto none = parse_xml("<Envelope><Body><GetProfilesResponse/></Body></Envelope>");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(fault_of(*none), "");
}

TEST(OnvifConfig, IdsComeFromTheCameraNameAndUrisGetTheUserWithThePasswordFromTheEnvironment) {
  EXPECT_EQ(stream_id_for("Front door (east)", {}), "front-door-east");
  EXPECT_EQ(stream_id_for("Front door (east)", {"front-door-east"}), "front-door-east-2");
  EXPECT_EQ(stream_id_for("Front door (east)", {"front-door-east", "front-door-east-2"}), "front-door-east-3");
  EXPECT_EQ(stream_id_for("Caméra n°1", {}), "cam-ra-n-1");
  EXPECT_EQ(stream_id_for("192.168.1.20", {}), "192.168.1.20");
  EXPECT_EQ(stream_id_for("", {}), "camera");
  EXPECT_EQ(stream_id_for("!!!", {}), "camera");
  EXPECT_LE(stream_id_for(std::string(100, 'a'), {}).size(), 64u);

  EXPECT_EQ(uri_with_credentials("rtsp://192.168.1.20:554/stream1", "admin", "CAMERA_PASSWORD"),
            "rtsp://admin:${CAMERA_PASSWORD}@192.168.1.20:554/stream1");
  EXPECT_EQ(uri_with_credentials("rtsp://10.0.0.5/s?a=1", "view@er", "P"), "rtsp://view%40er:${P}@10.0.0.5/s?a=1");
  EXPECT_EQ(uri_with_credentials("rtsp://cam", "u", "P"), "rtsp://u:${P}@cam");
  EXPECT_EQ(uri_with_credentials("rtsp://own:creds@cam/s", "admin", "P"), "rtsp://own:creds@cam/s");
  EXPECT_EQ(uri_with_credentials("rtsp://cam/s", "", "P"), "rtsp://cam/s");
  EXPECT_EQ(uri_with_password("rtsp://10.0.0.5/s", "admin", "Adm1n@2024#"), "rtsp://admin:Adm1n%402024%23@10.0.0.5/s");
  // One camera's stream however it is written: in a config (credentials from the environment, RTP
  // over TCP) and as the camera gives it (its default port spelled out).
  EXPECT_EQ(stream_key("rtspt://viewer:${CAMERA_PASSWORD}@Cam-1.local/Streaming/Channels/101"),
            stream_key("rtsp://cam-1.local:554/Streaming/Channels/101"));
  EXPECT_EQ(stream_key("RTSP://10.0.0.5:554/s?a=1"), "rtsp://10.0.0.5/s?a=1");
  EXPECT_NE(stream_key("rtsp://10.0.0.5:8554/s"), stream_key("rtsp://10.0.0.5/s"));
  EXPECT_NE(stream_key("rtsp://10.0.0.5/s1"), stream_key("rtsp://10.0.0.5/s2"));
  EXPECT_EQ(stream_key("rtsp://10.0.0.5"), "rtsp://10.0.0.5/");
  EXPECT_EQ(uri_with_password("rtsp://own:creds@cam/s", "admin", "x"), "rtsp://own:creds@cam/s");
}

}  // namespace
}  // namespace vapipe::onvif
