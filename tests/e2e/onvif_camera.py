"""An ONVIF camera's discovery and media services, for the tests of `vapipe discover`: it answers
WS-Discovery probes (UDP, on its own port, and on 239.255.255.250:3702 with --multicast) with a
ProbeMatch naming its device service, and serves GetSystemDateAndTime, GetCapabilities, GetProfiles
and GetStreamUri over HTTP as ONVIF's SOAP 1.2, checking each WS-Security UsernameToken as a camera
does (the digest, and its time against the camera's own clock). The stream URIs it gives are those of
real RTSP servers (tests/fakes/rtsp_test_server), so what `vapipe discover` prints can be run.

    python3 onvif_camera.py --name NAME --user U --password P --stream TOKEN=RTSP_URI... [--size TOKEN=WxH]... [--clock-offset S]
                            [--multicast] [--answer-delay-max 0.5] [--media-host HOST] [--auth ws-security|http-digest]

Prints "ready UDP_PORT HTTP_PORT" once both listen."""
import argparse
import base64
import calendar
import hashlib
import random
import http.server
import socket
import struct
import sys
import threading
import time
import urllib.parse
import uuid
import xml.etree.ElementTree as ET

NS = {
    "s": "http://www.w3.org/2003/05/soap-envelope",
    "a": "http://schemas.xmlsoap.org/ws/2004/08/addressing",
    "d": "http://schemas.xmlsoap.org/ws/2005/04/discovery",
    "wsse": "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd",
    "wsu": "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd",
}
ENVELOPE = ('<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope" '
            'xmlns:tds="http://www.onvif.org/ver10/device/wsdl" xmlns:trt="http://www.onvif.org/ver10/media/wsdl" '
            'xmlns:tt="http://www.onvif.org/ver10/schema" xmlns:ter="http://www.onvif.org/ver10/error">'
            '<env:Body>{}</env:Body></env:Envelope>')


def escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class Camera:
    def __init__(self, args):
        self.args = args
        self.endpoint = "urn:uuid:" + str(uuid.uuid4())
        self.streams = [s.split("=", 1) for s in args.stream]
        self.sizes = dict(s.split("=", 1) for s in args.size)
        self.http_port = 0
        self.requests = []  # (operation, authenticated) as they came, for the test's log
        self.actions = []   # each request's SOAP action parameter ("" when none)

    def now(self):
        return time.time() + self.args.clock_offset

    def probe_match(self, relates_to):
        xaddr = f"http://127.0.0.1:{self.http_port}/onvif/device_service"
        name = urllib.parse.quote(self.args.name)
        return ('<?xml version="1.0" encoding="UTF-8"?><SOAP-ENV:Envelope '
                'xmlns:SOAP-ENV="http://www.w3.org/2003/05/soap-envelope" '
                'xmlns:wsa="http://schemas.xmlsoap.org/ws/2004/08/addressing" '
                'xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery" '
                'xmlns:dn="http://www.onvif.org/ver10/network/wsdl"><SOAP-ENV:Header>'
                f'<wsa:MessageID>uuid:{uuid.uuid4()}</wsa:MessageID><wsa:RelatesTo>{escape(relates_to)}</wsa:RelatesTo>'
                '<wsa:To>http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous</wsa:To>'
                '<wsa:Action>http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches</wsa:Action>'
                '</SOAP-ENV:Header><SOAP-ENV:Body><d:ProbeMatches><d:ProbeMatch>'
                f'<wsa:EndpointReference><wsa:Address>{self.endpoint}</wsa:Address></wsa:EndpointReference>'
                '<d:Types>dn:NetworkVideoTransmitter</d:Types>'
                f'<d:Scopes>onvif://www.onvif.org/type/video_encoder onvif://www.onvif.org/name/{name} '
                'onvif://www.onvif.org/hardware/VAPIPE-TEST-CAM</d:Scopes>'
                f'<d:XAddrs>{xaddr}</d:XAddrs><d:MetadataVersion>1</d:MetadataVersion>'
                '</d:ProbeMatch></d:ProbeMatches></SOAP-ENV:Body></SOAP-ENV:Envelope>')

    def answer_probes(self, sock):
        seen = set()
        while True:
            data, sender = sock.recvfrom(65536)
            try:
                doc = ET.fromstring(data)
            except ET.ParseError:
                continue
            if doc.find(".//d:Probe", NS) is None:
                continue
            message_id = doc.findtext(".//a:MessageID", "", NS)
            if message_id in seen:  # WS-Discovery: a repeated probe is answered once
                continue
            seen.add(message_id)
            # WS-Discovery: a device waits a random time up to APP_MAX_DELAY (500 ms) before it answers
            # a multicast probe, so that a network's cameras do not all answer at once.
            threading.Timer(random.uniform(0, self.args.answer_delay_max),
                            lambda m=message_id, to=sender: sock.sendto(self.probe_match(m).encode(), to)).start()

    def authorized(self, doc):
        token = doc.find(".//wsse:UsernameToken", NS)
        if token is None:
            return False
        user = token.findtext("wsse:Username", "", NS)
        digest = token.findtext("wsse:Password", "", NS)
        nonce = base64.b64decode(token.findtext("wsse:Nonce", "", NS))
        created = token.findtext("wsu:Created", "", NS)
        expected = base64.b64encode(hashlib.sha1(nonce + created.encode() + self.args.password.encode()).digest())
        try:
            when = calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ"))
        except ValueError:
            return False
        # As cameras do: the token's time must be within a few seconds of the camera's clock.
        return user == self.args.user and digest.encode() == expected and abs(when - self.now()) <= 5

    realm = "vapipe-test-camera"
    nonce = uuid.uuid4().hex

    def digest_authorized(self, method, uri, header):
        if not header.startswith("Digest "):
            return False
        fields = {}
        for part in header[len("Digest "):].split(","):
            key, _, value = part.strip().partition("=")
            fields[key] = value.strip('"')
        md5 = lambda text: hashlib.md5(text.encode()).hexdigest()  # noqa: E731
        ha1 = md5(f"{self.args.user}:{self.realm}:{self.args.password}")
        ha2 = md5(f"{method}:{fields.get('uri', '')}")
        expected = md5(f"{ha1}:{self.nonce}:{fields.get('nc', '')}:{fields.get('cnonce', '')}:{fields.get('qop', '')}:{ha2}")
        return (fields.get("username") == self.args.user and fields.get("nonce") == self.nonce and
                fields.get("uri") == uri and fields.get("response") == expected)

    def answer(self, operation, doc):
        if operation == "GetSystemDateAndTime":
            t = time.gmtime(self.now())
            return ("<tds:GetSystemDateAndTimeResponse><tds:SystemDateAndTime><tt:DateTimeType>Manual</tt:DateTimeType>"
                    "<tt:DaylightSavings>false</tt:DaylightSavings><tt:UTCDateTime>"
                    f"<tt:Time><tt:Hour>{t.tm_hour}</tt:Hour><tt:Minute>{t.tm_min}</tt:Minute><tt:Second>{t.tm_sec}"
                    f"</tt:Second></tt:Time><tt:Date><tt:Year>{t.tm_year}</tt:Year><tt:Month>{t.tm_mon}</tt:Month>"
                    f"<tt:Day>{t.tm_mday}</tt:Day></tt:Date></tt:UTCDateTime></tds:SystemDateAndTime>"
                    "</tds:GetSystemDateAndTimeResponse>")
        if operation == "GetCapabilities":
            return ("<tds:GetCapabilitiesResponse><tds:Capabilities><tt:Media><tt:XAddr>"
                    f"http://{self.args.media_host}:{self.http_port}/onvif/media_service</tt:XAddr></tt:Media></tds:Capabilities>"
                    "</tds:GetCapabilitiesResponse>")
        if operation == "GetProfiles":
            def profile(token):
                width, height = self.sizes.get(token, "640x360").split("x")
                return (f'<trt:Profiles token="{escape(token)}" fixed="true"><tt:Name>{escape(token)} stream</tt:Name>'
                        '<tt:VideoEncoderConfiguration token="enc"><tt:Name>enc</tt:Name><tt:Encoding>H264</tt:Encoding>'
                        f'<tt:Resolution><tt:Width>{width}</tt:Width><tt:Height>{height}</tt:Height></tt:Resolution>'
                        '<tt:RateControl><tt:FrameRateLimit>30</tt:FrameRateLimit></tt:RateControl>'
                        '</tt:VideoEncoderConfiguration></trt:Profiles>')
            profiles = "".join(profile(token) for token, _ in self.streams)
            return f"<trt:GetProfilesResponse>{profiles}</trt:GetProfilesResponse>"
        if operation == "GetStreamUri":
            token = doc.findtext(".//{http://www.onvif.org/ver10/media/wsdl}ProfileToken", "")
            for t, uri in self.streams:
                if t == token:
                    return (f"<trt:GetStreamUriResponse><trt:MediaUri><tt:Uri>{escape(uri)}</tt:Uri>"
                            "<tt:InvalidAfterConnect>false</tt:InvalidAfterConnect><tt:InvalidAfterReboot>false"
                            "</tt:InvalidAfterReboot><tt:Timeout>PT0S</tt:Timeout></trt:MediaUri>"
                            "</trt:GetStreamUriResponse>")
            return None
        return None


