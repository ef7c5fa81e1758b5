// point_to_point.cpp — MPI send, recv and sendrecv, each a polling loop over
// non-blocking calls (wait_for in mpi_backend.h) so it can time out or stop.
//
// recv probes first (MPI_Improbe) and checks the sender's count before
// receiving, so a count mismatch is a clear error instead of MPI_ERR_TRUNCATE.
// Above MPI's eager limit (Open MPI on one node: 4 KiB shared memory, 64 KiB
// TCP) an MPI_Isend completes only once its receive is posted: rendezvous.
#include <algorithm>

#include "library_check.h"
#include "mpi/mpi_backend.h"

namespace dpt {
namespace detail {
namespace mpi {

bool MpiBackend::test(MPI_Request& request) {
  int done = 0;
  DPT_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

bool MpiBackend::probe(int src, int tag, MPI_Message* message, MPI_Status* status) {
  int found = 0;
  DPT_MPI_CHECK(MPI_Improbe(src, tag, data_, &found, message, status));
  return found != 0;
}

int MpiBackend::peer_pending(int peer) {
  if (peer < 0 || peer == rank_) return -1;
  int found = 0;
  MPI_Status status;
  if (MPI_Iprobe(peer, MPI_ANY_TAG, data_, &found, &status) != MPI_SUCCESS) return -1;
  return found ? 1 : 0;
}

// Starts receiving a probed message into data; a count mismatch is drained
// into a scratch buffer (so MPI is left clean) and reported.
MPI_Request MpiBackend::receive_matched(MPI_Message* message, const MPI_Status& status, float* data,
                                        int64_t count, int src, int tag) {
  int sent = 0;
  MPI_Status copy = status;
  DPT_MPI_CHECK(MPI_Get_count(&copy, MPI_FLOAT, &sent));
  if (sent != count) {
    std::vector<float> sink(std::max(sent, 1));
    DPT_MPI_CHECK(MPI_Mrecv(sink.data(), sent, MPI_FLOAT, message, MPI_STATUS_IGNORE));
    DPT_FAIL("rank " << rank_ << " expected " << count << " floats from rank " << src << " (tag "
                     << tag << "), but rank " << src << " sent " << sent
                     << " floats: a recv must name exactly the count of its send");
  }
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Imrecv(data, int(count), MPI_FLOAT, message, &request));
  return request;
}

void MpiBackend::send(const float* data, int64_t count, int dst, int tag) {
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Isend(data, int_count(count, "send"), MPI_FLOAT, dst, tag, data_, &request));
  wait_for("send to", dst, tag, count, [&] { return test(request); },
           [&] { MPI_Request_free(&request); });
  count_message(true, dst);
}

void MpiBackend::recv(float* data, int64_t count, int src, int tag) {
  MPI_Message message;
  MPI_Status status;
  wait_for("recv from", src, tag, count, [&] { return probe(src, tag, &message, &status); }, [] {});
  MPI_Request request = receive_matched(&message, status, data, count, src, tag);
  wait_for("recv from", src, tag, count, [&] { return test(request); }, [] {},
           [&] { return peer_evidence("recv from", src, 2); });
  count_message(false, src);
}

void MpiBackend::sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                          int64_t recv_count, int src, int tag) {
  MPI_Request send_request, recv_request = MPI_REQUEST_NULL;
  DPT_MPI_CHECK(MPI_Isend(send_buf, int_count(send_count, "sendrecv"), MPI_FLOAT, dst, tag, data_,
                          &send_request));
  bool sent = false, matched = false, received = false;
  wait_for("sendrecv from", src, tag, recv_count, [&] {
    if (!sent) sent = test(send_request);
    MPI_Message message;
    MPI_Status status;
    if (!matched && probe(src, tag, &message, &status)) {
      matched = true;
      try {
        recv_request = receive_matched(&message, status, recv_buf, recv_count, src, tag);
      } catch (...) {
        if (!sent) MPI_Request_free(&send_request);
        throw;
      }
    }
    if (matched && !received) received = test(recv_request);
    return sent && received;
  }, [&] { if (!sent) MPI_Request_free(&send_request); },
     [&] {  // which half is left: the receive (src's message), or only the send to dst
       if (!matched) return peer_evidence("sendrecv from", src, peer_pending(src));
       if (!received) return peer_evidence("sendrecv from", src, 2);
       return "; its receive is done, its send to rank " + std::to_string(dst) + " (" + std::to_string(send_count) +
              " floats) is not: rank " + std::to_string(dst) + " has not taken it, so it waits on another rank, "
              "or it stopped (frozen, or far slower)";
     });
  count_message(true, dst);
  count_message(false, src);
}

}  // namespace mpi
}  // namespace detail
}  // namespace dpt
