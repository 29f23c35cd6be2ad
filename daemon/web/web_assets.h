// The web view's static files (daemon/web/assets/ and Debian's Chart.js), built into the
// coordinator by embed_assets.py.
//
//   const WebAsset* a = FindWebAsset("index.html");
//   if (a != nullptr) Send(a->content_type, a->data, a->size);
#ifndef STAGEFRONTIER_DAEMON_WEB_WEB_ASSETS_H_
#define STAGEFRONTIER_DAEMON_WEB_WEB_ASSETS_H_

#include <cstddef>

namespace stagefrontier {

struct WebAsset {
  const char* name;  // "index.html", "app.js", "chart.min.js", ...
  const char* content_type;
  const unsigned char* data;
  size_t size;
};

// Returns the asset named `name` (no directory), or null if there is none.
const WebAsset* FindWebAsset(const char* name);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_WEB_WEB_ASSETS_H_
