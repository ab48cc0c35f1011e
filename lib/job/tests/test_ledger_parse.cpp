// The ledger read from its text (Ledger::parse, what Ledger::load reads and
// what tests/fuzz/ledger.cpp fuzzes): the same entries as the file gives,
// and refusals with svm::Error.
#include "catch.hpp"

#include "error.hpp"
#include "fs.hpp"
#include "host_changes.hpp"
#include "ledger.hpp"
#include "support.hpp"

TEST_CASE("ledger: parsed from its text as loaded from its file, and its refusals", "[core]") {
    svm::test::TempDir tmp("svm-ledger-parse");
    std::string path = svm::path_join(tmp.path(), "job_8.json");
    {
        auto l = svm::Ledger::load(path, 8);
        l.record(svm::JobDirChange{"/run/slurm-vm/job_8"});
        l.record(svm::JobNetChange{"svmj8", "", "vx8"});
    }
    auto loaded = svm::Ledger::load(path, 8);
    auto parsed = svm::Ledger::parse(svm::read_file(path), path, 8);
    REQUIRE(parsed.entries().size() == 2);
    CHECK(parsed.path() == path);
    for (size_t i = 0; i < 2; ++i) {
        CHECK(parsed.entries()[i].kind == loaded.entries()[i].kind);
        CHECK(json_equal(parsed.entries()[i].data.get(), loaded.entries()[i].data.get()));
    }
    CHECK(svm::JobNetChange::from_json(parsed.entries()[1].data.get()).vxlan == "vx8");
    CHECK_THROWS_AS(svm::Ledger::parse(svm::read_file(path), path, 9), svm::Error);  // another job's
    CHECK_THROWS_AS(svm::Ledger::parse(R"({"entries":[{"data":{}}]})", path, 8), svm::Error);
    CHECK_THROWS_AS(svm::Ledger::parse("{", path, 8), svm::Error);
    CHECK(svm::Ledger::parse(R"({"job_id": 8, "entries": []})", path, 8).entries().empty());
    // Strict like its records: a key missing or unknown is named.
    CHECK_THROWS_WITH(svm::Ledger::parse("{}", path, 8), Catch::Contains("\"job_id\" is missing"));
    CHECK_THROWS_WITH(svm::Ledger::parse(R"({"job_id": 8, "entries": [], "v": 2})", path, 8),
                      Catch::Contains("unknown key \"v\""));
    CHECK_THROWS_WITH(svm::Ledger::parse(R"({"job_id": 8, "entries": [{"kind": "job_dir"}]})", path, 8),
                      Catch::Contains("entries[0]: \"data\" is missing"));
}
