// A VM record read back from Slurm is untrusted bytes (job_record.hpp
// parse_record, hostlist.hpp expand_hostlist): bounded, checked against the
// record's schema, and replaced, never merged into, when it is not ours.
#include <chrono>

#include "catch.hpp"

#include "error.hpp"
#include "hostlist.hpp"
#include "job_record.hpp"
#include "record_form.hpp"

using namespace svm;

namespace {

json_t* nodes_of(const json_t* root) { return json_object_get(json_object_get(root, "slurm_vm"), "nodes"); }

long ms_since(std::chrono::steady_clock::time_point t0) {
    return static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

TEST_CASE("host lists: expansion is bounded and refuses what is not a host list", "[record]") {
    CHECK(expand_hostlist("node[1-3],login") == std::vector<std::string>{"node1", "node2", "node3", "login"});
    CHECK(expand_hostlist("n[08-10]") == std::vector<std::string>{"n08", "n09", "n10"});
    CHECK(expand_hostlist("a[1-2]b[3,5]c") == std::vector<std::string>{"a1b3c", "a1b5c", "a2b3c", "a2b5c"});
    CHECK(expand_hostlist("").empty());
    CHECK(expand_hostlist("n[1-4]", 4).size() == 4);
    CHECK_THROWS_AS(expand_hostlist("n[1-5]", 4), Error);
    for (const char* bad :
         {"n[1-", "n]1[", "n[[1]]", "n[a-b]", "n[3-1]", "n[1-2", "n[]", "n[1,]", "n[-1]", "n[1234567890]", "n[1-2]]"})
        CHECK_THROWS_AS(expand_hostlist(bad), Error);
    CHECK_THROWS_AS(expand_hostlist(std::string(300, 'n')), Error);          // a name over 255 bytes
    CHECK_THROWS_AS(expand_hostlist(std::string(70000, 'n') + "1"), Error);  // a list over 64 KiB
    CHECK_THROWS_AS(expand_hostlist("x[0-0][0-0]" + std::string(260, 'y')), Error);

    // 10^10 names, or a name grown level by level: refused at the bound, at once.
    auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(expand_hostlist("a[0-99999]b[0-99999]"), Error);
    CHECK_THROWS_AS(expand_hostlist("a[0-99999]b[0-99999]", 1000), Error);
    CHECK_THROWS_AS(expand_hostlist("a[0-999999999]"), Error);
    std::string deep = "a";
    for (int i = 0; i < 10000; ++i) deep += "[0-9]";
    CHECK_THROWS_AS(expand_hostlist(deep), Error);
    CHECK(ms_since(t0) < 3000);
}

TEST_CASE("record: a forged or hostile AdminComment is replaced, not merged into", "[record]") {
    // What a user's job name once made root take for the record.
    RecordRead forged = parse_record(
        R"({"forged_by":"svmuser","slurm_vm":{"v":1,"forged_by":"svmuser","nodes":{"node1":{"image":"/x"}}}})");
    CHECK(forged.refused.find("not slurm-vm's") != std::string::npos);
    CHECK_FALSE(json_object_get(forged.root.get(), "slurm_vm"));
    CHECK(json_object_get(forged.root.get(), "forged_by"));  // a site's own key (an admin's): kept

    // A node name that is not one, a value of the wrong type, an entry not an object.
    for (const char* bad :
         {R"({"slurm_vm":{"v":1,"nodes":{"node1\n":{}}}})",
          R"({"slurm_vm":{"v":1,"nodes":{"node1":{"vcpus":"many"}}}})", R"({"slurm_vm":{"v":1,"nodes":{"node1":[1]}}})",
          R"({"slurm_vm":{"v":2,"nodes":{}}})", R"({"slurm_vm":{"v":1,"nodes":{"node1":{"x":{"deep":1}}}}})",
          R"({"slurm_vm":{"v":1,"form":"grouped","nodes":{"n[1-":{}}}})"}) {
        RecordRead r = parse_record(bad);
        INFO(bad);
        CHECK_FALSE(r.refused.empty());
        CHECK_FALSE(json_object_get(r.root.get(), "slurm_vm"));
    }

    // The grouped record whose host list multiplies: refused in bounded time.
    auto t0 = std::chrono::steady_clock::now();
    RecordRead huge = parse_record(
        R"({"site":1,"slurm_vm":{"v":1,"form":"grouped","nodes":{"a[0-99999]b[0-99999]":{"image":"/x"}}}})");
    CHECK(ms_since(t0) < 5000);
    CHECK(huge.refused.find("more than") != std::string::npos);
    CHECK_FALSE(json_object_get(huge.root.get(), "slurm_vm"));
    CHECK(json_object_get(huge.root.get(), "site"));
    // Two groups together over the bound.
    CHECK_FALSE(
        parse_record(R"({"slurm_vm":{"v":1,"form":"grouped","nodes":{"a[1-3]":{},"b[1-3]":{}}}})", 5).refused.empty());
    CHECK(
        parse_record(R"({"slurm_vm":{"v":1,"form":"grouped","nodes":{"a[1-3]":{},"b[1-3]":{}}}})", 6).refused.empty());

    // Too long, not JSON, duplicate keys: an empty object.
    CHECK_FALSE(parse_record(std::string(kMaxAdminCommentBytes + 1, ' ')).refused.empty());
    CHECK_FALSE(parse_record("not json").refused.empty());
    CHECK_FALSE(parse_record(R"({"a":1,"a":2})").refused.empty());
    CHECK(json_object_size(parse_record("not json").root.get()) == 0);
}

TEST_CASE("record: slurm-vm's own records are taken whole", "[record]") {
    std::string ours =
        R"({"site":"keep","slurm_vm":{"v":1,"nodes":{"node1":{"image":"/i.qcow2","format":"qcow2","digest":"sha256:ab",)"
        R"("boot":"kernel","create_ms":600,"ready_ms":9000,"vcpus":2,"memory_mib":1024,"guest":"node1-vm","ip":"10.213.0.10",)"
        R"("placement":"p","devices":{"plan":{"gpus":[]}},"some_new_key":"x"},"node2":{"error":"it failed"}}}})";
    RecordRead r = parse_record(ours);
    CHECK(r.refused.empty());
    CHECK(json_object_size(nodes_of(r.root.get())) == 2);
    std::string grouped =
        R"({"slurm_vm":{"v":1,"form":"grouped","summarized":["ready_ms"],"omitted":"node9",)"
        R"("nodes":{"node[1-3]":{"image":"/i","ready_ms":{"min":1,"max":3,"mean":2},"guest":["a","b","c"]}}}})";
    RecordRead g = parse_record(grouped);
    CHECK(g.refused.empty());
    REQUIRE(json_object_size(nodes_of(g.root.get())) == 3);
    CHECK(std::string(json_string_value(json_object_get(json_object_get(nodes_of(g.root.get()), "node2"), "guest"))) ==
          "b");

    // A refused record is written anew: updated_admin_comment never returns "nothing to do" for it.
    auto next = updated_admin_comment(R"({"slurm_vm":{"v":1,"forged_by":1,"nodes":{}}})", [](json_t* root) {
        Json e(json_pack("{s:s}", "error", "x"));
        merge_node_record(root, "node1", e.get());
    });
    REQUIRE(next);
    CHECK(next->find("forged_by") == std::string::npos);
}
