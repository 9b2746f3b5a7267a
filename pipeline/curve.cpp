#include "pipeline/curve.h"

#include <cstdint>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "pipeline/logging.h"
#include "pipeline/token_file.h"
#include "pipeline/transport.h"

namespace vapipe {
namespace {

constexpr size_t kZ85KeyLength = 40;

bool is_z85_key(const std::string& text) {
  if (text.size() != kZ85KeyLength) return false;
  uint8_t bytes[32];
  return zmq_z85_decode(bytes, text.c_str()) != nullptr;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// Keys of a key file, one per line; "# ..." comments (also after a key) and blank lines are skipped.
Result<std::vector<std::string>> read_keys(const std::string& path, const char* kind) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + std::string(kind) + " file " + path + ": " + std::strerror(errno));
  std::vector<std::string> keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    // (a UTF-8 byte order mark, as Windows Notepad starts a file with: not part of the first key)
    if (n == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    const std::string text = trim(line);
    if (text.empty()) continue;
    const auto space = text.find_first_of(" \t");
    const std::string first = text.substr(0, space);
    const std::string rest = space == std::string::npos ? "" : trim(text.substr(space));
    if (is_z85_key(first) && (rest.empty() || rest[0] == '#')) {
      keys.push_back(first);
    } else if (text[0] == '#') {
      continue;  // a comment (a key is one word of Z85: never "#" followed by a space)
    } else {
      return InvalidArgument(path + ":" + std::to_string(n) + ": expected a " + kind +
                             " (40 characters of Z85 text, as `vapipe keygen` writes), got a line of " +
                             std::to_string(text.size()) + " characters");
    }
  }
  if (keys.empty()) return InvalidArgument(path + ": no " + std::string(kind) + " in the file");
  return keys;
}

// The process's one ZAP handler (ZeroMQ allows one per context): answers authentication requests of
// every CURVE server socket in the process, by the domain each was given.
class ZapHandler {
 public:
  struct Domain {
    std::set<std::string> authorized;  // empty: any client
    std::string what;
    std::set<std::string> logged;      // refused keys already logged
    std::atomic<uint64_t> refused{0};
  };

  static Result<std::shared_ptr<ZapHandler>> instance() {
    static std::mutex mutex;
    static std::weak_ptr<ZapHandler> current;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto existing = current.lock()) return existing;
    try {
      auto handler = std::shared_ptr<ZapHandler>(new ZapHandler());
      current = handler;
      return handler;
    } catch (const zmq::error_t& e) {
      return Unavailable(std::string("cannot start the CURVE authentication handler: ") + e.what());
    }
  }

  ~ZapHandler() {
    stop_ = true;
    thread_.join();
  }

