#!/usr/bin/env bash
# Installs Bloom LIMS 5.0.1 into its own cached environment under var/bloom (docs/BLOOM.md):
# a virtualenv with Bloom's wheel and its declared dependencies (pinned by constraints.txt),
# and Bloom's unpacked sdist, which alone carries its TapDB template pack. Everything comes
# from PyPI at install time. A stamp makes a second run do nothing; a failure fails loudly.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DEST="${BLOOMOPS_BLOOM_DIR:-$ROOT/var/bloom}"
BLOOM_VERSION=5.0.1
STAMP="$DEST/.installed-$(cat "$HERE/install.sh" "$HERE/constraints.txt" | sha1sum | cut -c1-12)"

[ -f "$STAMP" ] && exit 0

# Bloom 5.0.1 declares Python >= 3.12: BLOOMOPS_BLOOM_PYTHON if set, else a 3.12 (pyenv's
# newest, else one on PATH). Without one, Python 3.11 runs Bloom's code too, installed without
# the version check.
find_python312() {
  local version
  if command -v pyenv >/dev/null 2>&1; then
    version="$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$' | sort -V | tail -n1 || true)"
    if [ -n "$version" ]; then
      PYENV_VERSION="$version" pyenv which python && return 0
    fi
  fi
  command -v python3.12 && return 0
  return 1
}

if [ -n "${BLOOMOPS_BLOOM_PYTHON:-}" ]; then
  PYTHON="$BLOOMOPS_BLOOM_PYTHON"
elif ! PYTHON="$(find_python312)"; then
  PYTHON="$(command -v python3.11 || command -v python3)"
fi
RELAXED=()
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
  RELAXED=(--ignore-requires-python)
fi
echo "Installing Bloom LIMS $BLOOM_VERSION into $DEST with $("$PYTHON" --version) (once; cached)..."
started=$SECONDS

rm -rf "$DEST"
mkdir -p "$DEST"
"$PYTHON" -m venv "$DEST/venv"
PIP=("$DEST/venv/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip

# Bloom and its auth package first without their dependencies (their Requires-Python would stop
# 3.11), then the dependencies Bloom declares, read from its own metadata, constrained.
"${PIP[@]}" "${RELAXED[@]}" --no-deps -c "$HERE/constraints.txt" \
  "bloom-lims==$BLOOM_VERSION" "daylily-auth-cognito==2.1.5"
"$DEST/venv/bin/python" - > "$DEST/requirements.txt" <<'PY'
from importlib.metadata import requires

for dist in ("bloom-lims", "daylily-auth-cognito"):
    for req in requires(dist) or ():
        if "extra ==" not in req:
            print(req)
PY
"${PIP[@]}" -c "$HERE/constraints.txt" -r "$DEST/requirements.txt"
"$DEST/venv/bin/python" -m pip check

# The sdist: its config/tapdb_templates is Bloom's template pack (the wheel lacks it).
"$DEST/venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
  "${RELAXED[@]}" --no-binary=:all: -d "$DEST/dl" "bloom-lims==$BLOOM_VERSION"
tar -xzf "$DEST/dl/bloom_lims-$BLOOM_VERSION.tar.gz" -C "$DEST"
ln -sfn "bloom_lims-$BLOOM_VERSION" "$DEST/src"
test -d "$DEST/src/config/tapdb_templates"

# Fail here, not in a test, if Bloom cannot import (from $DEST: Bloom makes logs/ in the cwd).
(cd "$DEST" && PYTHONPATH="$DEST/src" "$DEST/venv/bin/python" -c \
  "import bloom_lims.domain.execution_queue, bloom_lims.cli.db")
touch "$STAMP"
echo "Bloom LIMS $BLOOM_VERSION installed in $((SECONDS - started)) s."
