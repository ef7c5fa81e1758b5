// Fixture for tests/grade: a student's ring, one hole filled.
namespace dpt::ch04 {
namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

void ring_scatter_reduce(Communicator& comm, float* data, int64_t count, const StepHook& after_step) {
  (void)mod(0, 1);
}

void ring_all_gather(Communicator& comm, float* data, int64_t count, const StepHook& after_step) {
  throw NotImplemented("ch04 ring_all_gather — see exercises/04_ring/ring.cpp");
}
}  // namespace dpt::ch04