def fault(subcode, reason):
    return ("<env:Fault><env:Code><env:Value>env:Sender</env:Value><env:Subcode>"
            f"<env:Value>{subcode}</env:Value></env:Subcode></env:Code><env:Reason>"
            f'<env:Text xml:lang="en">{reason}</env:Text></env:Reason></env:Fault>')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--stream", action="append", default=[], help="TOKEN=URI")
    ap.add_argument("--size", action="append", default=[], help="TOKEN=WxH: the picture size a profile says (640x360)")
    ap.add_argument("--clock-offset", type=float, default=0)
    ap.add_argument("--multicast", action="store_true")
    ap.add_argument("--auth", choices=["ws-security", "http-digest"], default="ws-security",
                    help="how it checks the user and password: the SOAP header's UsernameToken, or its web server's "
                         "HTTP Digest")
    ap.add_argument("--answer-delay-max", type=float, default=0.5)
    ap.add_argument("--media-host", default="127.0.0.1",
                    help="the host its capabilities name the media service by (one that does not answer: a camera "
                         "with a second network, or behind NAT)")
    args = ap.parse_args()
    camera = Camera(args)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                doc = ET.fromstring(body)
            except ET.ParseError:
                return self.reply(400, fault("ter:WellFormed", "not XML"))
            operations = doc.find("s:Body", NS)
            operation = operations[0].tag.split("}")[-1] if operations is not None and len(operations) else ""
            # SOAP 1.2's action parameter, as strict devices route by it: when given, it must name the body's.
            action = [p.strip()[len("action="):].strip('"') for p in self.headers.get("Content-Type", "").split(";")
                      if p.strip().startswith("action=")]
            if action and not action[0].endswith("/" + operation):
                return self.reply(400, fault("ter:ActionNotSupported", f"action {action[0]} for {operation}"))
            camera.actions.append(action[0] if action else "")
            if args.auth == "http-digest":
                # The camera's web server authenticates (RFC 7616, MD5, qop=auth), not the SOAP header.
                authenticated = camera.digest_authorized(self.command, self.path, self.headers.get("Authorization", ""))
                if operation != "GetSystemDateAndTime" and not authenticated:
                    return self.challenge()
            else:
                authenticated = camera.authorized(doc)
            camera.requests.append((operation, authenticated))
            # ONVIF: the date and time are asked without credentials (the client needs them for its
            # token); everything else needs them.
            if operation != "GetSystemDateAndTime" and not authenticated:
                return self.reply(400, fault("ter:NotAuthorized", "Sender not Authorized"))
            answer = camera.answer(operation, doc)
            if answer is None:
                return self.reply(400, fault("ter:InvalidArgVal", "no such operation or profile"))
            self.reply(200, answer)

        def challenge(self):
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Digest realm="{camera.realm}", qop="auth", nonce="{camera.nonce}", '
                                                 'algorithm=MD5')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def reply(self, status, body):
            data = ENVELOPE.format(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/soap+xml; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    camera.http_port = server.server_address[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    threading.Thread(target=camera.answer_probes, args=(udp,), daemon=True).start()
    if args.multicast:
        group = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        group.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        group.bind(("", 3702))
        membership = struct.pack("4s4s", socket.inet_aton("239.255.255.250"), socket.inet_aton("0.0.0.0"))
        group.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
        threading.Thread(target=camera.answer_probes, args=(group,), daemon=True).start()
    print(f"ready {udp.getsockname()[1]} {camera.http_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
