// The VM record of a large job fits slurmdbd's column (lib/slurm/record_form.hpp):
// grouped and lossless while it fits, summarized and then cut, saying so,
// past that; read back one entry per node; host lists written as Slurm's.
#include <random>
#include <set>

#include "catch.hpp"

#include "hostlist.hpp"
#include "job_record.hpp"
#include "record_form.hpp"

using namespace svm;

namespace {

// A ready record as a node's keeper writes it (lib/job/keeper.cpp vm_record).
std::string ready_entry(int i) {
    return R"({"image":"/shared/images/lammps.qcow2","format":"qcow2","digest":"sha256:)" + std::string(64, 'a') +
           R"(","boot":"kernel","create_ms":)" + std::to_string(600 + i % 97) + R"(,"ready_ms":)" +
           std::to_string(9000 + (i * 37) % 2000) + R"(,"vcpus":64,"memory_mib":240000,"guest":"node)" +
           std::to_string(i) + R"(-vm","ip":"10.213.)" + std::to_string((i + 10) / 256) + "." +
           std::to_string((i + 10) % 256) +
           R"(","hugepage_kib":1048576,"placement":"memory bound to NUMA node 0","devices":{"gpus":["0000:3b:00.0",)"
           R"("0000:86:00.0"],"vf":"0000:5e:00.3"}})";
}

// An AdminComment with `n` nodes, `errors` of them failed.
Json job_record(int n, int errors) {
    Json root = parse_admin_comment(R"({"site":"keep me"})");
    for (int i = 1; i <= n; ++i) {
        std::string node = "node" + std::to_string(i);
        Json e = json_parse(i <= errors ? error_record("the guest on " + node + " did not become ready within 300 s " +
                                                       std::string(400, 'x'))
                                        : ready_entry(i),
                            "entry");
        merge_node_record(root.get(), node, e.get(), true);
    }
    return root;
}

json_t* nodes_of(const json_t* root) { return json_object_get(json_object_get(root, "slurm_vm"), "nodes"); }

}  // namespace

TEST_CASE("host lists: names written as one list expand back to the same names", "[record]") {
    CHECK(compress_hostlist({"node3", "node1", "node2", "node7"}) == "node[1-3,7]");
    CHECK(compress_hostlist({"n09", "n10", "n11"}) == "n[09-11]");
    CHECK(compress_hostlist({"n9", "n10"}) == "n[9-10]");
    CHECK(compress_hostlist({"login", "node1"}) == "node1,login");
    CHECK(compress_hostlist({}).empty());
    std::mt19937 rng(3);
    const std::vector<std::string> pool = {"node", "n", "rack1-node", "gpu", "x"};
    for (int round = 0; round < 200; ++round) {
        std::set<std::string> names;
        for (int k = 0; k < 30; ++k) {
            std::string num = std::to_string(rng() % 120);
            if (rng() % 3 == 0) num = std::string(rng() % 3, '0') + num;  // zero padding
            names.insert(pool[rng() % pool.size()] + num + (rng() % 5 == 0 ? "-ib" : ""));
        }
        names.insert("login");
        std::string list = compress_hostlist({names.begin(), names.end()});
        auto back = expand_hostlist(list);
        INFO(list);
        CHECK(std::set<std::string>(back.begin(), back.end()) == names);
        CHECK(back.size() == names.size());
    }
}

TEST_CASE("a small job's record is written as it is", "[record]") {
    Json root = job_record(3, 1);
    std::string text = admin_comment_text(root.get());
    CHECK(text == json_dump(root.get()));
    CHECK(text.find("grouped") == std::string::npos);
}

