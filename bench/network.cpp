// svm-bench-network: the prolog's network setup of one node of an N-node job
// (lib/guest_net: the job's namespace, VXLAN moved in from the underlay,
// bridge, static forwarding and neighbour entries for the other nodes, the
// tap's guard; the head node's, which has the most entries) and the
// epilog's removal, on the real kernel, in a scratch underlay namespace of
// its own. Every node of a job does the same, at once and independently (no
// node waits for another), so the figure for one node is the job's. Prints
// JSON on stdout. Needs root.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "deadline.hpp"
#include "error.hpp"
#include "guest_net.hpp"
#include "proc.hpp"

using namespace svm;

namespace {

const char* kUnderlay = "svmbench-u";

double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

bool sh(const std::string& cmd) {
    RunOptions o;
    o.timeout_ms = 30000;
    o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
    return run({"bash", "-c", cmd}, o).ok();
}

std::string samples(const std::vector<double>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}

// Forwarding and neighbour entries the node loads.
int entries_of(const JobSegment& s) {
    SegmentEntries e = segment_entries(s);
    return static_cast<int>(e.forwarding.size() + e.neighbours.size());
}

// The head node's (index 0: the most entries) setup and removal for an
// N-node job; {plan, setup, remove} ms and its entries.
std::vector<double> once(uint32_t job, int n) {
    std::vector<std::string> nodes, under;
    for (int i = 0; i < n; ++i) {
        nodes.push_back("n" + std::to_string(i));
        under.push_back("10.216." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1));
    }
    double t0 = now_ms();
    JobSegment s = plan_segment(job, 0, nodes, under, "10.213.0.0/16", kUnderlay, 4789, 1450);
    double t1 = now_ms();
    setup_segment(s);
    double t2 = now_ms();
    remove_segment(s.netns, s.underlay_netns, s.vxlan);
    double t3 = now_ms();
    return {t1 - t0, t2 - t1, t3 - t2, static_cast<double>(entries_of(s))};
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 5;
    std::vector<int> sizes = {2, 1000};
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
        else if (a == "--nodes" && i + 1 < argc) sizes = {std::atoi(argv[++i])};
        else {
            std::fprintf(stderr, "usage: svm-bench-network [--rounds R] [--nodes N]\n");
            return 2;
        }
    }
    sh(std::string("ip netns delete ") + kUnderlay + " 2>/dev/null");
    if (!sh(std::string("ip netns add ") + kUnderlay + " && ip -n " + kUnderlay +
            " link add u0 type veth peer name u1 && ip -n " + kUnderlay + " addr add 10.216.0.1/16 dev u0 && ip -n " +
            kUnderlay + " link set u0 up")) {
        std::fprintf(stderr, "svm-bench-network: cannot make the scratch underlay namespace (root?)\n");
        sh(std::string("ip netns delete ") + kUnderlay + " 2>/dev/null");
        return 1;
    }
    int rc = 0;
    std::string out = "{\"sizes\": {";
    try {
        for (size_t k = 0; k < sizes.size(); ++k) {
            std::vector<double> plan, setup, remove;
            int entries = 0;
            for (int r = 0; r < rounds; ++r) {
                auto t = once(0x3f00000u + static_cast<uint32_t>(r), sizes[k]);
                plan.push_back(t[0]);
                setup.push_back(t[1]);
                remove.push_back(t[2]);
                entries = static_cast<int>(t[3]);
            }
            out += std::string(k ? ", " : "") + "\"" + std::to_string(sizes[k]) + "\": {\"plan_ms\": " + samples(plan) +
                   ", \"setup_ms\": " + samples(setup) + ", \"remove_ms\": " + samples(remove) +
                   ", \"entries_per_node\": " + std::to_string(entries) + "}";
        }
    } catch (const Error& e) {
        std::fprintf(stderr, "svm-bench-network: %s\n", e.chain().c_str());
        rc = 1;
    }
    out += "}, \"rounds\": " + std::to_string(rounds) + "}";
    sh(std::string("ip netns delete ") + kUnderlay);
    if (rc == 0) std::printf("%s\n", out.c_str());
    return rc;
}
