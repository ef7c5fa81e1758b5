/// @file checks.h
/// @brief Chapter 16's verdicts (provided): what the run left in its record,
/// judged against the oracles (replay.h) and the plan it was given.
#pragma once

#include "dpt/comm/traffic_log.h"
#include "dpt/data.h"
#include "dpt/fault_plan.h"
#include "dpt/launch.h"
#include "dpt/nn.h"
#include "dpt/options.h"
#include "dpt/report.h"
#include "dpt/verdict.h"
#include "elastic_rank.h"
#include "lighthouse.h"
#include "run_record.h"

namespace dpt::ch16 {

/// The model the run ends with, for --save-weights and the held-out score:
/// the flags' architecture holding the lowest finishing rank's weights
/// (every finisher holds the same, a verdict says). False when none finished.
bool final_model(const Options& o, const RunRecord& record, MLP& model);

/// Collective over ctx's world: calls commit_step twice on a 3-float replica,
/// every member fine and then the last one not, and judges each against the
/// contract (ch16.h); true when both hold (commit_probe.cpp).
bool add_commit_probe_verdicts(Context& ctx, Verdicts& v);

/// decide_quorum on six rounds of a run written out (a steady quorum, a
/// loss, a rank back with nothing, the same loss again, a lower rank behind,
/// level again), each judged by the contract's laws (broken_quorum_law), and
/// the id's over all six (broken_id_law) (quorum_probe.cpp).
void add_quorum_probe_verdicts(Verdicts& v);

/// Your heal (ch16.h) on a private group of four (two behind, a source, one
/// in step), each member judged by the contract's laws, the least bytes by
/// experiment (heal_probe.cpp).
void add_heal_probe_verdicts(Verdicts& v);

/// Bytes that reached `member` point to point, from anyone, in `log`.
int64_t bytes_reaching(const TrafficLog& log, int member);

/// Payload bytes `member` passed to any library collective, in `log`: a
/// collective reaches every member of its group (heal_probe.cpp).
int64_t collective_payload(const TrafficLog& log, int member);

/// Your heal of one member behind, alone on a private group of two, for a
/// model of `psi` parameters: the bytes that reached the member behind, by
/// any means (-1 if the heal threw). What each heal of the run is held to.
int64_t heal_bytes_alone(int64_t psi);

/// Summary rows and verdicts: replicas identical, the run equal to the
/// ledger's one-device replay, every sample once, the last quorum the plan's
/// survivors, each heal's bytes and weights, each bit flip found and named.
void add_ch16_verdicts(Verdicts& v, Table& summary, const Options& o, const Dataset& data, const FaultPlan& plan,
                       const ElasticSettings& s, RunRecord& record);

/// Verdicts on the lighthouse's decisions (decide_quorum's laws, ch16.h),
/// each judged against the ranks that asked in its round (hole_checks.cpp).
void add_quorum_verdicts(Verdicts& v, const std::vector<Lighthouse::RoundRecord>& rounds);

/// Under mpirun, where each launch is one quorum: the id's law over every
/// committed step of every launch, as the ledger holds them (hole_checks.cpp).
void add_ledger_id_verdict(Verdicts& v, const std::vector<LedgerEntry>& ledger);

/// A verdict on assign_samples (ch16.h): every committed step consumed the
/// global batch the flags' policy (--keep) sets (hole_checks.cpp).
void add_share_verdicts(Verdicts& v, const Options& o, const ElasticSettings& s, const RunRecord& record);

}  // namespace dpt::ch16
