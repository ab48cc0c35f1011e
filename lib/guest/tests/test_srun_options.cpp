// The srun options a guest may hand to the host, and the relay's framing.
#include "catch.hpp"

#include <string>
#include <vector>

#include "srun_options.hpp"

using svm::check_guest_srun_args;
using Args = std::vector<std::string>;

TEST_CASE("options that shape the step pass, the command after them is not looked at", "[srun]") {
    for (const Args& a : {Args{"-N2", "hostname"}, Args{"--overlap", "-N1", "-n1", "sh", "-c", "x"},
                          Args{"-N", "2", "--ntasks=4", "-l", "true"}, Args{"--nodes", "1", "--exclusive", "cmd"},
                          Args{"-lu", "-c2", "cmd"}, Args{"--mpi=none", "--cpu-bind=cores", "-J", "n", "cmd"},
                          Args{"-K", "cmd"}, Args{"-K1", "cmd"}, Args{"--kill-on-bad-exit=1", "cmd"},
                          Args{"cmd", "--prolog=/x"}, Args{"--", "--prolog=/x"}, Args{"-w", "node[1-2]", "cmd"},
                          Args{"--exclusive=user", "cmd"}, Args{"-vv", "cmd"}, Args{"--version"}, Args{}})
        CHECK(check_guest_srun_args(a).empty());
}

TEST_CASE("options that run, open or copy something on the host are refused with one sentence", "[srun]") {
    for (const Args& a : {Args{"--prolog=/usr/bin/env", "true"},
                          Args{"--prolog", "/usr/bin/env", "true"},
                          Args{"--epilog=/x", "t"},
                          Args{"--task-prolog=/x", "t"},
                          Args{"--task-epilog=/x", "t"},
                          Args{"--export=ALL,LD_PRELOAD=/x", "t"},
                          Args{"--vm-image=none", "t"},
                          Args{"--vm-console", "t"},
                          Args{"--vm-save=/x", "t"},
                          Args{"--bcast=/x", "t"},
                          Args{"--output=/home/u/.bashrc", "t"},
                          Args{"-o", "/x", "t"},
                          Args{"-e/x", "t"},
                          Args{"-i", "/x", "t"},
                          Args{"--chdir=/", "t"},
                          Args{"-D/", "t"},
                          Args{"--container=/b", "t"},
                          Args{"--multi-prog", "f"},
                          Args{"--jobid=7", "t"},
                          Args{"--network=x", "t"},
                          Args{"--x11", "t"},
                          Args{"--propagate=ALL", "t"},
                          Args{"--pty", "bash"},
                          Args{"-w", "/etc/hosts", "t"},
                          Args{"--nodelist=/home/u/hosts", "t"},
                          Args{"-x/tmp/f", "t"},
                          Args{"--exclude", "./hosts", "t"},
                          Args{"-p", "other", "t"},
                          Args{"--task-pro=/x", "t"},
                          Args{"--pro=/x", "t"},
                          Args{"-lo/x", "t"},
                          Args{"--send-libs", "t"},
                          Args{"--mpi=../../tmp/x", "t"},
                          Args{"--mpi=", "t"},
                          Args{"-N"},
                          Args{"--nodes"},
                          Args{"--label=1", "t"},
                          Args{"-J", "a\nAdminComment=x", "t"},
                          Args{"--=x", "t"},
                          Args{"--spank-anything=x", "t"}}) {
        std::string why = check_guest_srun_args(a);
        INFO(a[0]);
        CHECK_FALSE(why.empty());
        CHECK(why.find('\n') == std::string::npos);
    }
    CHECK(check_guest_srun_args({"--prolog=/usr/bin/env", "true"}) ==
          "option --prolog is not available inside a VM job (srun there takes only options that shape the step: see "
          "the README)");
    CHECK(check_guest_srun_args({"-N1", "-o", "x", "t"}).find("option -o is not available") == 0);
}

