// auto's trials (collectives/online_choice.hpp): the schedule every rank derives from its call
// count, the decision rule, the agreement on the slowest rank's figures, and the contenders the
// formulas put forward (mpi.collectives_eligibility, under mpiexec -n 2).
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "collectives/cost_model.hpp"
#include "collectives/online_choice.hpp"
#include "collectives/topology.hpp"

namespace collectives = commtap::collectives;
using collectives::Algorithm;
using collectives::TrialTimes;

// The contenders take turns from the first call, two calls each, for the measured rounds; the
// trial's last call asks for the agreement. The first verdict is confirmed by a second trial 32
// calls later among the library's and the forms that read within 30% of the fastest; after
// that, 1,024 calls later, then 2,048.
TEST(Trial, ContendersTakeTurnsAndTheFirstVerdictIsConfirmedSoon) {
  collectives::SizeTrial trial({Algorithm::native, Algorithm::direct, Algorithm::ring}, 3);
  const std::vector<Algorithm> turns{Algorithm::native, Algorithm::direct, Algorithm::ring};
  auto run_trial = [&](int calls, double direct_s) {
    for (int call = 0; call < calls; ++call) {
      const double seconds = trial.next() == Algorithm::direct ? direct_s
                             : trial.next() == Algorithm::ring ? 3e-3
                                                               : 2e-3;
      EXPECT_EQ(trial.record(seconds), call == calls - 1) << call;
    }
    trial.agree(MPI_COMM_WORLD, true);
  };
  auto run_choice = [&](int calls, Algorithm expected) {
    for (int call = 0; call < calls; ++call) {
      ASSERT_EQ(trial.next(), expected) << call;
      EXPECT_FALSE(trial.record(1e-3));
    }
  };
  // direct is twice as fast as the library, ring slower.
  for (int call = 0; call < 18; ++call) {
    ASSERT_EQ(trial.next(), turns[call / 2 % 3]) << call;
    const double seconds = trial.next() == Algorithm::direct ? 1e-3
                           : trial.next() == Algorithm::ring ? 3e-3
                                                             : 2e-3;
    EXPECT_EQ(trial.record(seconds), call == 17) << call;
  }
  trial.agree(MPI_COMM_WORLD, true);
  EXPECT_EQ(trial.chosen(), Algorithm::direct);
  EXPECT_EQ(trial.trials(), 1);
  ASSERT_EQ(trial.times().size(), 3u);
  EXPECT_DOUBLE_EQ(trial.times()[1].median_s, 1e-3);
  run_choice(32, Algorithm::direct);
  // The ring read 3x the fastest form: not run again.
  EXPECT_EQ(trial.contenders(), (std::vector<Algorithm>{Algorithm::native, Algorithm::direct}));
  run_trial(12, 1e-3);
  EXPECT_EQ(trial.chosen(), Algorithm::direct);
  run_choice(1024, Algorithm::direct);
  // The network changed: direct is now slower than the library's.
  run_trial(12, 3e-3);
  EXPECT_EQ(trial.chosen(), Algorithm::native);
  EXPECT_EQ(trial.trials(), 3);
  EXPECT_EQ(trial.measured(), (std::vector<Algorithm>{Algorithm::native, Algorithm::direct}));
  run_choice(2048, Algorithm::native);
  EXPECT_EQ(trial.next(), Algorithm::native) << "the fourth trial starts with the library's";
  trial.record(2e-3);
  trial.record(2e-3);
  EXPECT_EQ(trial.next(), Algorithm::direct) << "against the form that read fastest";
}

// The ranks agree on the slowest rank's figures: a form fast on one rank and slow on the other
// is slow, and every rank decides the same.
TEST(Trial, TheSlowestRanksFiguresDecideOnEveryRank) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  collectives::SizeTrial trial({Algorithm::native, Algorithm::star}, 3);
  for (int call = 0; call < 12; ++call) {
    const bool star = trial.next() == Algorithm::star;
    // The star is 5x faster on rank 0 and 2x slower on the last rank.
    const double seconds = !star ? 1e-3 : rank == size - 1 ? 2e-3 : 0.2e-3;
    trial.record(seconds);
  }
  trial.agree(MPI_COMM_WORLD, false);
  EXPECT_EQ(trial.chosen(), size > 1 ? Algorithm::native : Algorithm::star);
  EXPECT_DOUBLE_EQ(trial.times()[1].median_s, size > 1 ? 2e-3 : 0.2e-3);
}

