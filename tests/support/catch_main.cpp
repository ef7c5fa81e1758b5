// catch_main.cpp — main() for every Catch2 test program (Catch2 2 or 3): one
// Catch::Session, so a program can add its own set-up around it.
#define CATCH_CONFIG_RUNNER  // Catch2 2: we write main(); ignored by Catch2 3
#include "support/catch.h"

int main(int argc, char** argv) { return Catch::Session().run(argc, argv); }
