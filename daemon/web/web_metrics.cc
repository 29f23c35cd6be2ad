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
                         "Web view connections answered 503 at a connection bound with every "
                         "connection busy");
  timed_out_.counter = one("stagefrontier_web_connections_timed_out_total",
                           "Web view connections closed for a request or answer not done in "
                           "time, or idle too long");
  evicted_.counter = one("stagefrontier_web_connections_evicted_total",
                         "Idle web view connections closed to make room for a new one");
}

void WebMetrics::Update(const WebServerCounters& c) {
  requests_.To(c.requests);
  bad_.To(c.bad_requests);
  refused_.To(c.refused_connections);
  timed_out_.To(c.timed_out);
  evicted_.To(c.evicted);
}

}  // namespace stagefrontier
