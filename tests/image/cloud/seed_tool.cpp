// svm-cloud-seed: the NoCloud seed of one guest of a job, made by the project's
// own code (seed.cpp's build_seed_iso, job_keys.cpp's derived keys), for
// tests/image/cloud/check, which boots stock-style cloud images with it.
//
// usage: svm-cloud-seed --out DIR --secret FILE --job N --node NAME
//            --user NAME --uid N --gid N [--group NAME] [--home DIR]
//            --peer NODE,HOSTNAME,IP [--peer ...] --mac MAC [--prefix N] [--gateway IP]
//
// This node's hostname and address are its own --peer entry (the one naming
// --node). Writes into DIR: seed.iso, its three files (meta-data,
// network-config, user-data, for reading), id_ed25519 (the job's user key),
// known_hosts (every guest: "hostname,ip key", as the prolog writes it) and
// ready-marker (the line the keeper waits for).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "error.hpp"
#include "fs.hpp"
#include "job_keys.hpp"
#include "job_plan.hpp"
#include "seed.hpp"

namespace {

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr, "svm-cloud-seed: %s\n", why.c_str());
    std::exit(2);
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    size_t b = 0;
    for (;;) {
        size_t e = s.find(sep, b);
        out.push_back(s.substr(b, e == std::string::npos ? e : e - b));
        if (e == std::string::npos) return out;
        b = e + 1;
    }
}

}  // namespace

int main(int argc, char** argv) {
    using namespace svm;
    std::string out, secret_file;
    JobPlan p;
    p.prefix_len = 24;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (i + 1 >= argc) usage("missing value for " + a);
        std::string v = argv[++i];
        if (a == "--out") out = v;
        else if (a == "--secret") secret_file = v;
        else if (a == "--job") p.job_id = static_cast<uint32_t>(std::stoul(v));
        else if (a == "--node") p.node = v;
        else if (a == "--user") p.user = v;
        else if (a == "--uid") p.uid = static_cast<uid_t>(std::stoul(v));
        else if (a == "--gid") p.gid = static_cast<gid_t>(std::stoul(v));
        else if (a == "--group") p.group = v;
        else if (a == "--home") p.home = v;
        else if (a == "--mac") p.mac = v;
        else if (a == "--prefix") p.prefix_len = std::stoi(v);
        else if (a == "--gateway") p.gateway = v;
        else if (a == "--peer") {
            auto f = split(v, ',');
            if (f.size() != 3) usage("--peer wants NODE,HOSTNAME,IP");
            p.peers.push_back({f[0], f[1], f[2], ""});
        } else usage("unknown argument " + a);
    }
    if (out.empty() || secret_file.empty() || p.node.empty() || p.user.empty() || p.mac.empty())
        usage("--out, --secret, --node, --user and --mac are required");
    if (out[0] != '/') {  // genisoimage runs elsewhere
        char* cwd = ::getcwd(nullptr, 0);
        out = path_join(cwd ? cwd : "/", out);
        std::free(cwd);
    }
    if (p.group.empty()) p.group = p.user;
    if (p.home.empty()) p.home = "/home/" + p.user;
    p.workdir = p.home;
    for (size_t i = 0; i < p.peers.size(); ++i) {
        if (p.peers[i].node != p.node) continue;
        p.node_index = static_cast<int>(i);
        p.hostname = p.peers[i].hostname;
        p.ip = p.peers[i].ip;
    }
    if (p.hostname.empty()) usage("no --peer names this node (" + p.node + ")");

    try {
        // Keys as the prolog derives them (vm_job.cpp): the same on every node.
        std::string secret = read_site_secret(secret_file);
        KeyPair user_key = job_user_key(secret, p.job_id, p.uid);
        KeyPair host_key = guest_host_key(secret, p.job_id, p.node);
        std::string kh;
        for (const auto& peer : p.peers)
            kh += peer.hostname + "," + peer.ip + " " + trim(guest_host_key(secret, p.job_id, peer.node).public_key) +
                  "\n";
        SeedKeys sk{user_key.public_key, user_key.private_key, host_key.private_key, host_key.public_key, kh};

        write_file_atomic(path_join(out, "meta-data"), seed_meta_data(p), 0600);
        write_file_atomic(path_join(out, "network-config"), seed_network_config(p), 0600);
        write_file_atomic(path_join(out, "user-data"), seed_user_data(p, sk), 0600);
        write_file_atomic(path_join(out, "id_ed25519"), user_key.private_key, 0600);
        write_file_atomic(path_join(out, "known_hosts"), kh, 0600);
        write_file_atomic(path_join(out, "ready-marker"), ready_marker(p) + "\n", 0600);
        build_seed_iso(p, sk, path_join(out, "seed.iso"));
    } catch (const Error& e) {
        std::fprintf(stderr, "svm-cloud-seed: %s\n", e.chain().c_str());
        return 1;
    }
    return 0;
}
