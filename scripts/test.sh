#!/usr/bin/env bash
# Install everything the test suite needs, then run the linters, the type checker and the tests.
# Used word for word by the README's Quickstart and by CI (.ci/run). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}

# System packages: kubectl (the tests drive the simulated cluster with it), chromium (the browser
# tests of the pages; `playwright install` cannot download browsers everywhere), npm (the lab
# extension's jest tests), postgresql (the database tests start a throwaway server with its
# initdb and pg_ctl, tests/pg.py) and prometheus (the Prometheus source's tests start a throwaway
# /usr/bin/prometheus scraping the simulator's exporter, tests/prom.py). As root they are
# installed; under CI (CI=true) or as root a tool that is still missing is an error, since the
# tests that need it would not run. Elsewhere it is a warning and those tests are skipped, with the
# reason (pytest -rs).
#
# Debian's prometheus package starts a system Prometheus (on 0.0.0.0:9090) where an init system
# lets it, and recommends prometheus-node-exporter, another service, with ~20 packages for it. The
# tests start their own server and no other may be left running, so prometheus is installed
# without its recommends, with a policy-rc.d that denies every service start in place during the
# install (Docker images have one already: it is then left alone), and a system prometheus that
# started anyway is stopped and disabled. (In a container without systemd nothing starts even
# without policy-rc.d: invoke-rc.d cannot tell the runlevel, so it starts nothing.)
strict=0
if [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ] || [ "$(id -u)" = 0 ]; then strict=1; fi
need=()
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
has_postgres() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; }
has_postgres || need+=(postgresql)
has_prometheus() { [ -x /usr/bin/prometheus ]; }
quiet=() # installed without their recommends, their services not started
has_prometheus || quiet+=(prometheus)
policy=/usr/sbin/policy-rc.d
added_policy=0
drop_policy() { if [ "$added_policy" = 1 ]; then rm -f "$policy" && added_policy=0; fi; }
install_quietly() {
  if [ ! -e "$policy" ]; then
    trap drop_policy EXIT
    added_policy=1
    printf '#!/bin/sh\n# scripts/test.sh: no service starts during its install\nexit 101\n' >"$policy"
    chmod 755 "$policy"
  fi
  local status=0 service
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null ||
    status=$?
  drop_policy
  trap - EXIT
  for service in "$@"; do
    if [ -d /run/systemd/system ]; then
      systemctl disable --now "$service.service" >/dev/null 2>&1 || true
    elif [ -x "/etc/init.d/$service" ]; then
      service "$service" stop >/dev/null 2>&1 || true
      update-rc.d "$service" disable >/dev/null 2>&1 || true
    fi
  done
  return "$status"
}
if [ $((${#need[@]} + ${#quiet[@]})) -gt 0 ] && [ "$(id -u)" = 0 ]; then
  apt-get update -qq
  if [ ${#need[@]} -gt 0 ]; then
    echo "== apt-get install ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  if [ ${#quiet[@]} -gt 0 ]; then
    echo "== apt-get install --no-install-recommends ${quiet[*]} (services not started)"
    install_quietly "${quiet[@]}"
  fi
fi
missing=()
for tool in kubectl chromium npm; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
has_postgres || missing+=(postgresql)
has_prometheus || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$strict" = 1 ]; then
    echo "error: ${missing[*]} missing (apt-get install failed?); the tests need them" >&2
    exit 1
  fi
  echo "warning: not root, cannot install ${missing[*]}; the tests that need them are skipped" >&2
fi

echo "== pip install -e .[test]"
"$PY" -m pip install -q --disable-pip-version-check -e ".[test]"

# The JupyterLab extension's own tests (jest). The extension itself is prebuilt and committed in
# jupyter_gpupool/labextension/, so nothing above needs Node.js.
if command -v npm >/dev/null 2>&1; then
  echo "== labextension: npm ci && npm test"
  (cd labextension && npm ci --no-audit --no-fund --loglevel=error && npm test)
fi

echo "== ruff check"
"$PY" -m ruff check .
echo "== ruff format --check"
"$PY" -m ruff format --check .
echo "== mypy jupyter_gpupool"
"$PY" -m mypy jupyter_gpupool
echo "== pytest"
# -rs lists every skipped test with its reason; under CI a skip fails the run (tests/conftest.py).
# The tests run in parallel (pytest-xdist): most of their time is spent waiting on the processes
# they start (hubs, servers, control planes), so more workers than cores pay off; 4 was the
# fastest on 2 cores (README, Development). --dist loadgroup keeps the tests that share an
# expensive fixture on one worker (tests/conftest.py). GPUPOOL_TEST_WORKERS=N changes the count;
# `-n 0` or `-p no:xdist` among the arguments runs them serially, in this process.
parallel=(-n "${GPUPOOL_TEST_WORKERS:-4}" --dist loadgroup)
for arg in "$@"; do
  case $arg in no:xdist | -pno:xdist) parallel=() ;; esac
done
"$PY" -m pytest -p no:cacheprovider -rs ${parallel[@]+"${parallel[@]}"} "$@"
