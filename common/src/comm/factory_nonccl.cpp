// factory_nonccl.cpp — built when the NCCL communicator is not (no CUDA, no
// NCCL or no MPI found by CMake). Filled in by the NCCL communicator's work.
