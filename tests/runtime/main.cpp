// Catch2's main for test_runtime.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
