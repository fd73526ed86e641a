// The stand-in for MPI_ERRORS_ARE_FATAL (fatal_errors.hpp).
#include "interpose/fatal_errors.hpp"

#include <atomic>
#include <string>

#include "interpose/function_table.hpp"
#include "interpose/runtime.hpp"
#include "monitor/thread_state.hpp"

namespace commtap::interpose {

namespace {

MPI_Errhandler g_recorder = MPI_ERRHANDLER_NULL;
// Set by the first error handled: a second error (of another thread, or of a call made here)
// goes straight to MPI's fatal handler.
std::atomic<bool> g_handling{false};

// The call's peer (a rank of `comm`, of its remote group for an intercommunicator) in
// MPI_COMM_WORLD; -1 where it has none or not one rank.
int world_rank_of(MPI_Comm comm, int peer) {
  if (peer < 0) return -1;  // none, MPI_ANY_SOURCE, MPI_PROC_NULL, MPI_ROOT
  int inter = 0;
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
      (inter ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group)) != MPI_SUCCESS)
    return -1;
  int in_world = MPI_UNDEFINED;
  if (PMPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
    PMPI_Group_translate_ranks(group, 1, &peer, world, &in_world);
    PMPI_Group_free(&world);
  }
  PMPI_Group_free(&group);
  return in_world == MPI_UNDEFINED ? -1 : in_world;
}

// The error's class by name: the analyzer tells a peer's failure (MPI_ERR_OTHER, as MPICH calls
// a failed transport) from the caller's own mistake (MPI_ERR_TAG, MPI_ERR_RANK, ...).
std::string class_name(int code) {
  int error_class = MPI_ERR_UNKNOWN;
  if (PMPI_Error_class(code, &error_class) != MPI_SUCCESS) return "";
#define COMMTAP_CLASS(name) \
  { name, #name }
  static const struct {
    int value;
    const char* name;
  } kNamed[] = {
      COMMTAP_CLASS(MPI_ERR_BUFFER),       COMMTAP_CLASS(MPI_ERR_COUNT),
      COMMTAP_CLASS(MPI_ERR_TYPE),         COMMTAP_CLASS(MPI_ERR_TAG),
      COMMTAP_CLASS(MPI_ERR_COMM),         COMMTAP_CLASS(MPI_ERR_RANK),
      COMMTAP_CLASS(MPI_ERR_ROOT),         COMMTAP_CLASS(MPI_ERR_TRUNCATE),
      COMMTAP_CLASS(MPI_ERR_GROUP),        COMMTAP_CLASS(MPI_ERR_OP),
      COMMTAP_CLASS(MPI_ERR_REQUEST),      COMMTAP_CLASS(MPI_ERR_TOPOLOGY),
      COMMTAP_CLASS(MPI_ERR_DIMS),         COMMTAP_CLASS(MPI_ERR_ARG),
      COMMTAP_CLASS(MPI_ERR_OTHER),        COMMTAP_CLASS(MPI_ERR_UNKNOWN),
      COMMTAP_CLASS(MPI_ERR_INTERN),       COMMTAP_CLASS(MPI_ERR_IN_STATUS),
      COMMTAP_CLASS(MPI_ERR_PENDING),      COMMTAP_CLASS(MPI_ERR_NO_MEM),
#ifdef MPI_ERR_PROC_ABORTED
      COMMTAP_CLASS(MPI_ERR_PROC_ABORTED),
#endif
#ifdef MPIX_ERR_PROC_FAILED
      COMMTAP_CLASS(MPIX_ERR_PROC_FAILED),
#endif
#ifdef MPIX_ERR_REVOKED
      COMMTAP_CLASS(MPIX_ERR_REVOKED),
#endif
  };
#undef COMMTAP_CLASS
  for (const auto& named : kNamed)
    if (named.value == error_class) return named.name;
  return "class " + std::to_string(error_class);
}

// What the failing call was, from this thread's activity record (none where the error came
// from a call commtap does not record, or from commtap's own).
monitor::RankFacts::Error describe(MPI_Comm comm, int code) {
  monitor::RankFacts::Error error;
  error.comm_id = runtime().communicators.id_of(comm);
  const monitor::Activity* activity =
      runtime().counters ? runtime().counters->local_activity() : nullptr;
  if (const std::uint32_t function =
          activity ? activity->function.load(std::memory_order_relaxed) : 0;
      function != 0 && function <= kFunctionCount) {
    error.function = kFunctionName[function - 1];
    error.peer = world_rank_of(comm, activity->peer.load(std::memory_order_relaxed));
  }
  error.error_class = class_name(code);
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (PMPI_Error_string(code, text, &length) == MPI_SUCCESS && length > 0)
    error.text.assign(text, static_cast<std::size_t>(length));
  return error;
}

extern "C" void record_fatal_error(MPI_Comm* comm, int* code, ...) {
  const MPI_Comm on = comm != nullptr ? *comm : MPI_COMM_WORLD;
  const int error = code != nullptr ? *code : MPI_ERR_OTHER;
  if (!g_handling.exchange(true)) {
    // What describe() asks of the communicator (its group) returns its errors rather than
    // coming back here.
    PMPI_Comm_set_errhandler(on, MPI_ERRORS_RETURN);
    stop_at_fatal_error(describe(on, error));
  }
  // What MPI_ERRORS_ARE_FATAL does: MPI prints the error stack and aborts the job. (Its first
  // line names MPI_Comm_call_errhandler where the failed call's name would be; MPI_Abort would
  // print no stack, and MPI_ERRORS_ABORT, which aborts only the communicator's processes, is
  // refused by MPICH 4.0.2's MPI_Comm_set_errhandler.)
  PMPI_Comm_set_errhandler(on, MPI_ERRORS_ARE_FATAL);
  PMPI_Comm_call_errhandler(on, error);
  PMPI_Abort(on, error);  // not reached
}

bool is_fatal(MPI_Comm comm) {
  MPI_Errhandler current = MPI_ERRHANDLER_NULL;
  if (PMPI_Comm_get_errhandler(comm, &current) != MPI_SUCCESS) return false;
  const bool fatal = current == MPI_ERRORS_ARE_FATAL;
  PMPI_Errhandler_free(&current);
  return fatal;
}

}  // namespace

void install_fatal_error_recorder() {
  if (g_recorder == MPI_ERRHANDLER_NULL &&
      PMPI_Comm_create_errhandler(record_fatal_error, &g_recorder) != MPI_SUCCESS)
    return;
  for (MPI_Comm comm : {MPI_COMM_WORLD, MPI_COMM_SELF})
    if (is_fatal(comm)) PMPI_Comm_set_errhandler(comm, g_recorder);
}

void show_as_fatal(MPI_Errhandler* handler) {
  if (handler == nullptr || g_recorder == MPI_ERRHANDLER_NULL || *handler != g_recorder) return;
  PMPI_Errhandler_free(handler);  // the reference MPI_Comm_get_errhandler gave
  *handler = MPI_ERRORS_ARE_FATAL;
}

}  // namespace commtap::interpose