// Only the second call of each pair is a measurement: the first, slowed by the previous
// contender's stragglers (and the first of all by making connections), decides nothing.
TEST(Trial, OnlyTheSecondCallOfAPairIsMeasured) {
  collectives::SizeTrial trial({Algorithm::native, Algorithm::hier}, 3);
  for (int call = 0; call < 12; ++call) {
    const bool hier = trial.next() == Algorithm::hier;
    trial.record(call % 2 == 0 ? 0.1 : hier ? 0.5e-3 : 1e-3);
  }
  trial.agree(MPI_COMM_WORLD, false);
  EXPECT_EQ(trial.chosen(), Algorithm::hier);
}

// A form replaces the library's only where it wins by 10% and even its slowest round is no
// slower than the library's median; a form chosen before stays while it still wins clearly and
// reads within 10% of the fastest.
TEST(Trial, AFormMustWinClearlyAndTheChoiceDoesNotFlap) {
  const std::vector<Algorithm> forms{Algorithm::native, Algorithm::direct, Algorithm::knomial};
  EXPECT_EQ(collectives::decide(forms, {{1.0, 1.1}, {0.95, 0.96}, {0.99, 1.0}}), Algorithm::native)
      << "5% is within the noise";
  EXPECT_EQ(collectives::decide(forms, {{1.0, 1.1}, {0.5, 1.2}, {2, 2}}), Algorithm::native)
      << "a slowest round above the library's median";
  EXPECT_EQ(collectives::decide(forms, {{1.0, 1.1}, {0.5, 0.6}, {0.45, 0.5}}), Algorithm::knomial);
  EXPECT_EQ(collectives::decide(forms, {{1.0, 1.1}, {0.5, 0.6}, {0.47, 0.5}}, Algorithm::direct),
            Algorithm::direct)
      << "the incumbent is within 10% of the fastest";
  EXPECT_EQ(collectives::decide(forms, {{1.0, 1.1}, {0.6, 0.7}, {0.4, 0.5}}, Algorithm::direct),
            Algorithm::knomial);
  EXPECT_EQ(collectives::decide(forms, {{1.0, 1.1}, {0.95, 0.96}, {0.99, 1}}, Algorithm::direct),
            Algorithm::native)
      << "the incumbent no longer wins";
  EXPECT_EQ(collectives::decide({Algorithm::native}, {{1.0, 1.0}}), Algorithm::native);
}

// Sizes within a factor of two share a trial.
TEST(Trial, SizeClassesArePowersOfTwo) {
  EXPECT_EQ(collectives::size_class(1), 0);
  EXPECT_EQ(collectives::size_class(8), 3);
  EXPECT_EQ(collectives::size_class(9), 4);
  EXPECT_EQ(collectives::size_class(16), 4);
  EXPECT_EQ(collectives::size_class(1 << 20), 20);
  EXPECT_EQ(collectives::size_class((1LL << 40) + 1), 41);
}

// The contenders: the library's first; on one node the library's alone; elsewhere at most
// three forms, and forms the formulas predict near the library's time take part even where
// none is predicted to win (the formulas were off by 1.8x on the emulated cluster).
TEST(Trial, ContendersComeFromTheFormulas) {
  collectives::CostModel m;
  m.inter_alpha = 1e-3;
  m.library_short_bytes = 2048;
  collectives::Topology t;
  t.size = 4;
  t.nodes = 4;
  t.local_size = t.max_local_size = 1;
  t.halving_share_across_nodes = 1;
  for (const long long bytes : {8LL, 4096LL, 1LL << 21}) {
    const std::vector<Algorithm> chosen = collectives::contenders(m, t, bytes);
    ASSERT_GE(chosen.size(), 2u) << bytes;
    EXPECT_LE(chosen.size(), 4u) << bytes;
    EXPECT_EQ(chosen.front(), Algorithm::native) << bytes;
  }
  // 8 B at 1 ms: the one-latency forms, not the star or the ring.
  for (const Algorithm form : collectives::contenders(m, t, 8))
    EXPECT_TRUE(form == Algorithm::native || form == Algorithm::direct ||
                form == Algorithm::hier_direct || form == Algorithm::knomial ||
                form == Algorithm::hier_knomial)
        << collectives::algorithm_name(form);
  // Forms the formulas cost alike take one place: the four one-latency forms are one here.
  EXPECT_EQ(collectives::contenders(m, t, 8).size(), 2u);
  // 2 MiB at 100 Mbit/s: the bandwidth forms (the library's reduce-scatter is predicted near
  // them).
  m.inter_alpha = 10e-6;
  m.inter_beta = 80e-9;
  bool ring_like = false;
  for (const Algorithm form : collectives::contenders(m, t, 1 << 21))
    ring_like |= form == Algorithm::ring || form == Algorithm::hier || form == Algorithm::hier_pipe;
  EXPECT_TRUE(ring_like);
  t.nodes = 1;
  EXPECT_EQ(collectives::contenders(m, t, 8), std::vector<Algorithm>{Algorithm::native});
}

