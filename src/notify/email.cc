// Email integration: the message (headers, HTML and text parts) and an SMTP
// client with implicit TLS on port 465, STARTTLS (required unless
// require_tls: false) and AUTH CRAM-MD5, PLAIN or LOGIN, as Alertmanager's
// email notifier.

#include <netdb.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <random>

#include "base/clock.h"
#include "notify/integrations.h"

namespace trainwatch::notify {
namespace {

std::string Base64(std::string_view s) {
  std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(s.data()),
                          static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// RFC 2047 for a header value that is not plain ASCII.
std::string EncodeHeader(const std::string& v) {
  for (unsigned char c : v) {
    if (c >= 0x80 || c == '\n' || c == '\r') return "=?UTF-8?B?" + Base64(v) + "?=";
  }
  return v;
}

// "a@b, Name <c@d>" -> {"a@b", "c@d"}.
std::vector<std::string> Addresses(const std::string& list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= list.size()) {
    size_t c = list.find(',', i);
    std::string part = list.substr(i, c == std::string::npos ? std::string::npos : c - i);
    size_t lt = part.find('<'), gt = part.find('>');
    if (lt != std::string::npos && gt != std::string::npos && gt > lt) part = part.substr(lt + 1, gt - lt - 1);
    size_t b = part.find_first_not_of(" \t"), e = part.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(part.substr(b, e - b + 1));
    if (c == std::string::npos) break;
    i = c + 1;
  }
  return out;
}

std::string Boundary() {
  std::random_device rd;
  std::string o;
  static const char* kHex = "0123456789abcdef";
  for (int i = 0; i < 30; i++) o += kHex[rd() % 16];
  return o;
}

std::string DateHeader(int64_t ms) {
  time_t t = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[64];
  strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S +0000", &tm);
  return buf;
}

// Dot-stuffing and CRLF line ends for DATA.
std::string SmtpData(const std::string& msg) {
  std::string o;
  size_t i = 0;
  while (i < msg.size()) {
    size_t nl = msg.find('\n', i);
    std::string line = msg.substr(i, nl == std::string::npos ? std::string::npos : nl - i);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line[0] == '.') o += '.';
    o += line + "\r\n";
    if (nl == std::string::npos) break;
    i = nl + 1;
  }
  return o;
}

class SmtpConn {
 public:
  ~SmtpConn() {
    if (ssl_ != nullptr) {
      SSL_shutdown(ssl_);
      SSL_free(ssl_);
    }
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }

