#include "srun_options.hpp"

#include <algorithm>
#include <cstdlib>

namespace svm {

namespace {

enum class Arg { none, required, optional };

struct SrunOption {
    const char* name;  // long name, exact (srun would take an abbreviation: not here)
    char short_name;   // 0: none
    Arg arg;
};

// The options that only shape the step (srun's own has_arg for each, the same
// in Slurm 22.05 and 24.11).
constexpr SrunOption kAllowed[] = {
    {"nodes", 'N', Arg::required},
    {"ntasks", 'n', Arg::required},
    {"cpus-per-task", 'c', Arg::required},
    {"ntasks-per-node", 0, Arg::required},
    {"ntasks-per-core", 0, Arg::required},
    {"ntasks-per-socket", 0, Arg::required},
    {"nodelist", 'w', Arg::required},
    {"exclude", 'x', Arg::required},
    {"mem", 0, Arg::required},
    {"mem-per-cpu", 0, Arg::required},
    {"time", 't', Arg::required},
    {"job-name", 'J', Arg::required},
    {"distribution", 'm', Arg::required},
    {"cpu-bind", 0, Arg::required},
    {"mem-bind", 0, Arg::required},
    {"gpus", 'G', Arg::required},
    {"gpus-per-node", 0, Arg::required},
    {"gpus-per-task", 0, Arg::required},
    {"cpus-per-gpu", 0, Arg::required},
    {"gres", 0, Arg::required},
    {"threads-per-core", 0, Arg::required},
    {"hint", 0, Arg::required},
    {"signal", 0, Arg::required},
    {"wait", 'W', Arg::required},
    {"mpi", 0, Arg::required},
    {"overlap", 0, Arg::optional},
    {"exclusive", 0, Arg::optional},
    {"kill-on-bad-exit", 'K', Arg::optional},
    {"no-kill", 'k', Arg::optional},
    {"exact", 0, Arg::none},
    {"label", 'l', Arg::none},
    {"unbuffered", 'u', Arg::none},
    {"verbose", 'v', Arg::none},
    {"quiet", 'Q', Arg::none},
    {"disable-status", 'X', Arg::none},
    {"quit-on-interrupt", 0, Arg::none},
    {"help", 'h', Arg::none},
    {"usage", 0, Arg::none},
    {"version", 'V', Arg::none},
};

const SrunOption* find_long(const std::string& name) {
    for (const auto& o : kAllowed)
        if (name == o.name) return &o;
    return nullptr;
}

const SrunOption* find_short(char c) {
    for (const auto& o : kAllowed)
        if (o.short_name == c) return &o;
    return nullptr;
}

// A sentence for the guest's srun, which reads one line: the guest's own
// bytes in it (an option's name) without control characters.
std::string one_line(std::string s) {
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return s;
}

std::string refusal(const std::string& option) {
    return "option " + option +
           " is not available inside a VM job (srun there takes only options that shape the step: " + "see the README)";
}

// A value goes to the host's srun as it is: printable, one line, bounded.
bool value_ok(const SrunOption& o, const std::string& v) {
    if (v.size() > 4096) return false;
    for (unsigned char c : v)
        if (c < 0x20 || c == 0x7f) return false;
    if (std::string(o.name) == "mpi")  // a plugin's name
        return !v.empty() && v.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
    // srun reads a node list or an exclusion holding a '/' as a file of host
    // names: a path on the host, not a shape of the step.
    if (std::string(o.name) == "nodelist" || std::string(o.name) == "exclude") return v.find('/') == std::string::npos;
    return true;
}

// One "--name[=value]" at args[i]; advances i past a separate value.
std::string check_long(const std::vector<std::string>& args, size_t& i) {
    const std::string& a = args[i];
    auto eq = a.find('=');
    std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const SrunOption* o = find_long(name);
    if (!o) return refusal("--" + name);
    if (eq != std::string::npos) {
        if (o->arg == Arg::none) return "option --" + name + " takes no value";
        return value_ok(*o, a.substr(eq + 1)) ? "" : "the value of --" + name + " is not acceptable";
    }
    if (o->arg != Arg::required) return "";
    if (++i >= args.size()) return "option --" + name + " needs a value";
    return value_ok(*o, args[i]) ? "" : "the value of --" + name + " is not acceptable";
}

// One "-abc" group of short options at args[i] (getopt's rules).
std::string check_short(const std::vector<std::string>& args, size_t& i) {
    const std::string& a = args[i];
    for (size_t k = 1; k < a.size(); ++k) {
        const SrunOption* o = find_short(a[k]);
        if (!o) return refusal(std::string("-") + a[k]);
        if (o->arg == Arg::none) continue;
        std::string value = a.substr(k + 1);
        if (value.empty() && o->arg == Arg::required) {
            if (++i >= args.size()) return std::string("option -") + a[k] + " needs a value";
            value = args[i];
        }
        if (!value.empty() && !value_ok(*o, value)) return std::string("the value of -") + a[k] + " is not acceptable";
        return "";
    }
    return "";
}

}  // namespace

std::string check_guest_srun_args(const std::vector<std::string>& args) {
    // srun splits its arguments at every lone ':' into the parts of a
    // heterogeneous step, each with options of its own, wherever it stands
    // (after a part's command too): none is taken.
    for (const auto& a : args)
        if (a == ":")
            return "heterogeneous steps (':' between parts) are not available inside a VM job: run one srun per part";
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--" || a.size() < 2 || a[0] != '-') return "";  // the command follows
        std::string why = a[1] == '-' ? check_long(args, i) : check_short(args, i);
        if (!why.empty()) return one_line(why);
    }
    return "";
}

