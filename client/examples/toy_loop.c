/* A toy training loop instrumented through the stable C ABI (client/c/stagefrontier_c.h).
 *
 *   bazel run //client/examples:toy_loop_c -- 50
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "client/c/stagefrontier_c.h"

static void work(long micros) {
  struct timespec ts = {0, micros * 1000};
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 20;
  const sf_stage stages[] = {
      {"data", SF_STAGE_IO}, {"compute", SF_STAGE_COMPUTE}, {"allreduce", SF_STAGE_SYNC}};
  char err[256];
  sf_client* c = NULL;
  if (sf_client_create(NULL, stages, 3, &c, err, sizeof err) != SF_OK) {
    fprintf(stderr, "toy_loop_c: %s\n", err);
    return 1;
  }
  const int32_t data = sf_stage_id(c, "data");
  const int32_t compute = sf_stage_id(c, "compute");
  const int32_t allreduce = sf_stage_id(c, "allreduce");
  for (int i = 0; i < steps; ++i) {
    sf_begin_step(c);
    sf_enter(c, data);
    work(200);
    sf_exit(c, data);
    sf_enter(c, compute);
    work(500);
    sf_exit(c, compute);
    work(50);
    sf_mark(c, allreduce);
    sf_end_step(c);
  }
  sf_client_stats st;
  st.struct_size = sizeof st;
  sf_client_get_stats(c, &st);
  printf("C ABI v%u: %llu steps, %llu recorded, %llu not recorded%s%s\n", sf_abi_version(),
         (unsigned long long)st.steps_begun, (unsigned long long)st.steps_recorded,
         (unsigned long long)st.steps_not_recorded, sf_client_enabled(c) ? "" : ": ",
         sf_client_disabled_reason(c));
  sf_client_destroy(c);
  return 0;
}
