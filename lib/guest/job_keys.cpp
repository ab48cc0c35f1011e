#include "job_keys.hpp"

#include <nettle/base64.h>
#include <nettle/eddsa.h>
#include <nettle/hmac.h>
#include <sys/stat.h>

#include "error.hpp"
#include "fs.hpp"

namespace svm {

namespace {

void put_u32(std::string& s, uint32_t v) {
    s += static_cast<char>(v >> 24);
    s += static_cast<char>(v >> 16);
    s += static_cast<char>(v >> 8);
    s += static_cast<char>(v);
}
void put_string(std::string& s, const std::string& v) {
    put_u32(s, static_cast<uint32_t>(v.size()));
    s += v;
}

std::string b64(const std::string& in) {
    std::string out(BASE64_ENCODE_RAW_LENGTH(in.size()), '\0');
    base64_encode_raw(reinterpret_cast<char*>(&out[0]), in.size(), reinterpret_cast<const uint8_t*>(in.data()));
    return out;
}

}  // namespace

std::string hmac_sha256(const std::string& key, const std::string& message) {
    struct hmac_sha256_ctx ctx;
    hmac_sha256_set_key(&ctx, key.size(), reinterpret_cast<const uint8_t*>(key.data()));
    hmac_sha256_update(&ctx, message.size(), reinterpret_cast<const uint8_t*>(message.data()));
    std::string out(SHA256_DIGEST_SIZE, '\0');
    hmac_sha256_digest(&ctx, SHA256_DIGEST_SIZE, reinterpret_cast<uint8_t*>(&out[0]));
    return out;
}

KeyPair ed25519_from_seed(const std::string& seed, const std::string& comment) {
    if (seed.size() != ED25519_KEY_SIZE) SVM_THROW("an Ed25519 seed has 32 bytes");
    std::string pub(ED25519_KEY_SIZE, '\0');
    ed25519_sha512_public_key(reinterpret_cast<uint8_t*>(&pub[0]), reinterpret_cast<const uint8_t*>(seed.data()));
    std::string pub_blob;
    put_string(pub_blob, "ssh-ed25519");
    put_string(pub_blob, pub);

    // openssh-key-v1, unencrypted. The check integers only need to match each
    // other; derive them from the key so the output is deterministic.
    uint32_t check = (static_cast<uint8_t>(pub[0]) << 24) | (static_cast<uint8_t>(pub[1]) << 16) |
                     (static_cast<uint8_t>(pub[2]) << 8) | static_cast<uint8_t>(pub[3]);
    std::string priv;
    put_u32(priv, check);
    put_u32(priv, check);
    put_string(priv, "ssh-ed25519");
    put_string(priv, pub);
    put_string(priv, seed + pub);
    put_string(priv, comment);
    for (char pad = 1; priv.size() % 8; ++pad) priv += pad;

    std::string blob = std::string("openssh-key-v1") + '\0';
    put_string(blob, "none");
    put_string(blob, "none");
    put_string(blob, "");
    put_u32(blob, 1);
    put_string(blob, pub_blob);
    put_string(blob, priv);

    std::string enc = b64(blob);
    KeyPair k;
    k.private_key = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
    for (size_t i = 0; i < enc.size(); i += 70) k.private_key += enc.substr(i, 70) + "\n";
    k.private_key += "-----END OPENSSH PRIVATE KEY-----\n";
    k.public_key = "ssh-ed25519 " + b64(pub_blob) + " " + comment + "\n";
    return k;
}

KeyPair job_user_key(const std::string& secret, uint32_t job_id, uint32_t uid) {
    std::string label = "slurm-vm/v1/user/job=" + std::to_string(job_id) + "/uid=" + std::to_string(uid);
    return ed25519_from_seed(hmac_sha256(secret, label), "slurm-vm job " + std::to_string(job_id));
}

KeyPair guest_host_key(const std::string& secret, uint32_t job_id, const std::string& node) {
    std::string label = "slurm-vm/v1/host/job=" + std::to_string(job_id) + "/node=" + node;
    return ed25519_from_seed(hmac_sha256(secret, label),
                             "slurm-vm job " + std::to_string(job_id) + " guest on " + node);
}

std::string read_site_secret(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) SVM_THROW_ERRNO("site secret " + path);
    if (st.st_mode & 0077) SVM_THROW("site secret " + path + " must not be readable by group or others (chmod 600)");
    if (st.st_uid != 0) SVM_THROW("site secret " + path + " must be owned by root");
    std::string s = read_file(path);
    if (s.size() < 32) SVM_THROW("site secret " + path + " is too short (at least 32 bytes)");
    return s;
}

}  // namespace svm
