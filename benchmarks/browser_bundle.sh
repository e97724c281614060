#!/usr/bin/env bash
# Build, on a Debian x86-64 machine with apt, a bundle for running the browser test
# (tests/test_browser.py) on a GPU machine that has no browser and no package index:
# Debian's chromium-headless-shell with the shared libraries it loads, the fonts the layout
# checks measure (DejaVu and Liberation) with this machine's font rules, and the Python
# packages the test needs beyond the GPU stack (Streamlit, Altair, Playwright and their
# needs), as wheels for the GPU machine's Python ($PY_VERSION, default 3.12), at the versions
# of this repository's .venv. `benchmarks/gpu_run.sh browser-test` unpacks and runs it.
#
# Usage: bash benchmarks/browser_bundle.sh OUT.tar.xz     (as root: it uses apt-get download)
set -euo pipefail
out=$(realpath -m "${1:?usage: browser_bundle.sh OUT.tar.xz}")
py_version=${PY_VERSION:-3.12}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
version=$(apt-cache policy chromium-headless-shell | awk '/Candidate/ {print $2}')
apt-get download -q "chromium-headless-shell=$version" "chromium-common=$version" \
  fonts-dejavu-core fonts-liberation
for f in *.deb; do dpkg -x "$f" x; done
b=$work/b
mkdir -p "$b/lib" "$b/fonts" "$b/site"
cp -a x/usr/lib/chromium "$b/chromium"
# the validation layer and the mock driver are for Vulkan debugging; one locale is enough
rm -f "$b"/chromium/libVkLayer_khronos_validation* "$b"/chromium/libVkICD_mock_icd*
find "$b/chromium/locales" -type f ! -name 'en-US*' -delete
# every shared library the browser loads except the C library's own (the device's glibc is newer)
ldd "$b/chromium/chromium-headless-shell" | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/(libc|libm|libdl|libpthread|librt)\.so|ld-linux' | xargs -I{} cp -L {} "$b/lib/"
find x -name '*.ttf' -exec cp {} "$b/fonts/" \;
# this machine's font rules (which font stands in for Arial, Helvetica, sans-serif)
cp -rL /etc/fonts/conf.d "$b/conf.d"
cat > "$b/fonts.conf" <<'EOF'
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir prefix="relative">fonts</dir><include prefix="relative">conf.d</include>
<cachedir>/tmp/fontconfig-cache</cachedir></fontconfig>
EOF
cat > "$b/chrome" <<'EOF'
#!/bin/sh
# the carried browser with its own libraries and fonts
here=$(dirname "$(readlink -f "$0")")
export LD_LIBRARY_PATH="$here/lib" FONTCONFIG_FILE="$here/fonts.conf"
exec "$here/chromium/chromium-headless-shell" "$@"
EOF
chmod +x "$b/chrome"
# the same versions as this machine's development environment, as wheels for $py_version
# (pydeck, which the app never imports, left out)
names='streamlit|altair|watchdog|starlette|uvicorn|websockets|python-multipart|itsdangerous'
names+='|jsonschema|jsonschema-specifications|referencing|rpds-py|playwright|greenlet'
pkgs=$("$repo/.venv/bin/pip" freeze | grep -i -E "^($names)==")
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py_version" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d whl $pkgs
for w in whl/*.whl; do unzip -q -o "$w" -d "$b/site"; done
chmod +x "$b"/site/playwright/driver/node
tar -C "$work" -cf - b | xz -9 -T0 > "$out"
ls -l "$out"
