/// @file cli_fwd.h
/// @brief The CLI11 classes dpt's headers name, declared without CLI11
/// itself: its header costs ~4 s of compile time (it defines objects) in every
/// file that includes it, and most files that include a dpt header never touch
/// a flag. A file that registers or parses flags includes <CLI/CLI.hpp>.
#pragma once

namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI
