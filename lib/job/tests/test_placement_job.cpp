// The guest's placement as the job makes it (issue 3): the keeper's memory
// backing, the prepared devices in the plan, the node configuration's
// placement keys and the job's irq profile (the domain's own layout:
// guest/tests/test_placement.cpp).
#include "catch.hpp"

#include "config.hpp"
#include "domain_xml.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_scenarios.hpp"
#include "irq_profile.hpp"
#include "job_plan.hpp"
#include "keeper.hpp"
#include "proc.hpp"
#include "support.hpp"
#include "vm_job.hpp"

namespace {
using svm::test::domain_validates;
using svm::test::HugeTree;
using svm::test::placement_domain;
using svm::test::reason_of;

svm::PlannedDevice planned(const char* address, const char* role, int numa_node) {
    svm::PlannedDevice d;
    d.address = svm::PciAddress::parse(address);
    d.role = role;
    d.numa_node = numa_node;
    return d;
}

}  // namespace

TEST_CASE("keeper: the guest's memory backing follows the plan and refusals name the node", "[placement]") {
    HugeTree t;
    svm::SysfsRoot root(t.root);
    t.proc("mounts", "hugetlbfs /dev/hugepages hugetlbfs rw,pagesize=2M 0 0\n");
    t.pool(1, 2048, 1024, 1024);
    svm::JobPlan p;
    p.node = "n1";
    p.numa_node = 1;
    p.hugepages = "required";
    p.hugepage_size_kib = 2048;
    svm::DomainSpec d = placement_domain();
    d.memory_mib = 1025;
    std::string note = svm::back_guest_memory(d, p, root);
    CHECK(d.hugepage_kib == 2048);
    CHECK(d.memory_mib == 1024);
    CHECK_THAT(note, Catch::StartsWith("hugepages: 512 pages"));
    std::string x = svm::domain_xml(d);
    CHECK(x.find("  <memoryBacking>\n    <hugepages>\n      <page size='2048' unit='KiB'/>\n    </hugepages>\n"
                 "  </memoryBacking>\n") != std::string::npos);
    CHECK(x.find("<memory unit='MiB'>1024</memory>") != std::string::npos);
    CHECK(domain_validates(x));

    d = placement_domain();
    d.memory_mib = 4096;  // 2048 pages, 1024 free
    CHECK(reason_of([&] { svm::back_guest_memory(d, p, root); }) ==
          "node n1 cannot start the job's guest: hugepages are required by the node configuration, but NUMA node 1 "
          "has 1024 free 2048 KiB hugepages and the guest needs 2048 (4096 MiB) (a problem of the node, not of the "
          "job)");
    p.hugepages = "auto";
    CHECK(svm::back_guest_memory(d, p, root).rfind("normal pages: NUMA node 1 has 1024 free", 0) == 0);
    CHECK(d.hugepage_kib == 0);
    CHECK(d.memory_mib == 4096);
    CHECK(svm::domain_xml(d).find("memoryBacking") == std::string::npos);

    // domain_xml refuses memory that is not whole pages.
    d.hugepage_kib = 1048576;
    d.memory_mib = 1536;
    CHECK_THROWS_AS(svm::domain_xml(d), svm::Error);
}

TEST_CASE("the prepared devices go into the plan with their roles and the VF's identity", "[placement]") {
    svm::DevicePlan plan;
    svm::PlannedDevice gpu = planned("0000:3b:00.0", "gpu", 0), audio = planned("0000:3b:00.1", "companion", 0);
    plan.devices = {gpu, audio};
    svm::PreparedDevices pd;
    svm::VfAssignment vf;
    vf.vf = svm::PciAddress::parse("0000:2b:00.2");
    vf.numa_node = 0;
    vf.link_layer = "infiniband";
    vf.port_guid = "02:00:00:00:00:07:00:01";
    vf.mac = "";
    pd.hostdevs = {gpu.address, audio.address, vf.vf};
    pd.vf = vf;
    pd.numa_node = 0;
    pd.cpus = "0-7";
    svm::JobPlan p;
    svm::plan_devices_of_guest(p, plan, pd);
    REQUIRE(p.hostdevs.size() == 3);
    CHECK(p.hostdevs[0].address == "0000:3b:00.0");
    CHECK(p.hostdevs[0].role == "gpu");
    CHECK(p.hostdevs[1].role == "companion");
    CHECK(p.hostdevs[2].address == "0000:2b:00.2");
    CHECK(p.hostdevs[2].role == "vf");
    CHECK(p.hostdevs[2].numa_node == 0);
    CHECK(p.vf_link_layer == "infiniband");
    CHECK(p.vf_port_guid == "02:00:00:00:00:07:00:01");
    CHECK(p.numa_node == 0);
    CHECK(p.device_cpus == "0-7");
}

