#include "support.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "catch.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "proc.hpp"

namespace svm::test {

TempDir::TempDir(const char* prefix) {
    std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) SVM_THROW_ERRNO("mkdtemp " + tmpl);
    path_ = buf.data();
    if (::chmod(path_.c_str(), 0755) != 0) SVM_THROW_ERRNO("chmod " + path_);
}

TempDir::~TempDir() {
    try {
        remove_tree(path_);
    } catch (const Error&) {
        // a test that left something it could not remove: not worth a crash
    }
}

std::string temp_device_stand_in(const TempDir& dir) {
    std::string f = path_join(dir.path(), "kvm");
    write_file_atomic(f, "", 0600);
    return f;
}

UniqueFd listening_socket(const std::string& path) {
    struct sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) SVM_THROW("socket path too long: " + path);
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    UniqueFd l(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!l) SVM_THROW_ERRNO("socket");
    if (::bind(l.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) SVM_THROW_ERRNO("bind " + path);
    if (::listen(l.get(), 8) != 0) SVM_THROW_ERRNO("listen " + path);
    return l;
}

bool domain_validates(const std::string& xml) {
    TempDir d("svm-xml");
    write_file_atomic(d.path() + "/d.xml", xml);
    auto r = run({"virt-xml-validate", d.path() + "/d.xml", "domain"});
    if (r.status != 0) UNSCOPED_INFO(xml << r.out << r.err);
    return r.status == 0;
}

std::optional<RunResult> run_schema_script(const std::string& schema_path, const std::string& script,
                                           const std::vector<std::string>& args) {
    RunOptions env;
    for (char** e = environ; *e; ++e) env.env.emplace_back(*e);
    if (!run({"/bin/sh", "-c", "python3 -c 'import jsonschema'"}, env).ok()) {
        WARN("python3-jsonschema not installed: schema not checked");
        return std::nullopt;
    }
    std::vector<std::string> argv{"/bin/sh", "-c", "exec python3 -c \"$0\" \"$@\"",
                                  "import json, sys, jsonschema\n"
                                  "schema = json.load(open(sys.argv[1]))\n"
                                  "jsonschema.Draft202012Validator.check_schema(schema)\n"
                                  "v = jsonschema.Draft202012Validator(schema)\n" +
                                      script,
                                  schema_path};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, env);
}

namespace {
// The part of the Error fn throws that part takes ("" when it throws none).
std::string thrown(const std::function<void()>& fn, std::string (*part)(const Error&)) {
    try {
        fn();
    } catch (const Error& e) {
        return part(e);
    }
    return "";
}
}  // namespace

std::string error_of(const std::function<void()>& fn) {
    return thrown(fn, [](const Error& e) { return e.chain(); });
}

std::string reason_of(const std::function<void()>& fn) {
    return thrown(fn, [](const Error& e) { return e.reason(); });
}

}  // namespace svm::test