  std::string add_domain(std::shared_ptr<Domain> domain) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string name = "vapipe-" + std::to_string(next_domain_++);
    domains_[name] = std::move(domain);
    return name;
  }
  void remove_domain(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    domains_.erase(name);
  }
  void set_authorized(const std::string& name, const std::vector<std::string>& keys) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = domains_.find(name);
    if (it == domains_.end()) return;
    it->second->authorized = std::set<std::string>(keys.begin(), keys.end());
    it->second->logged.clear();  // a key refused before and refused again is worth a line again
  }

 private:
  ZapHandler() : socket_(zmq_context(), zmq::socket_type::rep) {
    socket_.set(zmq::sockopt::linger, 0);
    // The address ZeroMQ sends ZAP requests to. A handler that just ended (its last CURVE socket closed)
    // gives it up on ZeroMQ's reaper thread, a moment later: a new one waits for it (up to 2 s).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (true) {
      try {
        socket_.bind("inproc://zeromq.zap.01");
        break;
      } catch (const zmq::error_t& e) {
        if (e.num() != EADDRINUSE || std::chrono::steady_clock::now() > deadline) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    thread_ = std::thread([this] { serve(); });
  }

  void serve() {
    while (!stop_) {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, std::chrono::milliseconds(100));
        if (!(item.revents & ZMQ_POLLIN)) continue;
        std::vector<zmq::message_t> request;
        if (!zmq::recv_multipart(socket_, std::back_inserter(request))) continue;
        reply(request);
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) return;
      }
    }
  }

  // ZAP 1.0 (rfc.zeromq.org/spec/27): version, request id, domain, address, routing id, mechanism,
  // credentials (the client's 32-byte public key for CURVE).
  void reply(const std::vector<zmq::message_t>& request) {
    if (request.size() < 6) {  // malformed: REP must still answer
      std::vector<zmq::message_t> answer;
      answer.emplace_back(std::string("1.0"));
      answer.emplace_back(request.size() > 1 ? request[1].to_string() : std::string());
      answer.emplace_back(std::string("500"));
      answer.emplace_back(std::string("malformed ZAP request"));
      answer.emplace_back();
      answer.emplace_back();
      zmq::send_multipart(socket_, answer);
      return;
    }
    const std::string domain_name = request[2].to_string();
    const std::string address = request[3].to_string();
    const std::string mechanism = request[5].to_string();
    std::string client_key;
    if (mechanism == "CURVE" && request.size() >= 7 && request[6].size() == 32) {
      char z85[kZ85KeyLength + 1];
      if (zmq_z85_encode(z85, static_cast<const uint8_t*>(request[6].data()), 32)) client_key = z85;
    }
    bool allowed = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = domains_.find(domain_name);
      if (it != domains_.end() && !it->second->authorized.empty()) {
        Domain& d = *it->second;
        allowed = !client_key.empty() && d.authorized.count(client_key) > 0;
        if (!allowed) {
          ++d.refused;
          if (d.logged.insert(client_key).second) {
            VAPIPE_LOG_WARN("refused a connection from {}: public key {} is not in {}", address,
                            client_key.empty() ? "(none)" : client_key, d.what);
          }
        }
      }
    }
    std::vector<zmq::message_t> answer;
    answer.emplace_back(std::string("1.0"));
    answer.emplace_back(request[1].data(), request[1].size());
    answer.emplace_back(std::string(allowed ? "200" : "400"));
    answer.emplace_back(std::string(allowed ? "OK" : "public key not authorized"));
    answer.emplace_back(allowed ? client_key : std::string());  // user id
    answer.emplace_back();                                       // metadata
    zmq::send_multipart(socket_, answer);
  }

  zmq::socket_t socket_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Domain>> domains_;
  uint64_t next_domain_ = 0;
};

class ZapCurveServerGuard final : public CurveServerGuard {
 public:
  ZapCurveServerGuard(std::shared_ptr<ZapHandler> handler, std::shared_ptr<ZapHandler::Domain> domain)
      : handler_(std::move(handler)), domain_(std::move(domain)), name_(handler_->add_domain(domain_)) {}
  ~ZapCurveServerGuard() override { handler_->remove_domain(name_); }
  uint64_t refused() const override { return domain_->refused.load(); }
  void set_authorized(const std::vector<std::string>& keys) override { handler_->set_authorized(name_, keys); }
  const std::string& domain_name() const { return name_; }

 private:
  std::shared_ptr<ZapHandler> handler_;
  std::shared_ptr<ZapHandler::Domain> domain_;
  std::string name_;
};

}  // namespace

bool curve_supported() { return zmq_has("curve") != 0; }

Result<CurveKeyPair> generate_curve_key_pair() {
  if (!curve_supported()) return FailedPrecondition("this libzmq has no CURVE support (built without libsodium)");
  char pub[kZ85KeyLength + 1], sec[kZ85KeyLength + 1];
  if (zmq_curve_keypair(pub, sec) != 0) return Internal(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()));
  return CurveKeyPair{pub, sec};
}

