// stagefrontier nodes JOURNAL... [--ranks-per-node K] [--ledger FILE] [--json]: charge jobs
// to nodes offline (the node ledger).
#include <unistd.h>

#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/analyze/analyze_commands.h"
#include "daemon/analyze/journal_nodes.h"
#include "daemon/common/proto_json.h"
#include "daemon/nodes/nodes_reply.h"
#include "daemon/nodes/nodes_text.h"

namespace stagefrontier {
namespace {

struct NodesFlags {
  std::vector<std::string> journals;
  JournalNodesOptions options;
  std::string ledger_path;
  bool as_json = false;
};

int Nodes(const NodesFlags& f) {
  std::string ledger_path = f.ledger_path;
  std::string temp_dir;
  if (ledger_path.empty()) {
    char dir[] = "/tmp/stagefrontier_nodes_XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      std::cerr << "stagefrontier nodes: cannot create a temporary directory\n";
      return 3;
    }
    temp_dir = dir;
    ledger_path = temp_dir + "/nodes.ledger";
  }
  NodeLedgerOptions lo;
  lo.path = ledger_path;
  lo.fsync = false;
  JournalOpenInfo info;
  absl::StatusOr<std::unique_ptr<NodeLedger>> ledger = NodeLedger::Open(lo, &info);
  int rc = 0;
  std::ostringstream text;
  if (!ledger.ok()) {
    std::cerr << "stagefrontier nodes: " << ledger_path << ": " << ledger.status().message()
              << "\n";
    rc = 2;
  }
  nlohmann::json per_journal = nlohmann::json::array();
  for (size_t i = 0; rc == 0 && i < f.journals.size(); ++i) {
    // Journals of one job id run again (kept from earlier runs) are distinct jobs here.
    JournalNodesOptions o = f.options;
    o.job_name = absl::StrCat("journal", i + 1);
    absl::StatusOr<JournalNodesStats> s = ChargeJournal(f.journals[i], o, ledger->get());
    if (!s.ok()) {
      std::cerr << "stagefrontier nodes: " << f.journals[i] << ": " << s.status().message() << "\n";
      rc = 2;
      break;
    }
    per_journal.push_back({{"journal", f.journals[i]},
                           {"windows", s->windows},
                           {"charging_windows", s->charging_windows}});
    text << f.journals[i] << ": " << s->windows << " windows, " << s->charging_windows
         << " charged a node\n";
  }
  if (rc == 0 && !(*ledger)->Flush().ok()) rc = 2;
  if (rc == 0) {
    v1::ListNodesReply reply;
    (void)FillListNodes(**ledger, v1::ListNodesRequest(), &reply);
    if (f.as_json) {
      nlohmann::json out = nlohmann::json::parse(ProtoToJson(reply));
      out["journals"] = per_journal;
      std::cout << out.dump(2) << "\n";
    } else {
      std::cout << text.str() << RenderNodesText(reply);
    }
  }
  if (!temp_dir.empty()) {
    unlink(ledger_path.c_str());
    rmdir(temp_dir.c_str());
  }
  return rc;
}

}  // namespace

Subcommand AddNodesCommand(CLI::App& app) {
  auto f = std::make_shared<NodesFlags>();
  CLI::App* nodes = app.add_subcommand(
      "nodes",
      "Charge recorded jobs to nodes offline, as if they ran in this order on the same nodes, and "
      "print the node ledger (classes, wasted GPU-seconds)");
  nodes->add_option("journals", f->journals, "<job>.journal files, in the order the jobs ran")
      ->required();
  nodes
      ->add_option("--ranks-per-node", f->options.ranks_per_node,
                   "rank r ran on node <prefix><r / K> (journals do not record nodes)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  nodes->add_option("--node-prefix", f->options.node_prefix, "node names' prefix")
      ->capture_default_str();
  nodes->add_option("--window", f->options.window_steps, "Steps per verdict window")
      ->check(CLI::Range(2, 100000))
      ->capture_default_str();
  nodes->add_option("--ledger", f->ledger_path,
                    "Keep the ledger in this file (appended to if it exists; default: temporary)");
  nodes->add_flag("--json", f->as_json, "Print as JSON");
  return {nodes, [f] { return Nodes(*f); }};
}

}  // namespace stagefrontier