TEST_CASE("the batch step's environment reaches the host's srun without option twins", "[srun]") {
    for (const char* n : {"SLURM_TASK_PROLOG",
                          "SLURM_TASK_EPILOG",
                          "SLURM_PROLOG",
                          "SLURM_EPILOG",
                          "SLURM_BCAST",
                          "SLURM_EXPORT_ENV",
                          "SRUN_EXPORT_ENV",
                          "SLURM_STDOUTMODE",
                          "SRUN_OUTPUT",
                          "SLURM_CONTAINER",
                          "SLURM_VM_IMAGE",
                          "SLURM_VM_PLAN",
                          "SLURM_SPANK_VM_IMAGE",
                          "_SLURM_SPANK_OPTION_slurm_vm_vm_image",
                          "LD_PRELOAD",
                          "LD_LIBRARY_PATH",
                          "LD_AUDIT",
                          "GCONV_PATH",
                          "BASH_ENV",
                          "BASH_FUNC_srun%%",
                          "SLURM_WORKING_DIR"})
        CHECK(svm::srun_env_refused(n));
    for (const char* n : {"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_NODELIST", "SLURM_STEP_ID", "PATH", "HOME", "LANG"})
        CHECK_FALSE(svm::srun_env_refused(n));
}

TEST_CASE("the relay's framing: complete, incomplete and bad requests, bounded", "[srun]") {
    using S = svm::RelayRequest::Status;
    std::string srun = std::string("SRUN 3\n/w\0-N1\0true\0", 19);
    auto r = svm::parse_relay_request(srun);
    REQUIRE(r.status == S::complete);
    CHECK(r.verb == "SRUN");
    CHECK(r.fields == Args{"/w", "-N1", "true"});
    for (size_t n = 0; n < srun.size(); ++n) CHECK(svm::parse_relay_request(srun.substr(0, n)).status == S::incomplete);
    r = svm::parse_relay_request("SIGNAL 0123abcd INT\n");
    REQUIRE(r.status == S::complete);
    CHECK(r.token == "0123abcd");
    CHECK(r.signal == "INT");
    CHECK(svm::parse_relay_request("WAIT 0123abcd\n").status == S::complete);
    for (const char* b : {"SRUN 0\n", "SRUN -1\n", "SRUN 100001\n", "SRUN 1x\n", "SRUN\n", "WAIT\n", "WAIT ../x\n",
                          "WAIT a b\n", "SIGNAL abc\n", "HELLO\n", "\n"})
        CHECK(svm::parse_relay_request(b).status == S::bad);
    CHECK(svm::parse_relay_request(std::string(svm::kRelayMaxLine, 'A')).status == S::bad);
    std::string big = "SRUN 2\n" + std::string(svm::kRelayMaxRequest, 'a');
    CHECK(svm::parse_relay_request(big).status == S::bad);
}

namespace {
// The reader's answer for `bytes` given in pieces of `step` bytes.
svm::RelayRequest read_in_pieces(const std::string& bytes, size_t step, size_t* scanned = nullptr) {
    svm::RelayRequestReader reader;
    svm::RelayRequest r;
    for (size_t at = 0; at < bytes.size(); at += step) {
        r = reader.feed(std::string_view(bytes).substr(at, step));
        if (r.status != svm::RelayRequest::Status::incomplete) break;
    }
    if (scanned) *scanned = reader.scanned();
    return r;
}
}  // namespace

