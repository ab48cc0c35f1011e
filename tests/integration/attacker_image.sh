# shellcheck shell=bash
# An image a user could build on their own machine: the test image with a
# set-user-ID-root shell (/usr/local/bin/rootsh), so that the job's script is
# root in its own guest. Built once per test image, cached beside it; the
# caller copies it to the user. Sourced by the attack tests; needs root on
# the test host only (the setuid bit is set by debugfs), as on a user's laptop.
attacker_image() {
    local cache out raw src
    cache="$(dirname "$VM_TEST_IMAGE")"
    out="$cache/attacker.qcow2"
    if [[ -s "$out" && "$out" -nt "$VM_TEST_IMAGE" ]]; then echo "$out"; return 0; fi
    src="$(mktemp -d /tmp/svm-rootsh.XXXXXX)"
    cat >"$src/rootsh.c" <<'C'
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    if (setgid(0) || setuid(0)) return 126;
    argv[0] = "sh";
    execv("/bin/sh", argv);
    return 127;
}
C
    gcc -static -O2 -o "$src/rootsh" "$src/rootsh.c" || { rm -rf "$src"; return 1; }
    raw="$src/disk.raw"
    qemu-img convert -O raw "$VM_TEST_IMAGE" "$raw"
    # Partition 1 starts at sector 2048 (tests/image/build). debugfs writes
    # into the file system at that offset: no loop device (none in the
    # Debian 13 matrix's /dev, and no udev here to make partition devices).
    local ok=0
    printf '%s\n' "cd /usr/local/bin" "write $src/rootsh rootsh" "sif rootsh mode 0104755" \
        "sif rootsh uid 0" "sif rootsh gid 0" >"$src/debugfs.cmds"
    # debugfs exits 0 whatever its commands did: the result is checked.
    if debugfs -w -f "$src/debugfs.cmds" "$raw?offset=$((2048 * 512))" >"$src/debugfs.log" 2>&1 &&
        debugfs -R "stat /usr/local/bin/rootsh" "$raw?offset=$((2048 * 512))" 2>/dev/null |
        grep -qzE "Mode: +04755.*User: +0 +Group: +0 "; then
        ok=1
    else
        cat "$src/debugfs.log" >&2
    fi
    ((ok)) && qemu-img convert -O qcow2 "$raw" "$out.tmp" && mv -f "$out.tmp" "$out" || ok=0
    rm -rf "$src"
    ((ok)) || return 1
    echo "$out"
}

# attacker_copy DIR: the attacker's image, copied to DIR/mine.qcow2 (the
# user's own file once the caller chowns DIR); prints its path.
attacker_copy() {
    local src
    src="$(attacker_image)" || return 1
    cp "$src" "$1/mine.qcow2" && echo "$1/mine.qcow2"
}
