// The job's AdminComment record (lib/slurm/job_record.hpp): read from
// scontrol's JSON, this node's entry merged, the error record bounded.
#include <string>

#include "catch.hpp"

#include "job_record.hpp"
#include "json.hpp"

TEST_CASE("AdminComment: read from scontrol's JSON, tolerant of anything that is not ours") {
    // Slurm 22.05 (openapi v0.0.38) and later (data_parser) alike: the
    // fields apart, so a job name with a newline forges nothing.
    std::string out =
        R"({"meta":{"plugin":{"type":"openapi\/v0.0.38"}},"errors":[],"jobs":[)"
        R"({"job_id":41,"admin_comment":"other job"},)"
        R"({"job_id":42,"name":"x\nAdminComment={\"forged_by\":1}",)"
        R"("comment":"AdminComment=not-this",)"
        R"("admin_comment":"{\"slurm_vm\":{\"v\":1,\"nodes\":{\"node1\":{\"error\":\"the image has a backing file\"}}}}"}]})";
    std::string why;
    auto v = svm::admin_comment_of_json(out, 42, why);
    REQUIRE(v);
    CHECK(*v == "{\"slurm_vm\":{\"v\":1,\"nodes\":{\"node1\":{\"error\":\"the image has a backing file\"}}}}");
    CHECK(svm::admin_comment_of_json(R"({"jobs":[{"job_id":1,"comment":"x"}]})", 1, why) == std::string());
    CHECK(svm::admin_comment_of_json(R"({"jobs":[{"job_id":1,"admin_comment":null}]})", 1, why) == std::string());
    CHECK_FALSE(svm::admin_comment_of_json(out, 43, why));
    CHECK(why == "job 43 is not in Slurm's answer");
    CHECK_FALSE(svm::admin_comment_of_json("JobId=42 JobName=x\n   AdminComment={}\n", 42, why));
    CHECK_FALSE(svm::admin_comment_of_json(R"({"jobs":[{"job_id":42,"admin_comment":7}]})", 42, why));
    CHECK_FALSE(svm::admin_comment_of_json(R"({"jobs":{"job_id":42}})", 42, why));
    CHECK(svm::json_dump(svm::parse_admin_comment(*v).get()) ==
          "{\"slurm_vm\":{\"nodes\":{\"node1\":{\"error\":\"the image has a backing file\"}},\"v\":1}}");
    CHECK(svm::json_dump(svm::parse_admin_comment("").get()) == "{}");
    CHECK(svm::json_dump(svm::parse_admin_comment("(null)").get()) == "{}");
    CHECK(svm::json_dump(svm::parse_admin_comment("[1,2]").get()) == "{}");
}

TEST_CASE("AdminComment: this node's entry is merged, the rest is kept") {
    auto fields = [](const std::string& s) { return svm::json_parse(s, "fields"); };
    svm::Json root = svm::parse_admin_comment("{\"site\":\"keep me\"}");
    svm::Json rec = fields("{\"image\":\"/i.qcow2\",\"ready_ms\":900}");
    CHECK(svm::merge_node_record(root.get(), "node1", rec.get()));
    CHECK(svm::json_dump(root.get()) ==
          "{\"site\":\"keep "
          "me\",\"slurm_vm\":{\"nodes\":{\"node1\":{\"image\":\"/i.qcow2\",\"ready_ms\":900}},\"v\":1}}");
    CHECK_FALSE(svm::merge_node_record(root.get(), "node1", rec.get()));  // already there: nothing to write

    // Another node's entry stays; an error joins this node's record.
    svm::Json other = fields("{\"error\":\"the guest on node2 did not become ready within 300 s\"}");
    CHECK(svm::merge_node_record(root.get(), "node2", other.get()));
    svm::Json err = svm::json_parse(svm::error_record("the guest on node1 shut down or crashed"), "error");
    CHECK(svm::merge_node_record(root.get(), "node1", err.get()));
    CHECK(svm::json_dump(root.get()) ==
          "{\"site\":\"keep me\",\"slurm_vm\":{\"nodes\":{\"node1\":{\"error\":\"the guest on node1 shut down or "
          "crashed\",\"image\":\"/i.qcow2\",\"ready_ms\":900},\"node2\":{\"error\":\"the guest on node2 did not "
          "become ready within 300 s\"}},\"v\":1}}");
    // The ready record arriving after the error does not drop it.
    CHECK_FALSE(svm::merge_node_record(root.get(), "node1", rec.get()));

    // A guest's record replaces the entry (a requeued job's earlier error goes).
    CHECK(svm::merge_node_record(root.get(), "node1", rec.get(), true));
    CHECK_FALSE(svm::merge_node_record(root.get(), "node1", rec.get(), true));
    CHECK(svm::json_dump(json_object_get(json_object_get(json_object_get(root.get(), "slurm_vm"), "nodes"), "node1")) ==
          "{\"image\":\"/i.qcow2\",\"ready_ms\":900}");
    CHECK(json_object_get(json_object_get(json_object_get(root.get(), "slurm_vm"), "nodes"), "node2"));

    // A foreign or broken "slurm_vm" value is replaced by ours.
    svm::Json odd = svm::parse_admin_comment("{\"slurm_vm\":\"x\"}");
    CHECK(svm::merge_node_record(odd.get(), "n", err.get()));
    CHECK(svm::json_dump(odd.get()) ==
          "{\"slurm_vm\":{\"nodes\":{\"n\":{\"error\":\"the guest on node1 shut down or crashed\"}},\"v\":1}}");
}

TEST_CASE("AdminComment: the error record is one bounded, valid JSON string") {
    CHECK(svm::error_record("refused: \"quoted\"") == "{\"error\":\"refused: \\\"quoted\\\"\"}");
    std::string long_reason(990, 'a');
    long_reason += "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";  // é x6 across the 1000-byte cut
    std::string rec = svm::error_record(long_reason);
    svm::Json j = svm::json_parse(rec, "record");
    std::string e = json_string_value(json_object_get(j.get(), "error"));
    CHECK(e.size() <= 1000);
    CHECK(e.size() >= 998);
    CHECK(svm::error_record("\xff broken").find("not valid UTF-8") != std::string::npos);
}

TEST_CASE("job state: requeued is pending again or flagged, read from slurm-vm-job-info's JSON", "[requeue]") {
    std::string why;
    auto st = svm::job_status_of_json(
        R"({"jobs":[{"job_id":7,"admin_comment":null,"state":"PENDING","requeue":false,"preempt_time":0,"restart_cnt":1}]})",
        7, why);
    REQUIRE(st);
    CHECK(st->requeued());
    CHECK(st->restart_cnt == 1);
    st = svm::job_status_of_json(R"({"jobs":[{"job_id":7,"state":"RUNNING","requeue":true}]})", 7, why);
    REQUIRE(st);
    CHECK(st->requeued());
    st = svm::job_status_of_json(R"({"jobs":[{"job_id":7,"state":"CANCELLED","preempt_time":0}]})", 7, why);
    REQUIRE(st);
    CHECK(!st->requeued());
    // Another job's entry, no state, a state of the wrong type, not JSON: refused.
    CHECK(!svm::job_status_of_json(R"({"jobs":[{"job_id":8,"state":"PENDING"}]})", 7, why));
    CHECK(why.find("not in Slurm's answer") != std::string::npos);
    CHECK(!svm::job_status_of_json(R"({"jobs":[{"job_id":7}]})", 7, why));
    CHECK(!svm::job_status_of_json(R"({"jobs":[{"job_id":7,"state":1}]})", 7, why));
    CHECK(!svm::job_status_of_json("PENDING", 7, why));
}
