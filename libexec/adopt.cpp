// slurm-vm-adopt NODE JOBID PID: asks the extern step of job JOBID on this
// node (slurmd NodeName NODE) to adopt process PID, as pam_slurm_adopt does
// with a login: the step's slurmstepd puts it in its proctrack container and
// task cgroups and accounts it (jobacct_gather) as one of the step's tasks.
// The keeper calls it on Slurm 25.05+, whose extern step runs no task of its
// own, so that the guest's CPU time reaches sacct again. Root only (the
// step's socket is root's). Linked to libslurm, like slurm-vm-job-info, for
// the two calls pam_slurm_adopt makes (exported by libslurm since 20.11
// under these names, declared by no public header).
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
int slurm_stepd_connect(const char* directory, const char* nodename, slurm_step_id_t* step_id,
                        uint16_t* protocol_version);
int slurm_stepd_add_extern_pid(int fd, uint16_t protocol_version, pid_t pid);
extern slurm_conf_t slurm_conf;
}

namespace {

bool is_number(const char* s, size_t max_len) {
    size_t n = std::strlen(s);
    return n > 0 && n <= max_len && std::strspn(s, "0123456789") == n;
}

// SlurmdSpoolDir with slurmd's own substitutions: %n the node, %h the host.
std::string spool_dir(const std::string& node) {
    std::string in = slurm_conf.slurmd_spooldir ? slurm_conf.slurmd_spooldir : "", out;
    char host[256] = "";
    ::gethostname(host, sizeof host - 1);
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] == '%' && i + 1 < in.size() && (in[i + 1] == 'n' || in[i + 1] == 'h')) {
            out += in[i + 1] == 'n' ? node : std::string(host);
            ++i;
        } else {
            out += in[i];
        }
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4 || std::strlen(argv[1]) == 0 || std::strlen(argv[1]) > 255 || !is_number(argv[2], 10) ||
        !is_number(argv[3], 10)) {
        std::fprintf(stderr, "usage: slurm-vm-adopt NODE JOBID PID\n");
        return 2;
    }
    unsigned long long job = std::strtoull(argv[2], nullptr, 10), pid = std::strtoull(argv[3], nullptr, 10);
    if (job == 0 || job > UINT32_MAX || pid == 0 || pid > INT32_MAX) {
        std::fprintf(stderr, "slurm-vm-adopt: job %s, process %s: out of range\n", argv[2], argv[3]);
        return 2;
    }
    slurm_init(nullptr);
    std::string dir = spool_dir(argv[1]);
    slurm_step_id_t step;
    std::memset(&step, 0, sizeof step);
    step.job_id = static_cast<uint32_t>(job);
    step.step_id = SLURM_EXTERN_CONT;
    step.step_het_comp = NO_VAL;
    uint16_t version = 0;
    int fd = slurm_stepd_connect(dir.c_str(), argv[1], &step, &version);
    if (fd < 0) {
        std::fprintf(stderr, "slurm-vm-adopt: job %s: no extern step on %s (in %s): %s\n", argv[2], argv[1],
                     dir.c_str(), std::strerror(errno));
        slurm_fini();
        return 1;
    }
    int rc = slurm_stepd_add_extern_pid(fd, version, static_cast<pid_t>(pid));
    ::close(fd);
    slurm_fini();
    if (rc != SLURM_SUCCESS) {
        std::fprintf(stderr, "slurm-vm-adopt: job %s: the extern step on %s did not adopt process %s\n", argv[2],
                     argv[1], argv[3]);
        return 1;
    }
    return 0;
}
