// Plans and domains shared by the guest's and the job's tests (header only:
// the binaries that include it link the guest's library).
#pragma once
#include "domain_xml.hpp"
#include "job_plan.hpp"

namespace svm::test {

// Job 42 of alice (2001:2001) on node1, its guest node1-vm: what every plan
// of the tests starts from.
inline JobPlan alice_plan() {
    JobPlan p;
    p.job_id = 42;
    p.uid = p.gid = 2001;
    p.user = p.group = "alice";
    p.home = "/home/alice";
    p.node = "node1";
    p.hostname = "node1-vm";
    return p;
}

// Job 7's KVM guest on n1: host CPUs 8-9, 4 GiB, a raw base image, a seed.
inline DomainSpec placement_domain() {
    DomainSpec s;
    s.name = "slurm-vm-7-n1";
    s.type = "kvm";
    s.memory_mib = 4096;
    s.host_cpus = {8, 9};
    s.overlay = "/run/slurm-vm/job_7/overlay.qcow2";
    s.base = "/img.raw";
    s.base_format = "raw";
    s.seed = "/run/slurm-vm/job_7/seed.iso";
    return s;
}

}  // namespace svm::test
