// slurm-vm-keeper: started by the plugin in the job's extern step on each
// node; runs the job's guest (see lib/keeper.hpp).
#include <cstdio>
#include <cstring>
#include <string>

#include "error.hpp"
#include "keeper.hpp"

int main(int argc, char** argv) {
    svm::KeeperOptions o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "slurm-vm-keeper: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--config") o.config_path = next();
        else if (a == "--node") o.node = next();
        else if (a == "--job") o.job_id = static_cast<uint32_t>(std::stoul(next()));
        else if (a == "--join-cgroup-of") o.join_cgroup_of = static_cast<pid_t>(std::stol(next()));
        else if (a == "--help") {
            std::printf("usage: slurm-vm-keeper --config FILE --node NAME --job ID [--join-cgroup-of PID]\n"
                        "Started by the slurm-vm SPANK plugin; not meant to be run by hand.\n");
            return 0;
        } else {
            std::fprintf(stderr, "slurm-vm-keeper: unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    if (o.config_path.empty() || o.node.empty() || !o.job_id) {
        std::fprintf(stderr, "slurm-vm-keeper: --config, --node and --job are required\n");
        return 2;
    }
    try {
        return svm::run_keeper(o);
    } catch (const svm::Error& e) {
        std::fprintf(stderr, "slurm-vm-keeper job %u: %s", o.job_id, e.trace().c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "slurm-vm-keeper job %u: %s\n", o.job_id, e.what());
        return 1;
    }
}
