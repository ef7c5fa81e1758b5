/// @file comm.h
/// @brief Everything about communication, in one include: the Communicator a
/// chapter talks through (comm/communicator.h), the traffic log
/// (comm/traffic_log.h), the link model (comm/link_model.h) and async work
/// handles (comm/async.h). Start reading at comm/communicator.h.
#pragma once

#include "dpt/comm/async.h"
#include "dpt/comm/communicator.h"
#include "dpt/comm/link_model.h"
#include "dpt/comm/traffic_log.h"