Status write_curve_key_files(const std::string& prefix, const CurveKeyPair& pair) {
  const std::string secret_path = prefix + ".secret", public_path = prefix + ".public";
  auto write = [](const std::string& path, mode_t mode, const std::string& text) -> Status {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0) {
      return errno == EEXIST ? FailedPrecondition(path + " exists already; not overwritten")
                             : Unavailable("cannot create " + path + ": " + std::strerror(errno));
    }
    const ssize_t n = ::write(fd, text.data(), text.size());
    const bool ok = n == static_cast<ssize_t>(text.size()) && ::close(fd) == 0;
    return ok ? Status::Ok() : Unavailable("cannot write " + path + ": " + std::strerror(errno));
  };
  struct stat st {};
  for (const std::string& p : {secret_path, public_path}) {
    if (::stat(p.c_str(), &st) == 0) return FailedPrecondition(p + " exists already; not overwritten");
  }
  // Its folder made as the README's steps expect (`vapipe keygen keys/bus` in a fresh checkout); the
  // secret's folder only its owner's to list.
  if (const std::filesystem::path folder = std::filesystem::path(prefix).parent_path(); !folder.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(folder, ec)) {
      std::filesystem::create_directories(folder, ec);
      if (ec) return Unavailable("cannot create the folder " + folder.string() + ": " + ec.message());
      std::filesystem::permissions(folder, std::filesystem::perms::owner_all, ec);
    }
  }
  VAPIPE_RETURN_IF_ERROR(write(secret_path, 0600,
                               "# vapipe CURVE secret key: keep it private; its public key is in " + public_path +
                                   "\n" + pair.secret_key + "\n"));
  return write(public_path, 0644, "# vapipe CURVE public key: give it to the peers of " + secret_path + "\n" +
                                      pair.public_key + "\n");
}

Result<CurveKeyPair> read_curve_secret_key_file(const std::string& path) {
  VAPIPE_ASSIGN_OR_RETURN(std::vector<std::string> keys, read_keys(path, "CURVE secret key"));
  if (keys.size() != 1) return InvalidArgument(path + ": expected one CURVE secret key, found " + std::to_string(keys.size()));
  char pub[kZ85KeyLength + 1];
  if (zmq_curve_public(pub, keys[0].c_str()) != 0) {
    return InvalidArgument(path + ": cannot derive the public key (" + zmq_strerror(zmq_errno()) +
                           "; does this libzmq support CURVE?)");
  }
  warn_if_others_may_read(path, "secret key");  // (once, by the run or validate, not by each stage)
  return CurveKeyPair{pub, keys[0]};
}

Result<std::vector<std::string>> read_curve_public_key_file(const std::string& path) {
  return read_keys(path, "CURVE public key");
}

Result<std::string> read_curve_public_key_argument(const std::string& text_or_path) {
  if (is_z85_key(text_or_path)) return text_or_path;
  VAPIPE_ASSIGN_OR_RETURN(std::vector<std::string> keys, read_curve_public_key_file(text_or_path));
  if (keys.size() != 1) {
    return InvalidArgument(text_or_path + ": expected one CURVE public key, found " + std::to_string(keys.size()));
  }
  return keys[0];
}

Result<std::unique_ptr<CurveServerGuard>> make_curve_server(zmq::socket_t& socket, const CurveKeyPair& keys,
                                                             std::vector<std::string> authorized,
                                                             const std::string& what) {
  if (!curve_supported()) return FailedPrecondition("this libzmq has no CURVE support (built without libsodium)");
  VAPIPE_ASSIGN_OR_RETURN(std::shared_ptr<ZapHandler> handler, ZapHandler::instance());
  auto domain = std::make_shared<ZapHandler::Domain>();
  domain->authorized.insert(authorized.begin(), authorized.end());
  domain->what = what;
  auto guard = std::make_unique<ZapCurveServerGuard>(std::move(handler), std::move(domain));
  try {
    socket.set(zmq::sockopt::curve_server, 1);
    socket.set(zmq::sockopt::curve_secretkey, keys.secret_key);
    socket.set(zmq::sockopt::zap_domain, guard->domain_name());
  } catch (const zmq::error_t& e) {
    return InvalidArgument(std::string("CURVE server: ") + e.what());
  }
  return std::unique_ptr<CurveServerGuard>(std::move(guard));
}

Status make_curve_client(zmq::socket_t& socket, const CurveKeyPair& own, const std::string& server_public_key) {
  if (!curve_supported()) return FailedPrecondition("this libzmq has no CURVE support (built without libsodium)");
  try {
    socket.set(zmq::sockopt::curve_serverkey, server_public_key);
    socket.set(zmq::sockopt::curve_publickey, own.public_key);
    socket.set(zmq::sockopt::curve_secretkey, own.secret_key);
  } catch (const zmq::error_t& e) {
    return InvalidArgument(std::string("CURVE client: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace vapipe
