// One JSON form for every proto StageFrontier prints (sfctl --json, stagefrontier nodes
// --json): the proto3 JSON mapping with the .proto field names and default values shown, so
// scripts see every field.
//
//   std::cout << ProtoToJson(reply) << "\n";
#ifndef STAGEFRONTIER_DAEMON_COMMON_PROTO_JSON_H_
#define STAGEFRONTIER_DAEMON_COMMON_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace stagefrontier {

// Returns the message as one line of JSON ("" if the library refuses it, which it does not
// for the messages of proto/).
std::string ProtoToJson(const google::protobuf::Message& message);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_PROTO_JSON_H_
