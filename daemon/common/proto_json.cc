#include "daemon/common/proto_json.h"

#include "google/protobuf/util/json_util.h"

namespace stagefrontier {

std::string ProtoToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, o);
  return out;
}

}  // namespace stagefrontier
