// ZeroMQ CURVE: encryption and authentication for the result bus (publish.curve_*) and for stage
// edges across hosts (transport.curve_secret_key). Keys are Z85 text (40 characters), one per file,
// as `vapipe keygen` writes them; lines starting with '#' and blank lines are ignored.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/status.h"

namespace zmq {
class socket_t;
}

namespace vapipe {

struct CurveKeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85; never logged
  bool empty() const { return secret_key.empty(); }
};

// Whether this libzmq was built with CURVE (libsodium).
bool curve_supported();

// A fresh key pair.
Result<CurveKeyPair> generate_curve_key_pair();
// Writes PREFIX.secret (mode 0600) and PREFIX.public; refuses to overwrite either.
Status write_curve_key_files(const std::string& prefix, const CurveKeyPair& pair);

// A secret key file (its public key is derived). Errors name the file and line.
Result<CurveKeyPair> read_curve_secret_key_file(const std::string& path);
// Public keys, one per line (an authorized-keys list); at least one. Errors name the file and line.
Result<std::vector<std::string>> read_curve_public_key_file(const std::string& path);
// A public key given on a command line: Z85 text itself, or a file holding exactly one key.
Result<std::string> read_curve_public_key_argument(const std::string& text_or_path);

// Keeps the authentication of one CURVE server socket in force; keep it as long as the socket.
class CurveServerGuard {
 public:
  virtual ~CurveServerGuard() = default;
  // Connections refused so far (a client key not on the list).
  virtual uint64_t refused() const = 0;
  // Replaces the list of client keys let in (empty: any client that knows the server's key). Applies to
  // the next handshakes; clients already connected stay connected.
  virtual void set_authorized(const std::vector<std::string>& keys) = 0;
};

// Makes `socket` a CURVE server (call before bind). Only clients whose public key is in `authorized`
// are let in (ZeroMQ's ZAP, served by one handler thread per process); refusals are logged once per
// key, naming `what` (e.g. the authorized-keys file). An empty list admits any client that knows the
// server's public key: the traffic is still encrypted.
Result<std::unique_ptr<CurveServerGuard>> make_curve_server(zmq::socket_t& socket, const CurveKeyPair& keys,
                                                             std::vector<std::string> authorized,
                                                             const std::string& what);
// Makes `socket` a CURVE client of the server with `server_public_key` (call before connect).
Status make_curve_client(zmq::socket_t& socket, const CurveKeyPair& own, const std::string& server_public_key);

}  // namespace vapipe
