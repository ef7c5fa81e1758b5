/// @file restart_lecture.h
/// @brief Chapter 16's lesson under mpirun (provided): one launch, resumed
/// or fresh, its quorum, its slots (process_rank.h), and the verdicts on the
/// whole run across every launch the checkpoint carried.
#pragma once

#include "ch16_flags.h"
#include "dpt/lecture.h"

namespace dpt::ch16 {

/// The lecture of one launch under `mpirun -np N ch16_fault_tolerance`
/// (every process; rank 0 prints and judges). `relaunch` becomes true on
/// every process when a --join ended the launch (exit kRelaunchExit).
void restart_lecture(Lecture& lec, const Ch16Flags& flags, bool& relaunch);

}  // namespace dpt::ch16
