// How StageFrontier prints a duration held in nanoseconds: milliseconds with two decimals.
// One helper, two forms, because two are needed: with the unit in prose ("12.35 ms"), and the
// bare number in table cells and columns whose header already names the unit ("12.35").
// Rendered output pinned by tests and docs uses exactly these forms.
//
//   FormatMs(12'345'678)        // "12.35 ms"
//   FormatMsNumber(12'345'678)  // "12.35"
//   FormatSeconds(23'400'000'000)  // "23.4 s"
#ifndef STAGEFRONTIER_DAEMON_COMMON_DURATION_FORMAT_H_
#define STAGEFRONTIER_DAEMON_COMMON_DURATION_FORMAT_H_

#include <string>

namespace stagefrontier {

// `ns` nanoseconds as "%.2f ms". Takes double so that means and medians print as they are;
// an int64_t count converts exactly below 2^53 ns (104 days).
std::string FormatMs(double ns);

// The same number without the unit: "%.2f".
std::string FormatMsNumber(double ns);

// Long waits (stalls, hangs): `ns` as seconds with one decimal, "23.4 s".
std::string FormatSeconds(double ns);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_DURATION_FORMAT_H_
