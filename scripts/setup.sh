#!/bin/sh
# The README's set-up command, run from the repository root:
#   1. a fresh .venv with the CPU build of torch 2.13.0 and omni-npu-port with its dev extras;
#   2. Debian's chromium for the docs-site screenshot test, where this machine allows it (root or passwordless
#      sudo, and apt-get); elsewhere one line says how, and that test is skipped with the reason (under CI it fails);
#   3. the release archives the tests read (tests/archives.py lists them; the tour reads none) into the package cache,
#      ~/.cache/omni-npu-port/pkgs ($OMNI_NPU_PORT_CACHE), one line each; one that fails is named and setup stops;
#   4. the tour (`omni-npu-port tour`), the first run of the main job.
# On an Ascend host install the torch that matches your torch_npu and CANN instead (see the README).
set -eu
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install torch==2.13.0 -e '.[dev]'
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo -n"; fi
    if command -v apt-get >/dev/null 2>&1 && { [ -z "$SUDO" ] || sudo -n true 2>/dev/null; }; then
        echo "setup: installing Debian's chromium (the docs-site screenshot test drives it)"
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q \
            && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium \
            || echo "setup: warning: apt-get could not install chromium; the docs-site test will be skipped" >&2
    else
        echo "setup: note: no chromium at /usr/bin/chromium and no way to install it here (needs root or sudo, and" \
             "apt-get); the docs-site screenshot test is skipped until \`apt-get install chromium\` is run" >&2
    fi
fi
.venv/bin/python tests/archives.py
.venv/bin/omni-npu-port tour