TEST_CASE("1,000 nodes' record fits slurmdbd's column and reads back whole", "[record]") {
    Json root = job_record(1000, 3);
    CHECK(json_dump(root.get()).size() > 400000);  // as it was written before: cut by slurmdbd
    std::string text = admin_comment_text(root.get());
    CHECK(text.size() <= kRecordBudget);
    CHECK(text.find("\"form\":\"grouped\"") != std::string::npos);
    CHECK(text.find("summarized") == std::string::npos);
    CHECK(text.find("omitted") == std::string::npos);
    CHECK(text.find("\"site\":\"keep me\"") != std::string::npos);
    // Lossless: read back, it is the record that was grouped.
    Json back = parse_admin_comment(text);
    CHECK(json_equal(back.get(), root.get()));
    CHECK(json_object_size(nodes_of(back.get())) == 1000);
    // Nothing changed: nothing to write; one node's new error: a write, kept.
    CHECK_FALSE(updated_admin_comment(text, [](json_t*) {}));
    auto next = updated_admin_comment(text, [](json_t* r) {
        Json e = json_parse(error_record("the guest on node500 shut down or crashed"), "e");
        merge_node_record(r, "node500", e.get());
    });
    REQUIRE(next);
    CHECK(next->size() <= kRecordBudget);
    Json again = parse_admin_comment(*next);
    json_t* n500 = json_object_get(nodes_of(again.get()), "node500");
    CHECK(json_string_value(json_object_get(n500, "error")) ==
          std::string("the guest on node500 shut down or crashed"));
    CHECK(json_integer_value(json_object_get(n500, "ready_ms")) == 9000 + (500 * 37) % 2000);
    CHECK(json_string_value(json_object_get(json_object_get(nodes_of(again.get()), "node999"), "ip")) ==
          std::string("10.213.3.241"));
}

TEST_CASE("past what fits: per-node values summarized, then nodes named as omitted, never over", "[record]") {
    // 5,000 nodes: the per-node values no longer fit; they become summaries.
    Json big = job_record(5000, 2);
    std::string text = admin_comment_text(big.get());
    CHECK(text.size() <= kRecordBudget);
    Json read = json_parse(text, "record");
    json_t* vm = json_object_get(read.get(), "slurm_vm");
    CHECK(json_dump(json_object_get(vm, "summarized")) == R"(["create_ms","guest","ip","ready_ms"])");
    json_t* group = json_object_get(json_object_get(vm, "nodes"), "node[3-5000]");
    REQUIRE(group);
    CHECK(json_dump(json_object_get(group, "ready_ms")) == R"({"max":10999,"mean":9997,"min":9000})");
    CHECK_FALSE(json_object_get(group, "ip"));
    CHECK_FALSE(json_object_get(vm, "omitted"));
    // Read back: every node has its entry, the summary in place of its values.
    Json back = parse_admin_comment(text);
    CHECK(json_object_size(nodes_of(back.get())) == 5000);
    CHECK(json_string_value(json_object_get(json_object_get(nodes_of(back.get()), "node2"), "error")) ==
          std::string("the guest on node2 did not become ready within 300 s ") + std::string(147, 'x') + "...");
    // Reading and writing it again changes nothing (no write loop).
    CHECK_FALSE(updated_admin_comment(text, [](json_t*) {}));

    // 400 failed nodes, each its own sentence: what does not fit is named.
    Json failing = job_record(1000, 400);
    std::string cut = admin_comment_text(failing.get());
    CHECK(cut.size() <= kRecordBudget);
    Json cread = json_parse(cut, "record");
    json_t* cvm = json_object_get(cread.get(), "slurm_vm");
    REQUIRE(json_is_string(json_object_get(cvm, "omitted")));
    auto omitted = expand_hostlist(json_string_value(json_object_get(cvm, "omitted")));
    Json cback = parse_admin_comment(cut);
    CHECK(json_object_size(nodes_of(cback.get())) + omitted.size() == 1000);
    CHECK(json_object_get(nodes_of(cback.get()), "node1000"));  // the healthy group comes first
    // Stable: read and written again, by a node with nothing new or by the
    // head with every entry, it stays as it is.
    CHECK_FALSE(updated_admin_comment(cut, [](json_t*) {}));
    CHECK_FALSE(updated_admin_comment(cut, [&](json_t* r) {
        const char* node;
        json_t* e;
        json_object_foreach(nodes_of(failing.get()), node, e) merge_node_record(r, node, e, true);
    }));
}
