#include "catch.hpp"

#include "node_drain.hpp"

using namespace svm;

TEST_CASE("drain reason names the job and the first failure, on one line", "[drain]") {
    std::string r = drain_reason(
        170, {"undo vfio_bind: give 0000:3b:00.0 back to nvidia: busy\nfor 2 s", "undo vf_reservation: x"});
    CHECK(r ==
          "slurm-vm: job 170: give 0000:3b:00.0 back to nvidia: busy for 2 s (+1 more, see the node's slurm-vm log)");
    CHECK(drain_reason(3, {}) == "slurm-vm: job 3: cleanup failed");
    std::string long_one = drain_reason(4, {std::string(1000, 'x')});
    CHECK(long_one.size() == 400);
    CHECK(long_one.substr(long_one.size() - 3) == "...");
}
