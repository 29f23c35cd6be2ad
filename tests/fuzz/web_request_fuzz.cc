// Fuzz target: arbitrary bytes as what a browser sends the web view (daemon/web/web_server.cc):
// parsed as HTTP/1.1 requests with the server's limits (16 KiB of headers, no body), one after
// another as on a kept-alive connection, then each request's query string decoded
// (daemon/web/query_string.h). Must fail cleanly: an error code, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"
#include "daemon/web/query_string.h"

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  boost::beast::flat_buffer buffer;
  auto in = buffer.prepare(size);
  std::memcpy(in.data(), data, size);
  buffer.commit(size);
  for (int requests = 0; requests < 16 && buffer.size() > 0; ++requests) {
    http::request_parser<http::empty_body> parser;
    parser.header_limit(16 << 10);
    parser.body_limit(0);
    parser.eager(true);
    boost::system::error_code ec;
    const size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec || !parser.is_done()) break;
    const std::string target(parser.get().target());
    const size_t q = target.find('?');
    if (q != std::string::npos) {
      auto params = stagefrontier::ParseQueryString(target.substr(q + 1));
      if (params.ok()) {
        for (const auto& [k, v] : *params) {
          if (k.size() + v.size() > target.size()) __builtin_trap();  // decoding never grows
        }
      }
    }
  }
  return 0;
}
