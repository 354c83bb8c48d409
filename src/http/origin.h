#pragma once
// Cross-site request refusal: a page on another site must not make a
// visitor's browser change state here (delete a run, silence an alert,
// reload the config) with the visitor's network position or credentials.
// Browsers say where a request comes from (Sec-Fetch-Site, Origin); other
// clients (curl, Prometheus, the Python client) send neither and pass.

#include <optional>
#include <string>
#include <string_view>

namespace trainwatch::http {

struct OriginHeaders {
  std::string_view method;
  std::string_view sec_fetch_site;    // Sec-Fetch-Site; empty when absent
  std::string_view origin;            // Origin; empty when absent
  std::string_view host;              // Host
  std::string_view forwarded_host;    // X-Forwarded-Host (a reverse proxy's); empty when absent
};

// Why a state-changing request (any method but GET, HEAD and OPTIONS) is
// refused as cross-site, or nullopt to serve it. Sec-Fetch-Site decides
// where a browser sends it ("same-origin" or "none" pass); else an Origin
// must name this server's Host (or X-Forwarded-Host) with its port.
std::optional<std::string> CrossSiteRefusal(const OriginHeaders& h);

}  // namespace trainwatch::http
