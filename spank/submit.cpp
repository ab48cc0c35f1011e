// Local and allocator contexts (sbatch, salloc, srun; as the user).
#include "slurm_host.hpp"

namespace svm::spank {

int on_submit(spank_t sp) {
    SlurmHost host(sp);
    submit_request(host, options(), SubmitProcess::self());
    return 0;
}

}  // namespace svm::spank
