#include "daemon/captures/chrome_trace.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace stagefrontier {
namespace {

using json = nlohmann::json;

// Chrome traces are in microseconds; beyond this a time is not a plausible one.
constexpr double kMaxUs = 9.0e15;

// A SAX consumer that only remembers where parsing failed.
struct ErrorPosition : nlohmann::json_sax<json> {
  size_t byte = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    byte = position;
    return false;
  }
};

// The trainer's text, as it reaches reports, sfctl's terminal and the logs: control characters
// (C0, DEL, and C1 as UTF-8 encodes them) become '?', so that a trace cannot move a cursor,
// set a terminal title or forge a log line, and a name is at most kMaxNameBytes.
constexpr size_t kMaxNameBytes = 1024;
std::string Printable(const std::string& text) {
  std::string out = text.substr(0, kMaxNameBytes);
  for (size_t i = 0; i < out.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(out[i]);
    if (c < 0x20 || c == 0x7f) {
      out[i] = '?';
    } else if (c == 0xc2 && i + 1 < out.size() && static_cast<unsigned char>(out[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(out[i + 1]) <= 0x9f) {
      out[i] = '?';
      out[i + 1] = '?';
    }
  }
  return out;
}

absl::Status Bad(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", what));
}

// "pid" / "tid" as text: numbers and names both occur (GPU streams are named).
std::string IdText(const json& e, const char* key) {
  const auto it = e.find(key);
  if (it == e.end()) return "";
  if (it->is_string()) return Printable(it->get<std::string>());
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_number_unsigned()) return std::to_string(it->get<uint64_t>());
  return it->dump();  // depth-bounded by the parse
}

int32_t ClampedInt(const json& v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v.get<int64_t>(), -1, 1 << 30));
}

}  // namespace

absl::StatusOr<ChromeTrace> ParseChromeTrace(absl::string_view text, const std::string& name,
                                             const TraceParseLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        name, ": ", text.size(), " bytes, more than the ", limits.max_bytes, " a trace may have"));
  }
  // nlohmann's parser keeps its own stack (no recursion); values nested deeper than the limit
  // are dropped as they are read and the trace refused, so that nothing after the parse (dump,
  // destruction) meets a deep value.
  bool too_deep = false;
  const json::parser_callback_t depth_check = [&](int depth, json::parse_event_t, json&) {
    if (depth <= limits.max_depth) return true;
    too_deep = true;
    return false;
  };
  json doc = json::parse(text.begin(), text.end(), depth_check, /*allow_exceptions=*/false);
  if (too_deep) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name, ": values nested deeper than ", limits.max_depth, " levels"));
  }
  if (doc.is_discarded()) {
    // Find where it breaks, for the message (the non-throwing parse does not say).
    ErrorPosition sax;
    json::sax_parse(text.begin(), text.end(), &sax, nlohmann::detail::input_format_t::json,
                    /*strict=*/true);
    return Bad(name, absl::StrCat("not valid JSON at byte ", sax.byte,
                                  " (a Chrome trace JSON from torch.profiler is expected)"));
  }
  const json* events = nullptr;
  if (doc.is_array()) {
    events = &doc;
  } else if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array()) {
    events = &doc["traceEvents"];
  } else {
    return Bad(name, "no \"traceEvents\" array: not a Chrome trace");
  }
  ChromeTrace out;
  if (doc.is_object() && doc.contains("distributedInfo") && doc["distributedInfo"].is_object()) {
    const json& di = doc["distributedInfo"];
    if (di.contains("rank") && di["rank"].is_number_integer()) out.rank = ClampedInt(di["rank"]);
    if (di.contains("world_size") && di["world_size"].is_number_integer()) {
      out.world_size = ClampedInt(di["world_size"]);
    }
  }
  if (events->size() > limits.max_events) {
    return absl::ResourceExhaustedError(absl::StrCat(name, ": ", events->size(),
                                                     " events, more than the ", limits.max_events,
                                                     " a trace may have"));
  }
  for (const json& e : *events) {
    const size_t i = out.all_events++;
    if (!e.is_object()) return Bad(name, absl::StrCat("event ", i, " is not an object"));
    const auto ph = e.find("ph");
    const auto nm = e.find("name");
    if (ph == e.end() || !ph->is_string() || ph->get_ref<const std::string&>() != "X") continue;
    if (nm == e.end() || !nm->is_string()) continue;
    const std::string event_name = Printable(nm->get_ref<const std::string&>());
    const auto ts = e.find("ts");
    const auto dur = e.find("dur");
    if (ts == e.end() || !ts->is_number() || dur == e.end() || !dur->is_number()) {
      return Bad(name, absl::StrCat("event ", i, " (\"", event_name,
                                    "\") has no numeric \"ts\" and \"dur\""));
    }
    const double t = ts->get<double>();
    const double d = dur->get<double>();
    if (!std::isfinite(t) || !std::isfinite(d) || d < 0 || std::fabs(t) > kMaxUs || d > kMaxUs) {
      return Bad(name, absl::StrCat("event ", i, " (\"", event_name, "\") has an implausible ts ",
                                    t, " or dur ", d));
    }
    TraceEvent ev;
    ev.name = event_name;
    if (const auto cat = e.find("cat"); cat != e.end() && cat->is_string()) {
      ev.category = Printable(cat->get<std::string>());
    }
    ev.process = IdText(e, "pid");
    ev.thread = IdText(e, "tid");
    ev.begin_ns = std::llround(t * 1000.0);
    ev.end_ns = ev.begin_ns + std::llround(d * 1000.0);
    out.events.push_back(std::move(ev));
  }
  return out;
}

}  // namespace stagefrontier
