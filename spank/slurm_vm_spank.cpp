#include <slurm/spank.h>
extern "C" {
SPANK_PLUGIN(slurm-vm, 1)
}
