#include "daemon/sfctl/sfctl_nodes.h"

#include <memory>
#include <string>

#include "daemon/nodes/nodes_text.h"

namespace stagefrontier {
namespace {

struct NodesFlags {
  int limit = 0;
  std::string node_class;
};

}  // namespace

SfctlCommand NodesCommand() {
  return {"nodes", "the node ledger: what each node cost, across jobs",
          [](CLI::App* sub) -> SfctlRun {
            auto f = std::make_shared<NodesFlags>();
            sub->add_option("--limit", f->limit, "at most this many nodes (0: all)")
                ->check(CLI::NonNegativeNumber);
            sub->add_option("--class", f->node_class, "only nodes of this class")
                ->check(CLI::IsMember({"healthy", "transient", "chronic"}));
            return [f](const SfctlCall& call) {
              v1::ListNodesRequest req;
              req.set_limit(f->limit);
              req.set_node_class(f->node_class);
              return call.Unary(&v1::Query::Stub::ListNodes, req, RenderNodesText);
            };
          }};
}

}  // namespace stagefrontier
