// slurm-vm images: the site's catalogue of images (--vm-image=NAME) and the
// partitions that run jobs in a virtual machine. For users and admins alike:
// it reads only the node configuration, which users read at submit too.
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "config.hpp"
#include "error.hpp"
#include "site_catalogue.hpp"

namespace svm::admin {

namespace {
const char* kImagesUsage =
    "usage: slurm-vm images [--config FILE] [--json]\n"
    "Lists the images of this site's catalogue (sbatch --vm-image=NAME) and the\n"
    "partitions whose jobs run in a virtual machine by default or always.\n";
}  // namespace

int cmd_images(const Args& args) {
    std::string config = std::string(SVM_SYSCONFDIR) + "/slurm-vm.json";
    bool json = false;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--config" && i + 1 < args.size()) config = args[++i];
        else if (args[i] == "--json") json = true;
        else if (args[i] == "--help" || args[i] == "-h") {
            std::fputs(kImagesUsage, stdout);
            return 0;
        } else {
            SVM_THROW("unknown option " + args[i] + "\n" + kImagesUsage);
        }
    }
    NodeConfig c = load_config(config, "%n");
    std::string out = json ? catalogue_json(c.site) + "\n" : format_catalogue(c.site);
    std::fputs(out.c_str(), stdout);
    return 0;
}

}  // namespace svm::admin