  Status Connect(const std::string& host, const std::string& port, int64_t timeout_ms) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0) return Status::Unavailable("resolve " + host + ": " + gai_strerror(rc));
    Status last = Status::Unavailable("connect " + host + ":" + port + ": no address");
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      timeval tv{static_cast<time_t>(timeout_ms / 1000), static_cast<suseconds_t>((timeout_ms % 1000) * 1000)};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
        break;
      }
      last = Status::FromErrno("connect " + host + ":" + port, errno);
      ::close(fd);
    }
    freeaddrinfo(res);
    if (fd_ < 0) return Status::Unavailable(last.message());
    return Status::OK();
  }

  // tls_config: ca_file (else the system CAs), a client certificate, and
  // server_name for SNI and the certificate check (else the smarthost).
  Status StartTls(const std::string& host, const EmailConfig& c) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (ctx_ == nullptr) return Status::Unavailable("tls: cannot create context");
    if (!c.insecure_skip_verify) {
      if (c.ca_file.empty()) {
        SSL_CTX_set_default_verify_paths(ctx_);
      } else if (SSL_CTX_load_verify_locations(ctx_, c.ca_file.c_str(), nullptr) != 1) {
        return Status::InvalidArgument("tls: cannot load ca_file " + c.ca_file);
      }
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    }
    if (!c.cert_file.empty() && (SSL_CTX_use_certificate_chain_file(ctx_, c.cert_file.c_str()) != 1 ||
                                 SSL_CTX_use_PrivateKey_file(ctx_, c.key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
      return Status::InvalidArgument("tls: cannot load cert_file " + c.cert_file + " / key_file " + c.key_file);
    }
    const std::string& name = c.server_name.empty() ? host : c.server_name;
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, name.c_str());
    if (!c.insecure_skip_verify) SSL_set1_host(ssl_, name.c_str());
    if (SSL_connect(ssl_) != 1) {
      char buf[256];
      ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
      return Status::Unavailable(std::string("tls handshake: ") + buf);
    }
    buf_.clear();
    return Status::OK();
  }

  Status Write(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ssl_ != nullptr ? SSL_write(ssl_, s.data() + off, static_cast<int>(s.size() - off))
                                  : ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return Status::Unavailable("smtp: write failed");
      off += static_cast<size_t>(n);
    }
    return Status::OK();
  }

  // Reads one (possibly multi-line) reply; returns the code and the text lines.
  Result<int> Reply(std::vector<std::string>* lines) {
    lines->clear();
    for (;;) {
      size_t nl;
      while ((nl = buf_.find('\n')) == std::string::npos) {
        char tmp[4096];
        ssize_t n = ssl_ != nullptr ? SSL_read(ssl_, tmp, sizeof(tmp)) : ::recv(fd_, tmp, sizeof(tmp), 0);
        if (n <= 0) return Status::Unavailable("smtp: connection closed or timed out while reading the reply");
        buf_.append(tmp, static_cast<size_t>(n));
      }
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.size() < 3) return Status::Unavailable("smtp: malformed reply \"" + line + "\"");
      lines->push_back(line.size() > 4 ? line.substr(4) : "");
      if (line.size() == 3 || line[3] != '-') return std::stoi(line.substr(0, 3));
    }
  }

  // Sends `cmd` (without CRLF; empty: nothing sent) and expects a reply code `want`.
  Result<std::vector<std::string>> Cmd(const std::string& cmd, int want, std::string_view what) {
    if (!cmd.empty()) RETURN_IF_ERROR(Write(cmd + "\r\n"));
    std::vector<std::string> lines;
    ASSIGN_OR_RETURN(int code, Reply(&lines));
    if (code != want) {
      std::string text = lines.empty() ? "" : lines.back();
      std::string msg = "smtp " + std::string(what) + ": " + std::to_string(code) + " " + text;
      if (code >= 500) return Status::InvalidArgument(msg);
      return Status::Unavailable(msg);
    }
    return lines;
  }

 private:
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string buf_;
};

bool HasExt(const std::vector<std::string>& ehlo, std::string_view ext, std::string* params = nullptr) {
  for (size_t i = 1; i < ehlo.size(); i++) {
    std::string up = ehlo[i];
    for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (up == ext || up.starts_with(std::string(ext) + " ")) {
      if (params != nullptr) *params = up.size() > ext.size() ? up.substr(ext.size() + 1) : "";
      return true;
    }
  }
  return false;
}

bool IsLocalhost(const std::string& host) { return host == "localhost" || host == "127.0.0.1" || host == "::1"; }

std::string Base64Decode(std::string_view s) {
  std::string out(3 * (s.size() / 4) + 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(s.data()),
                          static_cast<int>(s.size()));
  if (n < 0) return std::string();
  out.resize(static_cast<size_t>(n));
  // EVP_DecodeBlock counts the padding as zero bytes.
  for (size_t i = s.size(); i > 0 && s[i - 1] == '='; --i) out.pop_back();
  return out;
}

