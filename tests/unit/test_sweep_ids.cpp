// slurm-vm sweep: which job ids squeue says are on a node (admin/squeue_ids.hpp).
#include "catch.hpp"

#include "../../admin/squeue_ids.hpp"

using svm::admin::parse_squeue_job_ids;
using Ids = std::set<uint32_t>;

TEST_CASE("sweep asks squeue for job ids (%A), not display ids (%i)", "[sweep]") {
    CHECK(std::string(svm::admin::kSqueueJobIdFormat) == "%A");
}

TEST_CASE("sweep: squeue job ids are one per line, blanks ignored", "[sweep]") {
    CHECK(parse_squeue_job_ids("") == Ids{});
    CHECK(parse_squeue_job_ids("\n\n  \n") == Ids{});
    CHECK(parse_squeue_job_ids("42\n") == Ids{42});
    CHECK(parse_squeue_job_ids("42") == Ids{42});
    CHECK(parse_squeue_job_ids("  345\n346  \r\n\t7\n") == Ids{7, 345, 346});
    // A job listed twice (e.g. on a node twice over) is one id.
    CHECK(parse_squeue_job_ids("340\n340\n345\n") == Ids{340, 345});
    CHECK(parse_squeue_job_ids("4294967295\n") == Ids{4294967295u});
}

TEST_CASE("sweep: squeue %i forms are refused, never cut to a wrong job id", "[sweep]") {
    // The old bug: "340_5" (array task 345) cut to 340, "350+1" (component
    // 351) dropped: both jobs then looked gone and sweep removed their guests.
    CHECK_FALSE(parse_squeue_job_ids("340_5\n"));
    CHECK_FALSE(parse_squeue_job_ids("345\n340_5\n"));
    CHECK_FALSE(parse_squeue_job_ids("340_[1-3]\n"));
    CHECK_FALSE(parse_squeue_job_ids("340_[1,3-5%2]\n"));
    CHECK_FALSE(parse_squeue_job_ids("350+0\n350+1\n"));
    CHECK_FALSE(parse_squeue_job_ids("350 351\n"));
    CHECK_FALSE(parse_squeue_job_ids("JOBID\n42\n"));
    CHECK_FALSE(parse_squeue_job_ids("-1\n"));
    CHECK_FALSE(parse_squeue_job_ids("0\n"));
    CHECK_FALSE(parse_squeue_job_ids("4294967296\n"));
    CHECK_FALSE(parse_squeue_job_ids("99999999999999999999\n"));
}
