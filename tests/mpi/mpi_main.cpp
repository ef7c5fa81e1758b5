// mpi_main.cpp — Catch2's main for dpt_mpi_tests. Every process runs every
// test case in the same order, so their launch() calls (and the collectives in
// them) line up. MPI is initialised by the first launch(comm = "mpi") and
// finalised at exit (see comm_mpi.cpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char** argv) { return Catch::Session().run(argc, argv); }