// Alertmanager's auth(): the first mechanism in the server's list that the
// config can do (CRAM-MD5 with auth_secret, PLAIN and LOGIN with a
// password); the reasons the others were skipped make the error otherwise.
Status Authenticate(SmtpConn& conn, const EmailConfig& c, const std::string& mechs, bool tls, const std::string& host) {
  std::string password = c.auth_password;
  if (!c.auth_password_file.empty()) {
    auto r = ReadSecretFile(c.auth_password_file);
    if (!r.ok()) return Status::Unavailable("email: could not read " + c.auth_password_file + ": " + r.error().message());
    password = std::move(*r);
  }
  std::string errors;
  auto skip = [&](const std::string& why) { errors += (errors.empty() ? "" : "; ") + why; };
  size_t i = 0;
  while (i < mechs.size()) {
    size_t sp = mechs.find(' ', i);
    std::string mech = mechs.substr(i, sp == std::string::npos ? std::string::npos : sp - i);
    i = sp == std::string::npos ? mechs.size() : sp + 1;
    if (mech == "CRAM-MD5") {
      if (c.auth_secret.empty()) {
        skip("missing secret for CRAM-MD5 auth mechanism");
        continue;
      }
      ASSIGN_OR_RETURN(auto ch, conn.Cmd("AUTH CRAM-MD5", 334, "AUTH CRAM-MD5"));
      std::string challenge = Base64Decode(ch.empty() ? "" : ch.back());
      ASSIGN_OR_RETURN(auto ok, conn.Cmd(Base64(CramMd5Response(c.auth_username, c.auth_secret, challenge)), 235,
                                         "AUTH CRAM-MD5 response"));
      return Status::OK();
    }
    if (mech == "PLAIN" || mech == "LOGIN") {
      if (password.empty()) {
        skip("missing password for " + mech + " auth mechanism");
        continue;
      }
      if (mech == "PLAIN") {
        // Go's smtp.PlainAuth sends credentials only over TLS or to localhost.
        if (!tls && !IsLocalhost(host)) return Status::InvalidArgument("email: PLAIN auth: unencrypted connection");
        std::string cred = c.auth_identity + std::string(1, '\0') + c.auth_username + std::string(1, '\0') + password;
        ASSIGN_OR_RETURN(auto r, conn.Cmd("AUTH PLAIN " + Base64(cred), 235, "AUTH PLAIN"));
        return Status::OK();
      }
      ASSIGN_OR_RETURN(auto r1, conn.Cmd("AUTH LOGIN", 334, "AUTH LOGIN"));
      ASSIGN_OR_RETURN(auto r2, conn.Cmd(Base64(c.auth_username), 334, "AUTH LOGIN username"));
      ASSIGN_OR_RETURN(auto r3, conn.Cmd(Base64(password), 235, "AUTH LOGIN password"));
      return Status::OK();
    }
  }
  if (errors.empty()) errors = "unknown auth mechanism: " + mechs;
  return Status::InvalidArgument("email: find auth mechanism: " + errors);
}

}  // namespace

std::string CramMd5Response(std::string_view user, std::string_view secret, std::string_view challenge) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_md5(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(challenge.data()),
       challenge.size(), mac, &len);
  static const char* kHex = "0123456789abcdef";
  std::string out(user);
  out += ' ';
  for (unsigned int k = 0; k < len; k++) {
    out += kHex[mac[k] >> 4];
    out += kHex[mac[k] & 15];
  }
  return out;
}

