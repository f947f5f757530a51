#!/usr/bin/env bash
# Debian packages the platform and its tests need, installed with apt only when missing.
#   kernels  real Jupyter kernels for the runtime (python3-jupyter-server, python3-ipykernel, …), the
#            lab's terminals (python3-terminado, also a dependency of python3-jupyter-server) and
#            bubblewrap, the kernel sandbox
#   browser  Chromium for the browser tests (never a downloaded browser)
#   nginx    Debian's nginx, for the ingress tests (`codeagent nginx-config` in front of the platform)
#   webdav   rclone and fuse3: the WebDAV client of the workspace file tree's tests and the mount helper
# Usage: scripts/system-deps.sh [kernels] [browser] [nginx] [webdav]   (no argument: kernels and browser)
set -euo pipefail
groups=("$@"); [ ${#groups[@]} -gt 0 ] || groups=(kernels browser)
want=()
for g in "${groups[@]}"; do
  case "$g" in
    kernels) want+=(python3-jupyter-server jupyter-server python3-ipykernel python3-nbclient python3-jupyterlab-server python3-terminado bubblewrap) ;;
    browser) want+=(chromium) ;;
    # The binary (Debian builds it with auth_request); the tests start it unprivileged with their own file.
    nginx) want+=(nginx) ;;
    webdav) want+=(rclone fuse3) ;;
    *) echo "unknown group $g (use kernels, browser, nginx or webdav)" >&2; exit 2 ;;
  esac
done
command -v dpkg-query >/dev/null || { echo "not a Debian system: install ${want[*]} by hand" >&2; exit 1; }
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "missing Debian packages: ${missing[*]}; install them with: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
echo "[codeagent] installing ${missing[*]} with apt (once)…" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
