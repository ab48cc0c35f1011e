#!/bin/bash
# The Debian package: builds with CPack from a clean build directory, holds
# exactly the expected files, installs, its plugin loads from the installed path
# (sbatch --help lists --vm-image; no controller needed), its commands and man
# pages work, and removing and purging it leaves nothing behind.
#
# Standalone: it needs neither the local cluster nor lib.sh, and it touches
# neither (the cluster runs the build tree's plugin with its own configuration).
# Skips itself (77) where it would destroy something: slurm-vm installed from a
# package, or an /etc/slurm-vm that is not ours.
set -euo pipefail

SRC="${SVM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
T0=$(date +%s)
log() { printf '[test_package +%ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
pass() { log "PASS: $*"; }
skip() { log "SKIP: $*"; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "needs root (dpkg -i)"
for c in cmake cpack dpkg dpkg-deb dpkg-query apt-get sbatch srun man gzip; do
    command -v "$c" >/dev/null || skip "$c is not installed"
done
[[ "$(dpkg --print-architecture)" == amd64 ]] || skip "the package is built for amd64 only"
pkg_state() { dpkg-query -W -f='${db:Status-Status}' slurm-vm 2>/dev/null || true; }
state="$(pkg_state)"
[[ -z "$state" || "$state" == not-installed ]] ||
    skip "slurm-vm is installed here (dpkg state: $state); this test would purge it"
[[ ! -e /etc/slurm-vm ]] || skip "/etc/slurm-vm exists; purging the test package would remove it"

MA="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
PLUGIN="/usr/lib/$MA/slurm-wlm/slurm-vm.so"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/svm-package.XXXXXX")"
installed=0
cleanup() {
    local rc=$?
    if (( installed )) && [[ "$(pkg_state)" != not-installed && -n "$(pkg_state)" ]]; then
        dpkg --purge slurm-vm >"$TMP/cleanup-purge.log" 2>&1 ||
            { log "cleanup: dpkg --purge slurm-vm failed:"; cat "$TMP/cleanup-purge.log" >&2; rc=1; }
    fi
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build -------------------------------------------------------------------
B="$TMP/build"
log "building from $SRC in a fresh build directory (prefix /usr, no tests)"
cmake -S "$SRC" -B "$B" -DCMAKE_INSTALL_PREFIX=/usr -DBUILD_TESTING=OFF >"$TMP/build.log" 2>&1 ||
    { tail -n 30 "$TMP/build.log" >&2; fail "cmake configure failed"; }
cmake --build "$B" -j2 >>"$TMP/build.log" 2>&1 ||
    { grep -m 20 -B2 -A8 'error' "$TMP/build.log" >&2 || tail -n 40 "$TMP/build.log" >&2; fail "build failed"; }
log "built; packaging"
(cd "$B" && cpack -G DEB) >"$TMP/cpack.log" 2>&1 || { cat "$TMP/cpack.log" >&2; fail "cpack -G DEB failed"; }
shopt -s nullglob
debs=("$B"/slurm-vm_*_amd64.deb)
shopt -u nullglob
[[ ${#debs[@]} -eq 1 ]] || fail "expected one slurm-vm_*_amd64.deb in the build directory, found ${#debs[@]}"
DEB="${debs[0]}"
pass "built $(basename "$DEB") ($(du -k "$DEB" | cut -f1) KiB)"

# --- contents and control fields -----------------------------------------------
dpkg-deb -c "$DEB" >"$TMP/contents" || fail "dpkg-deb -c failed"
# "perms owner size date time ./path": paths, directories with a trailing slash.
awk '{print $6}' "$TMP/contents" | sed 's|^\./|/|' >"$TMP/paths"
grep -v '/$' "$TMP/paths" | sort >"$TMP/files"
grep '/$' "$TMP/paths" | sed 's|/$||' | sort >"$TMP/dirs"
cat >"$TMP/want-files" <<EOF
/etc/slurm-vm/slurm-vm.json
$PLUGIN
/usr/libexec/slurm-vm/slurm-vm-adopt
/usr/libexec/slurm-vm/slurm-vm-exec
/usr/libexec/slurm-vm/slurm-vm-job-info
/usr/libexec/slurm-vm/slurm-vm-keeper
/usr/sbin/slurm-vm
/usr/sbin/slurm-vm-epilog
/usr/sbin/slurm-vm-prolog
/usr/share/doc/slurm-vm/README.Debian.md
/usr/share/doc/slurm-vm/README.md
/usr/share/man/man8/slurm-vm-epilog.8.gz
/usr/share/man/man8/slurm-vm-prolog.8.gz
/usr/share/man/man8/slurm-vm.8.gz
/usr/share/man/man8/slurm-vm.spank.8.gz
/usr/share/slurm-vm/slurm-vm.devices.schema.json
/usr/share/slurm-vm/slurm-vm.record.schema.json
/usr/share/slurm-vm/slurm-vm.schema.json
EOF
sort -o "$TMP/want-files" "$TMP/want-files"
# Every directory on the way to those files, and no other.
while read -r f; do d="$(dirname "$f")"; while [[ "$d" != / ]]; do echo "$d"; d="$(dirname "$d")"; done; done \
    <"$TMP/want-files" | sort -u >"$TMP/want-dirs"
if ! diff -u "$TMP/want-files" "$TMP/files" >"$TMP/diff"; then
    cat "$TMP/diff" >&2; fail "the package's files differ from the expected list (-expected +package)"
fi
if ! diff -u "$TMP/want-dirs" "$TMP/dirs" >"$TMP/diff"; then
    cat "$TMP/diff" >&2; fail "the package's directories differ from the expected list (-expected +package)"
fi
! grep -Eq 'svm-unit|svm-lab|/tests?/' "$TMP/paths" || fail "test files in the package"
! awk '$2 != "root/root"' "$TMP/contents" | grep -q . || fail "files not owned by root: $(awk '$2 != "root/root"' "$TMP/contents")"
for f in /usr/sbin/slurm-vm /usr/sbin/slurm-vm-prolog /usr/sbin/slurm-vm-epilog \
         /usr/libexec/slurm-vm/slurm-vm-keeper /usr/libexec/slurm-vm/slurm-vm-exec \
         /usr/libexec/slurm-vm/slurm-vm-job-info /usr/libexec/slurm-vm/slurm-vm-adopt; do
    grep -q "^-rwxr-xr-x .* \.$f\$" "$TMP/contents" || fail "$f is not mode 0755"
done
pass "contents: $(wc -l <"$TMP/files") files in the expected places, nothing else"

field() { dpkg-deb -f "$DEB" "$1"; }
[[ "$(field Package)" == slurm-vm ]] || fail "Package is '$(field Package)'"
depends="$(field Depends)"
for d in 'qemu-system-x86' 'qemu-utils' 'openssh-client' 'slurmd | slurm-wlm' \
         'libc6' 'libvirt0' 'libjansson4'; do
    grep -qF -- "$d" <<<"$depends" || fail "Depends lacks '$d': $depends"
done
# The seed image is made in memory (lib/guest/seed_iso.hpp).
grep -qF genisoimage <<<"$depends" && fail "Depends still names genisoimage: $depends"
# The Slurm release it was built against, exactly: the libslurm package behind
# libslurm-dev's libslurm.so and this Slurm's major.minor as a range
# (packaging/slurm-depends.cmake).
so="$(dpkg-query -L libslurm-dev | grep -m1 '/libslurm\.so$')" || fail "libslurm-dev has no libslurm.so"
libpkg="$(dpkg-query -S "$(readlink -f "$so")" | head -n1 | cut -d: -f1)"
rel="$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins | grep -oE '^[0-9]+\.[0-9]+')"
for d in "$libpkg" "slurm-wlm-basic-plugins (>= $rel)" "slurm-wlm-basic-plugins (<< "; do
    grep -qF -- "$d" <<<"$depends" || fail "Depends lacks '$d': $depends"
done
dpkg-deb -e "$DEB" "$TMP/control"
[[ "$(cat "$TMP/control/conffiles")" == /etc/slurm-vm/slurm-vm.json ]] ||
    fail "conffiles is not exactly /etc/slurm-vm/slurm-vm.json: $(cat "$TMP/control/conffiles")"
[[ -x "$TMP/control/postinst" && -x "$TMP/control/postrm" ]] || fail "postinst/postrm missing or not executable"
pass "control: Depends (Slurm $rel, $libpkg) and conffiles as expected"

# --- install -------------------------------------------------------------------
log "installing"
installed=1
if ! dpkg -i "$DEB" >"$TMP/install.log" 2>&1; then
    log "dpkg -i left dependencies to install; apt-get install -f"
    DEBIAN_FRONTEND=noninteractive apt-get install -f -y >>"$TMP/install.log" 2>&1 ||
        { cat "$TMP/install.log" >&2; fail "apt-get install -f failed"; }
fi
[[ "$(pkg_state)" == installed ]] || { cat "$TMP/install.log" >&2; fail "slurm-vm not installed after dpkg -i (state $(pkg_state))"; }
dpkg -L slurm-vm | sort >"$TMP/listed"
comm -23 "$TMP/want-files" "$TMP/listed" | grep . && fail "dpkg -L lacks the files above"
# Minimal images tell dpkg not to unpack docs and man pages (path-exclude).
excludes=()
while read -r _ pat; do excludes+=("$pat"); done < <(cat /etc/dpkg/dpkg.cfg.d/* 2>/dev/null | grep '^path-exclude')
# shellcheck disable=SC2053  # the patterns are globs
dpkg_excluded() { local pat; for pat in "${excludes[@]}"; do [[ "$1" == $pat ]] && return 0; done; return 1; }
while read -r f; do
    [[ -e "$f" ]] || dpkg_excluded "$f" || fail "$f missing after installation"
done <"$TMP/want-files"
grep -q 'identical on all' "$TMP/install.log" || { cat "$TMP/install.log" >&2; fail "postinst did not tell the admin about the secret"; }
read -r smode sowner ssize < <(stat -c '%a %U:%G %s' /etc/slurm-vm/secret) || fail "postinst made no /etc/slurm-vm/secret"
[[ "$smode $sowner $ssize" == "600 root:root 48" ]] || fail "secret is '$smode $sowner $ssize', not '600 root:root 48'"
sum1="$(sha256sum </etc/slurm-vm/secret)"
pass "installed; postinst made /etc/slurm-vm/secret (0600 root, 48 bytes)"

# Reinstalling (an upgrade) keeps the secret.
dpkg -i "$DEB" >"$TMP/reinstall.log" 2>&1 || { cat "$TMP/reinstall.log" >&2; fail "reinstalling failed"; }
[[ "$(sha256sum </etc/slurm-vm/secret)" == "$sum1" ]] || fail "reinstalling replaced the site secret"
! grep -q 'identical on all' "$TMP/reinstall.log" || fail "reinstalling announced a new secret"
pass "reinstall keeps the site secret"

# --- the installed plugin loads (no controller needed for --help) -----------------
C="$TMP/conf"
mkdir -p "$C"
cat >"$C/slurm.conf" <<EOF
# Only for the SPANK plugin stack of the client commands; no daemon reads it.
ClusterName=svmpkgtest
SlurmctldHost=localhost
SlurmctldPort=1
PlugStackConfig=$C/plugstack.conf
NodeName=localhost CPUs=1 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES
EOF
echo "required $PLUGIN config=/etc/slurm-vm/slurm-vm.json" >"$C/plugstack.conf"
for cmd in sbatch srun salloc; do
    out="$(SLURM_CONF="$C/slurm.conf" timeout 30 "$cmd" --help 2>&1)" || fail "$cmd --help failed: $out"
    grep -q -- '--vm-image=PATH' <<<"$out" || fail "$cmd --help does not list --vm-image: $out"
done
pass "sbatch, srun, salloc --help list --vm-image from $PLUGIN"
# The submit-side check runs from the installed plugin and refuses a missing image
# before any controller is asked.
rc=0
out="$(cd "$TMP" && SLURM_CONF="$C/slurm.conf" timeout 30 sbatch --vm-image="$TMP/missing.qcow2" --wrap=true 2>&1)" || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "sbatch with a missing image: rc $rc: $out"
grep -q 'error: slurm-vm: ' <<<"$out" || fail "sbatch's refusal does not come from slurm-vm: $out"
pass "installed plugin refuses a missing image: $(grep -m1 'slurm-vm: ' <<<"$out")"
# A plugstack line naming a missing plugin does fail (the check above is not vacuous).
echo "required /usr/lib/$MA/slurm-wlm/slurm-vm-missing.so" >"$C/plugstack.conf"
! SLURM_CONF="$C/slurm.conf" timeout 30 sbatch --help >/dev/null 2>&1 || fail "sbatch --help ignores a missing required plugin"

# --- commands and man pages ------------------------------------------------------
# The installed doctor's release check against the cluster's running Slurm
# (this leg's release: 22.05, 24.11 or 26.05): the package was built for it.
out="$(/usr/sbin/slurm-vm doctor --config "$SVM_CLUSTER_DIR/etc/slurm-vm.json" 2>&1)" || true
running="$(scontrol show config | awk '$1 == "SLURM_VERSION" {print $3}')"
grep -qE "slurm-release.*Slurm $running, plugin built for ${running%.*}" <<<"$out" ||
    fail "the installed doctor does not find Slurm $running to be the release it was built for: $(grep -m1 slurm-release <<<"$out")"
pass "installed doctor: $(grep -m1 slurm-release <<<"$out" | tr -s ' ')"
out="$(/usr/sbin/slurm-vm --help)" || fail "slurm-vm --help failed"
grep -q 'sweep' <<<"$out" || fail "slurm-vm --help: $out"
[[ "$(/usr/sbin/slurm-vm --version)" == "slurm-vm "* ]] || fail "slurm-vm --version"
out="$(slurm-vm-prolog --help)" || fail "slurm-vm-prolog --help failed"
grep -q '/etc/slurm-vm/slurm-vm.json' <<<"$out" || fail "the prolog's default configuration is not /etc/slurm-vm/slurm-vm.json: $out"
out="$(slurm-vm-epilog --help)" || fail "slurm-vm-epilog --help failed"
grep -q '/etc/slurm-vm/slurm-vm.json' <<<"$out" || fail "the epilog's default configuration is not /etc/slurm-vm/slurm-vm.json: $out"
# (The stripped binaries hold that string as immediates; the build's flags say it.)
grep -rqsF 'SVM_LIBEXECDIR=\"/usr/libexec/slurm-vm\"' "$B/lib/CMakeFiles" "$B/build.ninja" ||
    fail "the build did not compile in SVM_LIBEXECDIR=/usr/libexec/slurm-vm"
pass "slurm-vm, slurm-vm-prolog, slurm-vm-epilog --help; compiled-in paths /etc/slurm-vm and /usr/libexec/slurm-vm"
for page in slurm-vm slurm-vm-prolog slurm-vm-epilog slurm-vm.spank; do
    if dpkg_excluded "/usr/share/man/man8/$page.8.gz"; then log "man pages are excluded by dpkg.cfg.d here; not checked"; break; fi
    p="$(man -w "$page" 2>&1)" || fail "man -w $page: $p"
    [[ "$p" == "/usr/share/man/man8/$page.8.gz" ]] || fail "man -w $page gives $p"
    w="$(MANWIDTH=80 man --warnings -l "$p" 2>&1 >/dev/null)" || fail "man $page failed: $w"
    [[ -z "$w" ]] || fail "man $page: warnings: $w"
    ! zgrep -q '@SVM_[A-Z_]*@' "$p" || fail "$p has unfilled placeholders"
done
pass "man -w finds slurm-vm(8), slurm-vm-prolog(8), slurm-vm-epilog(8), slurm-vm.spank(8); no groff warnings"

# --- remove, then purge -----------------------------------------------------------
dpkg -r slurm-vm >"$TMP/remove.log" 2>&1 || { cat "$TMP/remove.log" >&2; fail "dpkg -r failed"; }
[[ "$(pkg_state)" == config-files ]] || fail "after dpkg -r the state is $(pkg_state), not config-files"
[[ -f /etc/slurm-vm/slurm-vm.json && -f /etc/slurm-vm/secret ]] || fail "dpkg -r removed the configuration"
[[ ! -e "$PLUGIN" && ! -e /usr/sbin/slurm-vm-prolog ]] || fail "dpkg -r left programs"
dpkg --purge slurm-vm >"$TMP/purge.log" 2>&1 || { cat "$TMP/purge.log" >&2; fail "dpkg --purge failed"; }
state="$(pkg_state)"
[[ -z "$state" || "$state" == not-installed ]] || fail "after purge the state is $state"
! dpkg -L slurm-vm >/dev/null 2>&1 || fail "dpkg -L still lists slurm-vm after purge"
left=()
while read -r f; do [[ -e "$f" ]] && left+=("$f"); done < <(cat "$TMP/want-files"; echo /etc/slurm-vm/secret;
    echo /etc/slurm-vm; echo /usr/libexec/slurm-vm; echo /usr/share/slurm-vm; echo /usr/share/doc/slurm-vm)
(( ${#left[@]} == 0 )) || fail "left after purge: ${left[*]}"
installed=0
pass "dpkg -r keeps /etc/slurm-vm; dpkg --purge leaves nothing (secret and conffile included)"
log "done in $(( $(date +%s) - T0 ))s"
