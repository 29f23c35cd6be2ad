// Test helper: a rank's declaration of the two-stage schema (data: io, then a sync stage) that
// the coordinator's ingest tests send.
#ifndef STAGEFRONTIER_TESTS_DAEMON_COORDINATOR_INGEST_DECLARATION_H_
#define STAGEFRONTIER_TESTS_DAEMON_COORDINATOR_INGEST_DECLARATION_H_

#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

inline void Declare(v1::StepBatch* b, int rank, const char* job = "j", int world = 4,
                    const char* second_stage = "grad_sync") {
  v1::RankDeclaration* d = b->add_declarations();
  d->set_job(job);
  d->set_rank(rank);
  d->set_world_size(world);
  v1::Stage* s = d->add_stages();
  s->set_name("data");
  s->set_kind(v1::STAGE_KIND_IO);
  s = d->add_stages();
  s->set_name(second_stage);
  s->set_kind(v1::STAGE_KIND_SYNC);
}

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_TESTS_DAEMON_COORDINATOR_INGEST_DECLARATION_H_