namespace {
bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace

bool host_unsafe_variable(const std::string& name) {
    if (starts(name, "LD_") || starts(name, "BASH_FUNC_")) return true;
    for (const char* n : {"GCONV_PATH",    "GETCONF_DIR",  "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN",
                          "LOCPATH",       "MALLOC_TRACE", "NIS_PATH",       "NLSPATH",     "RESOLV_HOST_CONF",
                          "RES_OPTIONS",   "TZDIR",        "BASH_ENV",       "ENV",         "SHELLOPTS",
                          "BASHOPTS",      "PS4",          "PROMPT_COMMAND", "SSH_ASKPASS", "SSH_ASKPASS_REQUIRE",
                          "PYTHONSTARTUP", "PYTHONPATH",   "PYTHONHOME",     "PERL5OPT",    "PERL5LIB",
                          "RUBYOPT",       "NODE_OPTIONS"})
        if (name == n) return true;
    return false;
}

bool srun_env_refused(const std::string& name) {
    if (host_unsafe_variable(name)) return true;
    for (const char* p : {"SLURM_VM_", "SLURM_SPANK_", "_SLURM_SPANK_OPTION_", "SPANK_"})
        if (starts(name, p)) return true;
    for (const char* n : {"SLURM_PROLOG",       "SLURM_EPILOG",      "SLURM_TASK_PROLOG",
                          "SLURM_TASK_EPILOG",  "SLURM_BCAST",       "SLURM_BCAST_EXCLUDE",
                          "SLURM_SEND_LIBS",    "SLURM_COMPRESS",    "SLURM_CONTAINER",
                          "SLURM_CONTAINER_ID", "SRUN_CONTAINER",    "SRUN_CONTAINER_ID",
                          "SLURM_NETWORK",      "SLURM_STDOUTMODE",  "SLURM_STDERRMODE",
                          "SLURM_STDINMODE",    "SRUN_OUTPUT",       "SRUN_ERROR",
                          "SRUN_INPUT",         "SLURM_OPEN_MODE",   "SLURM_EXPORT_ENV",
                          "SRUN_EXPORT_ENV",    "SLURM_WORKING_DIR", "SLURM_REMOTE_CWD",
                          "SLURM_TEST_EXEC",    "SLURM_SRUN_MULTI",  "SLURM_EXTERNAL_LAUNCHER",
                          "SLURM_PROFILE",      "SLURM_DEBUG",       "SLURM_ACCOUNT",
                          "SLURM_PARTITION",    "SLURM_QOS",         "SLURM_RESERVATION",
                          "SLURM_DEPENDENCY",   "SLURM_CLUSTERS",    "SLURM_BURST_BUFFER"})
        if (name == n) return true;
    return false;
}

namespace {

RelayRequest bad(std::string why) {
    RelayRequest r;
    r.status = RelayRequest::Status::bad;
    r.error = one_line(std::move(why));
    return r;
}

// "SRUN <n>": n, 1..kRelayMaxFields, digits only; 0 when not.
size_t field_count(const std::string& arg) {
    if (arg.empty() || arg.size() > 6 || arg.find_first_not_of("0123456789") != std::string::npos) return 0;
    size_t n = std::strtoul(arg.c_str(), nullptr, 10);
    return n <= kRelayMaxFields ? n : 0;
}

bool token_ok(const std::string& t) {
    return !t.empty() && t.size() <= 64 && t.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

RelayRequest parse_relay_request(std::string_view bytes) {
    if (bytes.size() > kRelayMaxRequest) return bad("request too large");
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos)
        return bytes.size() >= kRelayMaxLine ? bad("request line too long") : RelayRequest{};
    if (nl >= kRelayMaxLine) return bad("request line too long");
    std::string line(bytes.substr(0, nl));
    RelayRequest r;
    auto sp = line.find(' ');
    r.verb = line.substr(0, sp);
    std::string arg = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (r.verb == "SRUN") {
        size_t n = field_count(arg);
        if (n == 0) return bad("bad request");
        size_t pos = nl + 1;
        while (r.fields.size() < n) {
            size_t end = bytes.find('\0', pos);
            if (end == std::string_view::npos) return RelayRequest{};  // more to come
            r.fields.emplace_back(bytes.substr(pos, end - pos));
            pos = end + 1;
        }
    } else if (r.verb == "STDERR" || r.verb == "WAIT" || r.verb == "SIGNAL") {
        auto sp2 = arg.find(' ');
        r.token = arg.substr(0, sp2);
        if (r.verb == "SIGNAL") {
            if (sp2 == std::string::npos) return bad("bad request");
            r.signal = arg.substr(sp2 + 1);
        } else if (sp2 != std::string::npos) {
            return bad("bad request");
        }
        if (!token_ok(r.token) || r.signal.size() > 16) return bad("bad request");
    } else {
        return bad("bad request");
    }
    r.status = RelayRequest::Status::complete;
    return r;
}

RelayRequest RelayRequestReader::parse() {
    scanned_ += buf_.size();
    return parse_relay_request(buf_);
}

RelayRequest RelayRequestReader::feed(std::string_view piece) {
    size_t from = buf_.size();
    buf_.append(piece);
    if (buf_.size() > kRelayMaxRequest) return parse();  // bad: too large
    if (!have_line_) {
        size_t nl = buf_.find('\n', from);
        scanned_ += (nl == std::string::npos ? buf_.size() : nl + 1) - from;
        if (nl == std::string::npos) return buf_.size() >= kRelayMaxLine ? parse() : RelayRequest{};
        have_line_ = true;
        // Any other verb, a line too long or a bad count: complete or bad now.
        if (nl >= kRelayMaxLine || buf_.compare(0, 5, "SRUN ") != 0) return parse();
        fields_ = field_count(buf_.substr(5, nl - 5));
        if (fields_ == 0) return parse();
        from = nl + 1;
    }
    nuls_ += static_cast<size_t>(std::count(buf_.begin() + static_cast<std::ptrdiff_t>(from), buf_.end(), '\0'));
    scanned_ += buf_.size() - from;
    return nuls_ < fields_ ? RelayRequest{} : parse();
}

}  // namespace svm
