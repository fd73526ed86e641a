#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "interpose/requests.hpp"
#include "monitor/sampling.hpp"

using namespace commtap::interpose;

TEST(RequestTable, NonblockingRequestsCompleteOnce) {
  RequestTable table;
  EXPECT_TRUE(table.empty());
  table.track(5, Fn::Isend, 100, false);
  EXPECT_FALSE(table.empty());
  auto done = table.complete(5, table.epoch());
  ASSERT_TRUE(done);
  EXPECT_EQ(done->fn, Fn::Isend);
  EXPECT_EQ(done->started_ns, 100u);
  EXPECT_FALSE(table.complete(5, table.epoch()));
  EXPECT_TRUE(table.empty());
}

TEST(RequestTable, PersistentRequestsCompleteOncePerStart) {
  RequestTable table;
  table.track(9, Fn::Allreduce_init, 10, true);
  EXPECT_FALSE(table.complete(9, table.epoch())) << "inactive until started";
  for (std::uint64_t start : {20u, 30u, 40u}) {
    table.started(9, start, 1);
    auto done = table.complete(9, table.epoch());
    ASSERT_TRUE(done);
    EXPECT_EQ(done->fn, Fn::Allreduce_init);
    EXPECT_EQ(done->started_ns, start);
    EXPECT_FALSE(table.complete(9, table.epoch()));
  }
  table.forget(9, table.epoch());
  EXPECT_TRUE(table.empty());
  table.started(9, 50, 1);
  EXPECT_FALSE(table.complete(9, table.epoch()));
}

TEST(RequestTable, PersistentCollectivesTakeASequenceNumberAtEachStart) {
  RequestTable table;
  commtap::world::CommState comm;
  comm.id = 42;
  comm.next_seq();  // one blocking collective came before
  table.track(4, Fn::Allreduce_init, 0, true, Instance{&comm, 0, 8, -1, false});
  std::vector<std::uint64_t> seqs;
  std::vector<bool> sampled;
  for (int start = 0; start < 4; ++start) {
    table.started(4, 100 + start, 2);
    auto done = table.complete(4, table.epoch());
    ASSERT_TRUE(done);
    EXPECT_EQ(done->instance.comm, &comm);
    EXPECT_EQ(done->instance.bytes, 8u);
    seqs.push_back(done->instance.seq);
    sampled.push_back(done->instance.sampled);
  }
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{2, 3, 4, 5}));
  std::vector<bool> expected;  // one in 2, by (communicator, seq)
  for (const std::uint64_t seq : seqs) expected.push_back(commtap::monitor::is_sampled(42, seq, 2));
  EXPECT_EQ(sampled, expected);
  EXPECT_EQ(comm.started.load(), 5u);
}

TEST(RequestTable, UnknownAndNullRequestsAreIgnored) {
  RequestTable table;
  EXPECT_FALSE(table.complete(MPI_REQUEST_NULL, table.epoch()));
  EXPECT_FALSE(table.complete(1234, table.epoch()));
  table.track(MPI_REQUEST_NULL, Fn::Irecv, 1, false);
  EXPECT_TRUE(table.empty());
}

TEST(RequestTable, AHandleReusedBeforeItsCompletionSettledKeepsBothOperations) {
  // Thread B's MPI_Wait frees handle 7 inside MPICH; thread A's MPI_Isend gets 7 again and is
  // tracked before B's wrapper settles. Each completion must find its own operation.
  RequestTable table;
  table.track(7, Fn::Irecv, 1, false);
  const std::uint64_t b_began = table.epoch();
  table.track(7, Fn::Isend, 2, false);
  const std::uint64_t a_began = table.epoch();
  auto a_done = table.complete(7, a_began);
  auto b_done = table.complete(7, b_began);
  ASSERT_TRUE(a_done && b_done);
  EXPECT_EQ(a_done->fn, Fn::Isend);
  EXPECT_EQ(b_done->fn, Fn::Irecv);
  EXPECT_TRUE(table.empty());
}

TEST(RequestTable, AnOperationTrackedAfterACompletionBeganIsNotItsToTake) {
  RequestTable table;
  const std::uint64_t began = table.epoch();
  table.track(3, Fn::Isend, 1, false);
  EXPECT_FALSE(table.complete(3, began));
  EXPECT_TRUE(table.complete(3, table.epoch()));
}

TEST(RequestTable, EntriesNeverCompletedAreDroppedEventually) {
  RequestTable table;
  for (int i = 0; i < 5000; ++i) table.track(11, Fn::Isend, i, false);
  auto done = table.complete(11, table.epoch());
  ASSERT_TRUE(done);
  EXPECT_EQ(done->started_ns, 4999u);
  int left = 0;
  while (table.complete(11, table.epoch())) ++left;
  EXPECT_EQ(left, 4095);  // kMaxEntriesPerHandle in all
  table.clear();
  EXPECT_TRUE(table.empty());
}

// MPICH gives every send that completed at once the same handle: each time a completion call
// lists the handle, one of those sends completes, every one exactly once.
TEST(RequestTable, OperationsSharingOneHandleEachCompleteOnce) {
  RequestTable table;
  const MPI_Request shared = 0x6c000001;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::uint64_t> started;
    for (int i = 0; i < 26; ++i) {
      table.track(shared, Fn::Isend, 100 * round + i, false, Instance{nullptr, std::uint64_t(i)});
      started.push_back(100 * round + i);
    }
    table.track(77, Fn::Irecv, 5, false);  // another request in between
    const std::uint64_t epoch = table.epoch();
    std::vector<std::uint64_t> completed;
    for (int i = 0; i < 26; ++i) {
      auto done = table.complete(shared, epoch);
      ASSERT_TRUE(done) << "slot " << i << " of round " << round;
      completed.push_back(done->started_ns);
    }
    EXPECT_FALSE(table.complete(shared, epoch));
    std::sort(completed.begin(), completed.end());
    EXPECT_EQ(completed, started);
    EXPECT_TRUE(table.complete(77, epoch));
    EXPECT_TRUE(table.empty());
  }
}

TEST(RequestTable, ConcurrentThreadsEachCompleteTheirOwnRequests) {
  RequestTable table;
  constexpr int kThreads = 8, kPerThread = 5000;
  std::vector<std::thread> threads;
  std::vector<int> completed(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(t);
      for (int i = 0; i < kPerThread; ++i) {
        const MPI_Request handle = t * kPerThread + i + 1;
        table.track(handle, Fn::Iallreduce, i, false);
        if (random() % 2) table.started(handle, i, 1);
        if (table.complete(handle, table.epoch())) ++completed[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(completed[t], kPerThread);
  EXPECT_TRUE(table.empty());
}

TEST(RequestSnapshot, KeepsHandlesBeyondTheInlineBuffer) {
  std::vector<MPI_Request> handles(40);
  for (int i = 0; i < 40; ++i) handles[i] = 1000 + i;
  RequestSnapshot snapshot;
  snapshot.take(handles.data(), 40, 5);
  EXPECT_EQ(snapshot.epoch(), 5u);
  std::fill(handles.begin(), handles.end(), MPI_REQUEST_NULL);
  ASSERT_EQ(snapshot.size(), 40);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(snapshot[i], 1000 + i);
  EXPECT_EQ(snapshot[40], MPI_REQUEST_NULL);
  EXPECT_EQ(snapshot[-1], MPI_REQUEST_NULL);
}
