// The job's SSH keys, derived (not generated) so that every node of a job
// computes the same keys without talking to the others: a per-job user key
// (the job's user logs into every guest with it, and guests into each other)
// and a host key per guest (every node knows every guest's public host key, so
// nobody ever trusts an unknown host key). Each is an Ed25519 key whose 32-byte
// seed is HMAC-SHA256(site secret, label), with labels naming the cluster
// scope, the job and the guest. The site secret is a root-only file, the same
// on every node (like munge's key).
#pragma once
#include <cstdint>
#include <string>

#include "ssh_keys.hpp"

namespace svm {

// Ed25519 key pair in OpenSSH formats from a 32-byte seed.
KeyPair ed25519_from_seed(const std::string& seed32, const std::string& comment);

std::string hmac_sha256(const std::string& key, const std::string& message);

KeyPair job_user_key(const std::string& secret, uint32_t job_id, uint32_t uid);
KeyPair guest_host_key(const std::string& secret, uint32_t job_id, const std::string& node);

// Reads the site secret (at least 32 bytes; must not be readable by others).
std::string read_site_secret(const std::string& path);

}  // namespace svm
