// Test helper: a fault whose inject() fails part-way and whose undo of that fails too (fault.h,
// Fault::inject()). The fault must stay active, say so in its message, and stay outstanding in
// the ledger until a heal takes effect; the same steps for every fault kind.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "fencecheck/faults/fault.h"
#include "fencecheck/faults/ledger.h"

namespace fctest {

class FailedUndo {
 public:
  /// Records the fault's inject in a fresh ledger at ledger_path, as the orchestrator does first.
  FailedUndo(fencecheck::faults::Fault& fault, const std::filesystem::path& ledger_path)
      : fault_(fault), path_((std::filesystem::remove(ledger_path), ledger_path)), ledger_(path_, "r1"),
        id_(ledger_.record_inject(fault)) {}

  /// inject() must throw FaultError (or FaultUnavailable) saying its undo failed; the fault stays
  /// active and the ledger's heal (what the orchestrator calls next) is not recorded. Returns the
  /// message.
  std::string inject_fails_and_stays_in_effect() {
    std::string what;
    try {
      fault_.inject();
      ADD_FAILURE() << "inject() must throw";
    } catch (const std::exception& e) {
      what = e.what();
    }
    EXPECT_NE(what.find("; its undo failed too: "), std::string::npos) << what;
    EXPECT_NE(what.find("; still in effect until a heal takes effect"), std::string::npos) << what;
    EXPECT_TRUE(fault_.active());
    EXPECT_FALSE(fault_.heal_failure().empty());
    EXPECT_FALSE(ledger_.heal(fault_, id_)) << "a heal that did not take effect is not recorded";
    EXPECT_EQ(fencecheck::faults::FaultLedger::outstanding(path_).size(), 1u);
    return what;
  }
  /// Once the cause is removed: the heal takes effect, is recorded, and nothing is outstanding.
  void heal_takes_effect() {
    EXPECT_TRUE(ledger_.heal(fault_, id_)) << fault_.heal_failure();
    EXPECT_FALSE(fault_.active());
    EXPECT_TRUE(fencecheck::faults::FaultLedger::outstanding(path_).empty());
  }

 private:
  fencecheck::faults::Fault& fault_;
  std::filesystem::path path_;
  fencecheck::faults::FaultLedger ledger_;
  std::int64_t id_;
};

}  // namespace fctest
