/* The test workloads' compute step: a sleep of `us` microseconds, so that the cores stay free for
 * the other ranks of an oversubscribed machine and a step takes the same time whatever its load
 * (stencil_cart, param_server, split_pipeline, coupled_models, ring_no_collectives). */
#ifndef COMMTAP_TESTS_PROGRAMS_COMPUTE_FOR_H
#define COMMTAP_TESTS_PROGRAMS_COMPUTE_FOR_H

#include <time.h>

static inline void compute_for(long us) {
  struct timespec pause = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&pause, NULL);
}

#endif