TEST_CASE("irq profiles follow the seed and unknown names are refused with the valid ones", "[placement]") {
    CHECK(svm::irq_profile_names() == "default, latency, throughput");
    REQUIRE(svm::find_irq_profile("latency"));
    CHECK(svm::find_irq_profile("latency")->settings ==
          std::vector<std::pair<std::string, std::string>>{
              {"adaptive-rx", "off"}, {"rx-usecs", "0"}, {"rx-frames", "1"}});
    CHECK(svm::find_irq_profile("throughput")->settings ==
          std::vector<std::pair<std::string, std::string>>{
              {"adaptive-rx", "on"}, {"rx-usecs-low", "40"}, {"rx-usecs-high", "1000"}, {"rx-frames", "88"}});
    CHECK(svm::find_irq_profile("default")->settings.empty());
    CHECK(svm::find_irq_profile("fast") == nullptr);
    CHECK(reason_of([] { svm::require_irq_profile("fast", "--vm-irq-profile"); }) ==
          "--vm-irq-profile \"fast\" is not an interrupt moderation profile; valid profiles: default, latency, "
          "throughput");

    char* env[] = {const_cast<char*>("SLURM_JOB_ID=5"), const_cast<char*>("SLURM_JOB_UID=0"),
                   const_cast<char*>("SPANK_SLURM_VM_IRQ_PROFILE=latency"), nullptr};
    CHECK(svm::job_request_from_env(env).irq_profile == "latency");
}

TEST_CASE("the prolog's request keeps the job's SLUID only when shaped as one", "[placement]") {
    char* env[] = {const_cast<char*>("SLURM_JOB_ID=5"), const_cast<char*>("SLURM_JOB_UID=0"),
                   const_cast<char*>("SLURM_JOB_SLUID=s4FDM8JVPTQ000"), nullptr};
    CHECK(svm::job_request_from_env(env).sluid == "s4FDM8JVPTQ000");
    env[2] = const_cast<char*>("SLURM_JOB_SLUID=../s4FDM8JVPTQ0");
    CHECK(svm::job_request_from_env(env).sluid.empty());
    env[2] = nullptr;  // Slurm before 26.05
    CHECK(svm::job_request_from_env(env).sluid.empty());
}

TEST_CASE("configuration: hugepages and hugepage_size_kib and irq_profile", "[placement]") {
    auto c = svm::parse_config("{}", "n", "x");
    CHECK(c.hugepages == "auto");
    CHECK(c.hugepage_size_kib == 0);
    CHECK(c.irq_profile == "default");
    c = svm::parse_config(R"({"hugepages": "required", "hugepage_size_kib": 1048576, "irq_profile": "throughput"})",
                          "n", "x");
    CHECK(c.hugepages == "required");
    CHECK(c.hugepage_size_kib == 1048576);
    CHECK(c.irq_profile == "throughput");
    CHECK_THAT(reason_of([] { svm::parse_config(R"({"hugepages": "yes"})", "n", "x"); }),
               Catch::Equals("hugepages must be \"off\", \"auto\" or \"required\" (it is \"yes\")"));
    CHECK_THAT(reason_of([] { svm::parse_config(R"({"hugepage_size_kib": 3000})", "n", "x"); }),
               Catch::StartsWith("hugepage_size_kib must be 0 (the kernel's default) or a hugepage size in KiB") &&
                   Catch::EndsWith("(it is 3000)"));
    CHECK(svm::parse_config(R"({"hugepage_size_kib": 64})", "n", "x").hugepage_size_kib == 64);
    CHECK_THAT(reason_of([] { svm::parse_config(R"({"irq_profile": "fast"})", "n", "x"); }),
               Catch::Equals("irq_profile must be \"default\", \"latency\" or \"throughput\" (it is \"fast\")"));
}

TEST_CASE("devices on several NUMA nodes: guest memory interleaved over them, and the plan says so", "[placement]") {
    svm::DevicePlan plan;
    svm::PlannedDevice a = planned("0000:1b:00.0", "gpu", 0), b = planned("0000:9b:00.0", "gpu", 1);
    plan.devices = {a, b};
    plan.numa_nodes = {0, 1};
    svm::PreparedDevices pd;
    pd.hostdevs = {a.address, b.address};
    pd.cpus = "0-15";
    svm::JobPlan p;
    svm::plan_devices_of_guest(p, plan, pd);
    CHECK(p.numa_node == -1);
    CHECK(p.numa_nodes == std::vector<int>{0, 1});
    CHECK(p.placement ==
          "the devices sit on NUMA nodes 0,1: guest memory interleaved over them, vCPUs on their CPUs first");
    auto q = svm::JobPlan::from_json(p.to_json(), "plan");
    CHECK(q.numa_nodes == p.numa_nodes);
    CHECK(q.placement == p.placement);

    svm::DomainSpec s = placement_domain();
    s.numa_interleave = {0, 1};
    std::string x = svm::domain_xml(s);
    CHECK(x.find("<memory mode='interleave' nodeset='0,1'/>") != std::string::npos);
    CHECK(domain_validates(x));
    s.numa_node = 1;  // one node wins: strict
    CHECK(svm::domain_xml(s).find("<memory mode='strict' nodeset='1'/>") != std::string::npos);

    pd.numa_node = 0;
    plan.numa_nodes = {0};
    svm::plan_devices_of_guest(p, plan, pd);
    CHECK(p.numa_nodes.empty());
    CHECK(p.placement.find("bound to NUMA node 0") != std::string::npos);
}
