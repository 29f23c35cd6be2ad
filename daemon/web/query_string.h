// Decoding of a URL's query string, for the web view's API (query_bridge.h).
//
//   absl::StatusOr<std::map<std::string, std::string>> p = ParseQueryString("job=a%20b&to=9");
//   // (*p)["job"] == "a b", (*p)["to"] == "9"
#ifndef STAGEFRONTIER_DAEMON_WEB_QUERY_STRING_H_
#define STAGEFRONTIER_DAEMON_WEB_QUERY_STRING_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagefrontier {

// Returns the decoded parameters of `query` ("a=1&b=x%20y" -> {a: "1", b: "x y"}; "+" is a
// space; "a" alone is {a: ""}). InvalidArgument naming the place for a bad %-escape, and for a
// parameter given twice.
[[nodiscard]] absl::StatusOr<std::map<std::string, std::string>> ParseQueryString(
    absl::string_view query);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_WEB_QUERY_STRING_H_
