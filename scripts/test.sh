#!/usr/bin/env bash
# Install everything the test suite needs, then run the linters, the type checker and the tests.
# Used word for word by the README's Quickstart and by CI (.ci/run). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}

# System packages: kubectl (the tests drive the simulated cluster with it) and chromium (the
# browser tests of the pages; `playwright install` cannot download browsers everywhere).
need=()
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "== apt-get install ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "warning: not root, cannot install ${need[*]}; the tests that need them will be skipped" >&2
  fi
fi

echo "== pip install -e .[test]"
"$PY" -m pip install -q --disable-pip-version-check -e ".[test]"

# The JupyterLab extension's own tests (jest). The extension itself is prebuilt and committed in
# jupyter_gpupool/labextension/, so nothing above needs Node.js.
if command -v npm >/dev/null 2>&1; then
  echo "== labextension: npm ci && npm test"
  (cd labextension && npm ci --no-audit --no-fund --loglevel=error && npm test)
else
  echo "warning: npm not found; the lab extension's jest tests are skipped" >&2
fi

echo "== ruff check"
"$PY" -m ruff check .
echo "== ruff format --check"
"$PY" -m ruff format --check .
echo "== mypy jupyter_gpupool"
"$PY" -m mypy jupyter_gpupool
echo "== pytest"
"$PY" -m pytest -p no:cacheprovider "$@"