TEST_CASE("the relay's reader answers as the framing does, piece by piece", "[srun]") {
    using S = svm::RelayRequest::Status;
    std::vector<std::string> cases = {std::string("SRUN 3\n/w\0-N1\0true\0", 19),
                                      std::string("SRUN 2\n/w\0true\0extra", 20),
                                      "SIGNAL 0123abcd INT\n",
                                      "WAIT 0123abcd\n",
                                      "SRUN 0\n",
                                      "SRUN 1x\n",
                                      "SRUN\n",
                                      "WAIT a b\n",
                                      "HELLO\n",
                                      std::string(svm::kRelayMaxLine + 3, 'A')};
    for (const auto& c : cases) {
        // Byte by byte: every prefix gets the framing's answer for it.
        svm::RelayRequestReader reader;
        for (size_t n = 0; n < c.size(); ++n) {
            svm::RelayRequest r = reader.feed(c.substr(n, 1));
            svm::RelayRequest want = svm::parse_relay_request(c.substr(0, n + 1));
            REQUIRE(r.status == want.status);
            if (r.status != S::incomplete) {
                CHECK(r.fields == want.fields);
                CHECK(r.error == want.error);
                break;
            }
        }
        for (size_t step : {2u, 7u, 4096u}) CHECK(read_in_pieces(c, step).status == svm::parse_relay_request(c).status);
    }
    std::string big = "SRUN 2\n" + std::string(svm::kRelayMaxRequest, 'a');
    CHECK(read_in_pieces(big, 4096).status == S::bad);
}

TEST_CASE("the relay's reader frames a request of the largest size in linear work", "[srun]") {
    // The most fields, as long as the bound lets them be: 8 MiB in 4 KiB
    // reads. Framing the whole buffer again after every read (as the relay
    // did) looks at about size^2 / 8 KiB bytes, a thousand times the size.
    size_t n = svm::kRelayMaxFields;
    std::string head = "SRUN " + std::to_string(n) + "\n";
    size_t each = (svm::kRelayMaxRequest - head.size()) / n - 1;
    std::string req = head;
    for (size_t i = 0; i < n; ++i) req += std::string(each, i == 0 ? '/' : 'x') + '\0';
    REQUIRE(req.size() <= svm::kRelayMaxRequest);
    REQUIRE(req.size() > svm::kRelayMaxRequest - n - head.size() - 1);
    size_t scanned = 0;
    svm::RelayRequest r = read_in_pieces(req, 4096, &scanned);
    REQUIRE(r.status == svm::RelayRequest::Status::complete);
    CHECK(r.fields.size() == n);
    CHECK(r.fields.back() == std::string(each, 'x'));
    // Each byte scanned once for the framing, then once by the whole parse.
    CHECK(scanned <= 2 * req.size());
    // A request cut short by one byte is still incomplete, at the same cost.
    read_in_pieces(req.substr(0, req.size() - 1), 4096, &scanned);
    CHECK(scanned <= req.size());
}

TEST_CASE("a refusal naming the guest's bytes is one line without control characters", "[srun]") {
    // Found by fuzz-srun_request: an option of the guest's made of control
    // bytes came back in the refusal as they were; the guest's srun reads
    // one line ("ERR ..."), so a newline in it would end the answer early.
    std::string why = check_guest_srun_args({std::string("--\xff\x1b[2J\nover", 12), "hostname"});
    REQUIRE_FALSE(why.empty());
    for (unsigned char c : why) CHECK((c >= 0x20 && c != 0x7f));
    CHECK(why.find("--\xff?[2J?over") != std::string::npos);
}

TEST_CASE("a heterogeneous step's ':' is refused wherever it stands", "[srun]") {
    // Found by a review: srun reads the options of every part after a lone
    // ':' (after a part's command too), which the check did not look at: a
    // second part's --prolog ran on the host.
    for (const std::vector<std::string>& a :
         {std::vector<std::string>{"--overlap", "-N1", "true", ":", "--prolog=/bin/sh", "x"},
          std::vector<std::string>{":", "hostname"}, std::vector<std::string>{"-n1", "echo", "a", ":", "b"}}) {
        std::string why = check_guest_srun_args(a);
        CHECK(why.find("heterogeneous steps (':' between parts) are not available inside a VM job") == 0);
    }
    CHECK(check_guest_srun_args({"-n1", "echo", "a:b", "::"}).empty());
    // SLURM_CONF stays: slurmstepd sets the node's in every task (a user's
    // --export of it does not reach the batch step), and the host's srun
    // needs it where the configuration is not at Slurm's default path.
    CHECK_FALSE(svm::srun_env_refused("SLURM_CONF"));
}
