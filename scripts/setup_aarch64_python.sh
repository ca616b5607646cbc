#!/usr/bin/env bash
# Prepares an aarch64 CPython that qemu-user runs, for the pytest run on aarch64 in phase 5
# of scripts/test.sh (default DIR: .aarch64-python, where that phase looks):
#   DIR/root        Debian's python3.11 arm64 packages and the libraries it loads, unpacked
#                   with dpkg-deb, not installed (nothing of the host's is replaced);
#   DIR/site        aarch64 wheels of the package's dependencies and its test tools;
#   DIR/bin/python3 runs DIR/root's interpreter under qemu-aarch64 and names itself as
#                   sys.executable, so a test that starts `sys.executable` starts it again.
# Needs Debian 12 (bookworm) or a release with python3.11, root for `dpkg
# --add-architecture arm64` and apt-get, qemu-user, and a host Python 3.11 or newer with pip
# ($PYTHON, default python3; its pip fetches the wheels; no aarch64 code runs while preparing).
set -euo pipefail
cd "$(dirname "$0")/.."
host_python=${PYTHON:-python3}
dir=$(realpath -m "${1:-.aarch64-python}")
rm -rf "$dir"
mkdir -p "$dir/debs" "$dir/root" "$dir/site" "$dir/bin"

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
fi
apt-get update -qq
# The interpreter, its standard library and the shared libraries they load (glibc, libffi
# for ctypes, libstdc++ for the pyarrow and polars wheels, ...).
packages=(
    python3.11-minimal libpython3.11-minimal libpython3.11-stdlib
    libc6 libgcc-s1 libstdc++6 libffi8 libssl3 zlib1g libexpat1 libbz2-1.0 liblzma5
    libsqlite3-0 libuuid1 libcrypt1 libnsl2 libtirpc3 libncursesw6 libtinfo6 libreadline8
    libdb5.3 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
)
# (apt-get warns that it downloads unsandboxed as root; harmless here.)
(cd "$dir/debs" && apt-get download -qq "${packages[@]/%/:arm64}")
for deb in "$dir"/debs/*.deb; do
    dpkg-deb -x "$deb" "$dir/root"
done
rm -rf "$dir/debs"
[[ -x "$dir/root/usr/bin/python3.11" ]] || { echo "error: no python3.11 in the arm64 packages" >&2; exit 1; }

# The runtime dependencies and the dev extra from pyproject.toml, without the host-only
# tools (the Zig compiler, the linter, `just`).
mapfile -t requirements < <("$host_python" - <<'EOF'
import re
import tomllib

with open("pyproject.toml", "rb") as file:
    project = tomllib.load(file)["project"]
host_tools = {"ziglang", "ruff", "rust-just", "mkdocs-material", "mkdocstrings"}
for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
    if re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0] not in host_tools:
        print(requirement)
EOF
)
"$host_python" -m pip install --quiet --target "$dir/site" --only-binary=:all: \
    --implementation cp --python-version 3.11 --abi cp311 \
    --platform manylinux_2_17_aarch64 --platform manylinux2014_aarch64 \
    --platform manylinux_2_28_aarch64 "${requirements[@]}"

printf '#!/bin/sh\nexec qemu-aarch64 -L "%s" -0 "%s" "%s" "$@"\n' \
    "$dir/root" "$dir/bin/python3" "$dir/root/usr/bin/python3.11" > "$dir/bin/python3"
chmod +x "$dir/bin/python3"
PYTHONPATH="$dir/site" "$dir/bin/python3" -c \
    'import platform, polars, pyarrow, pydantic, pytest; print("aarch64 python ready:", platform.machine(), platform.python_version())'
