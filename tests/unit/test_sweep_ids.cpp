// slurm-vm sweep: which job ids squeue says are live on a node (admin/squeue_ids.hpp).
#include "catch.hpp"

#include "../../admin/squeue_ids.hpp"

using svm::admin::parse_squeue_live_jobs;
using Ids = std::set<uint32_t>;

TEST_CASE("sweep asks squeue for job ids (%A) and states (%T), not display ids (%i)", "[sweep]") {
    CHECK(std::string(svm::admin::kSqueueJobFormat) == "%A %T");
}

TEST_CASE("sweep: squeue's jobs are one id and state per line, blanks ignored", "[sweep]") {
    CHECK(parse_squeue_live_jobs("") == Ids{});
    CHECK(parse_squeue_live_jobs("\n\n  \n") == Ids{});
    CHECK(parse_squeue_live_jobs("42 RUNNING\n") == Ids{42});
    CHECK(parse_squeue_live_jobs("42 RUNNING") == Ids{42});
    CHECK(parse_squeue_live_jobs("  345 PENDING\n346  RUNNING \r\n\t7\tSUSPENDED\n") == Ids{7, 345, 346});
    // One job id per array task / het component, each once.
    CHECK(parse_squeue_live_jobs("340 RUNNING\n340 RUNNING\n345 RUNNING\n") == Ids{340, 345});
    CHECK(parse_squeue_live_jobs("4294967295 RUNNING\n") == Ids{4294967295u});
}

TEST_CASE("sweep: a job whose state carries a flag (SIGNALING on Slurm 22.05) is live", "[sweep]") {
    // squeue -t R leaves such a job out on 22.05; every state is asked for,
    // and only the states a job ends in make it gone.
    CHECK(parse_squeue_live_jobs("51 SIGNALING\n52 COMPLETING\n53 CONFIGURING\n54 REQUEUED\n55 STOPPED\n") ==
          Ids{51, 52, 53, 54, 55});
    CHECK(parse_squeue_live_jobs("56 SOME_FUTURE_STATE\n") == Ids{56});  // not known: not taken for gone
    CHECK(parse_squeue_live_jobs("60 COMPLETED\n61 CANCELLED\n62 FAILED\n63 TIMEOUT\n64 NODE_FAIL\n65 "
                                 "PREEMPTED\n66 BOOT_FAIL\n67 DEADLINE\n68 OUT_OF_MEMORY\n69 RUNNING\n") == Ids{69});
}

TEST_CASE("sweep: squeue %i forms and other text are refused, never cut to a wrong job id", "[sweep]") {
    // A caller that gets nullopt touches nothing: a wrong id would let sweep
    // tear down a live job, or keep a dead one forever.
    CHECK_FALSE(parse_squeue_live_jobs("42\n"));  // no state
    CHECK_FALSE(parse_squeue_live_jobs("340_5 RUNNING\n"));
    CHECK_FALSE(parse_squeue_live_jobs("345 RUNNING\n340_5 RUNNING\n"));
    CHECK_FALSE(parse_squeue_live_jobs("340_[1-3] PENDING\n"));
    CHECK_FALSE(parse_squeue_live_jobs("350+0 RUNNING\n350+1 RUNNING\n"));
    CHECK_FALSE(parse_squeue_live_jobs("350 351\n"));
    CHECK_FALSE(parse_squeue_live_jobs("JOBID STATE\n42 RUNNING\n"));
    CHECK_FALSE(parse_squeue_live_jobs("42 running\n"));
    CHECK_FALSE(parse_squeue_live_jobs("42 RUNNING extra\n"));
    CHECK_FALSE(parse_squeue_live_jobs("-1 RUNNING\n"));
    CHECK_FALSE(parse_squeue_live_jobs("0 RUNNING\n"));
    CHECK_FALSE(parse_squeue_live_jobs("4294967296 RUNNING\n"));
    CHECK_FALSE(parse_squeue_live_jobs("99999999999999999999 RUNNING\n"));
}
