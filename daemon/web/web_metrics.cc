#include "daemon/web/web_metrics.h"

namespace stagefrontier {

WebMetrics::WebMetrics(prometheus::Registry& r) {
  auto one = [&r](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  requests_.counter = one("stagefrontier_web_requests_total",
                          "HTTP requests the web view answered (--http-listen), errors included");
  bad_.counter = one("stagefrontier_web_bad_requests_total",
                     "Web view requests refused as malformed HTTP, and failed TLS handshakes");
  refused_.counter = one("stagefrontier_web_connections_refused_total",
                         "Web view connections answered 503 at the connection bound");
}

void WebMetrics::Update(const WebServerCounters& c) {
  requests_.To(c.requests);
  bad_.To(c.bad_requests);
  refused_.To(c.refused_connections);
}

}  // namespace stagefrontier