Result<std::string> BuildEmailMessage(const EmailConfig& c, const NotificationData& d, const SendOptions& o) {
  std::map<std::string, std::string> headers = c.headers;
  if (!headers.contains("Subject")) headers["Subject"] = "{{ template \"email.default.subject\" . }}";
  if (!headers.contains("To")) headers["To"] = c.to;
  if (!headers.contains("From")) headers["From"] = c.from;
  std::string msg;
  for (const auto& [k, v] : headers) {
    auto e = Expand(v, d, o.templates);
    if (!e.ok()) return e.error().Annotate("email: expand header " + k);
    msg += k + ": " + EncodeHeader(*e) + "\r\n";
  }
  msg += "Date: " + DateHeader(d.now_ms) + "\r\n";
  msg += "Message-Id: <" + std::to_string(d.now_ms) + "." + Boundary().substr(0, 12) + "@trainwatch>\r\n";
  msg += "MIME-Version: 1.0\r\n";
  std::string html, text;
  if (!c.html.empty()) {
    auto e = Expand(c.html, d, o.templates, true);
    if (!e.ok()) return e.error().Annotate("email: expand html");
    html = std::move(*e);
  }
  if (!c.text.empty()) {
    auto e = Expand(c.text, d, o.templates);
    if (!e.ok()) return e.error().Annotate("email: expand text");
    text = std::move(*e);
  }
  std::string b = Boundary();
  msg += "Content-Type: multipart/alternative;  boundary=" + b + "\r\n\r\n";
  if (!text.empty()) {
    msg += "--" + b + "\r\nContent-Transfer-Encoding: 8bit\r\nContent-Type: text/plain; charset=UTF-8\r\n\r\n" + text + "\r\n";
  }
  if (!html.empty()) {
    msg += "--" + b + "\r\nContent-Transfer-Encoding: 8bit\r\nContent-Type: text/html; charset=UTF-8\r\n\r\n" + html + "\r\n";
  }
  msg += "--" + b + "--\r\n";
  return msg;
}

Status SendEmail(const EmailConfig& c, const NotificationData& d, const SendOptions& o) {
  ASSIGN_OR_RETURN(std::string msg, BuildEmailMessage(c, d, o));
  size_t colon = c.smarthost.rfind(':');
  std::string host = c.smarthost.substr(0, colon), port = c.smarthost.substr(colon + 1);
  if (host.starts_with("[") && host.ends_with("]")) host = host.substr(1, host.size() - 2);
  SmtpConn conn;
  RETURN_IF_ERROR(conn.Connect(host, port, o.timeout_ms));
  if (port == "465") RETURN_IF_ERROR(conn.StartTls(host, c));
  ASSIGN_OR_RETURN(auto greet, conn.Cmd("", 220, "greeting"));
  ASSIGN_OR_RETURN(auto ehlo, conn.Cmd("EHLO " + c.hello, 250, "EHLO"));
  if (port != "465" && c.require_tls) {
    if (!HasExt(ehlo, "STARTTLS")) {
      return Status::InvalidArgument("email: 'require_tls' is true (default) but \"" + c.smarthost +
                                     "\" does not advertise the STARTTLS extension");
    }
    ASSIGN_OR_RETURN(auto st, conn.Cmd("STARTTLS", 220, "STARTTLS"));
    RETURN_IF_ERROR(conn.StartTls(host, c));
    ASSIGN_OR_RETURN(ehlo, conn.Cmd("EHLO " + c.hello, 250, "EHLO"));
  }
  if (!c.auth_username.empty()) {
    std::string mechs;
    if (!HasExt(ehlo, "AUTH", &mechs)) {
      return Status::InvalidArgument("email: server does not advertise the AUTH extension but auth_username is set");
    }
    RETURN_IF_ERROR(Authenticate(conn, c, mechs, port == "465" || c.require_tls, host));
  }
  std::vector<std::string> from = Addresses(c.from);
  if (from.size() != 1) return Status::InvalidArgument("email: from must be one address, got \"" + c.from + "\"");
  ASSIGN_OR_RETURN(auto mf, conn.Cmd("MAIL FROM:<" + from[0] + ">", 250, "MAIL FROM"));
  std::vector<std::string> to = Addresses(c.to);
  if (to.empty()) return Status::InvalidArgument("email: no recipient in \"" + c.to + "\"");
  for (const std::string& r : to) {
    ASSIGN_OR_RETURN(auto rc, conn.Cmd("RCPT TO:<" + r + ">", 250, "RCPT TO"));
  }
  ASSIGN_OR_RETURN(auto dt, conn.Cmd("DATA", 354, "DATA"));
  RETURN_IF_ERROR(conn.Write(SmtpData(msg) + ".\r\n"));
  ASSIGN_OR_RETURN(auto done, conn.Cmd("", 250, "end of DATA"));
  (void)conn.Cmd("QUIT", 221, "QUIT");
  return Status::OK();
}

}  // namespace trainwatch::notify