// A form that read faster by the median but not clearly (one slow round) is tried again 32 calls
// later, not after the doubling interval: a noisy round does not keep the library's for long.
TEST(Trial, AnUnclearWinIsTriedAgainSoon) {
  collectives::SizeTrial trial({Algorithm::native, Algorithm::hier_direct}, 3);
  auto run_trial = [&](auto seconds_of) {
    for (int call = 0, timed = 0; call < 12; ++call) {
      const bool form = trial.next() == Algorithm::hier_direct;
      trial.record(!form ? 2e-3 : seconds_of(call % 2 == 1 ? ++timed : 0));
    }
    trial.agree(MPI_COMM_WORLD, false);
  };
  auto run_native = [&](int calls) {
    for (int call = 0; call < calls; ++call) {
      ASSERT_EQ(trial.next(), Algorithm::native) << call;
      trial.record(2e-3);
    }
  };
  // Slower twice: the first verdict, confirmed 32 calls later; the next trial 1,024 calls on.
  run_trial([](int) { return 3e-3; });
  run_native(32);
  run_trial([](int) { return 3e-3; });
  EXPECT_EQ(trial.chosen(), Algorithm::native);
  run_native(1024);
  // Faster, but its second round slower than the library's median: not clear, again soon.
  run_trial([](int timed) { return timed == 2 ? 3e-3 : 1e-3; });
  EXPECT_EQ(trial.chosen(), Algorithm::native);
  run_native(32);
  run_trial([](int) { return 1e-3; });
  EXPECT_EQ(trial.chosen(), Algorithm::hier_direct);
  EXPECT_EQ(trial.trials(), 4);
}

// Unclear trials are retried soon twice in a row at most: a form a few percent faster than the
// library's stays unclear, and retrying it every 32 calls would cost more than it saves.
TEST(Trial, UnclearTrialsAreRetriedSoonTwiceInARowAtMost) {
  collectives::SizeTrial trial({Algorithm::native, Algorithm::hier}, 3);
  auto run_trial = [&] {  // hier 5% faster: unclear
    for (int call = 0; call < 12; ++call)
      trial.record(trial.next() == Algorithm::hier ? 1.9e-3 : 2e-3);
    trial.agree(MPI_COMM_WORLD, false);
    EXPECT_EQ(trial.chosen(), Algorithm::native);
  };
  auto calls_to_next_trial = [&] {
    int calls = 0;
    while (trial.next() == Algorithm::native) {
      trial.record(2e-3);
      if (++calls > 100000) break;
    }
    // The trial's first pair was the library's: it started `calls` - 2 calls after the last.
    return calls - 2;
  };
  auto rest_of_trial = [&] {  // its first pair ran in calls_to_next_trial()
    for (int call = 0; call < 10; ++call)
      trial.record(trial.next() == Algorithm::hier ? 1.9e-3 : 2e-3);
    trial.agree(MPI_COMM_WORLD, false);
  };
  run_trial();  // the first verdict, and unclear: the first soon
  EXPECT_EQ(calls_to_next_trial(), 32);
  rest_of_trial();  // unclear again: the second
  EXPECT_EQ(calls_to_next_trial(), 32);
  rest_of_trial();  // the third: the interval
  EXPECT_EQ(calls_to_next_trial(), 1024);
}
