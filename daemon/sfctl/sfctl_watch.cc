#include "daemon/sfctl/sfctl_watch.h"

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/sfctl/sfctl_render.h"

namespace stagefrontier {
namespace {

struct WatchFlags {
  std::string job;
  int count = 0;
  int64_t after = 0;
};

}  // namespace

SfctlCommand WatchCommand() {
  return {"watch", "print verdicts as windows close", [](CLI::App* sub) -> SfctlRun {
            auto f = std::make_shared<WatchFlags>();
            sub->add_option("--job", f->job, "job id")->required();
            sub->add_option("--count", f->count, "stop after this many verdicts (0: never)");
            sub->add_option("--after", f->after, "start after this verdict sequence number");
            return [f](const SfctlCall& call) {
              grpc::ClientContext ctx;
              call.Prepare(&ctx, /*deadline=*/false);  // it runs until --count or Ctrl-C
              v1::WatchVerdictsRequest req;
              req.set_job(f->job);
              req.set_after_seq(f->after);
              auto reader = call.stub->WatchVerdicts(&ctx, req);
              v1::VerdictEvent ev;
              int seen = 0;
              while (reader->Read(&ev)) {
                call.Print(ev, absl::StrCat("#", ev.seq(), " ", RenderVerdict(ev.verdict())));
                call.out->flush();
                if (f->count > 0 && ++seen >= f->count) {
                  ctx.TryCancel();
                  break;
                }
              }
              grpc::Status s = reader->Finish();
              if (f->count > 0 && seen >= f->count) return 0;
              return call.Report(s);
            };
          }};
}

}  // namespace stagefrontier
