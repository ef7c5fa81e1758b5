// Fixture for tests/grade: two holes in one file.
namespace dpt::ch03 {
std::vector<int64_t> shard_indices(const std::vector<int64_t>& global, int rank, int world) {
  throw NotImplemented("ch03 shard_indices — see exercises/03_dp/dp.cpp");
}
void host_average_gradients(Communicator& comm, std::vector<Tensor>& grads) {
  throw NotImplemented("ch03 host_average_gradients — see exercises/03_dp/dp.cpp");
}
}  // namespace dpt::ch03
