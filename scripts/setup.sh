#!/usr/bin/env bash
# Everything `make test` and `make demo` need, on a fresh Debian 12 with Python 3.11.
#
# Idempotent and quick to re-run: each step checks first and skips what is in place; the
# Python packages are synced only when requirements.lock (or pyproject.toml) changed since
# the last sync (a stamp in .venv records their hash).
#
# System packages (as root, or via sudo): MariaDB server + client and PostgreSQL (the tests
# and the demo start their own throw-away servers; the system services are never started)
# and a Java 17 runtime for Spark when `java` is missing; MariaDB Connector/J (libmariadb-java)
# for the benchmark's Spark JDBC yardstick.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

UV_VERSION=0.13.9
PYTHON=python3.11
VENV=.venv
STAMP="$VENV/.airflow-cdc-setup"

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

have_package() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
else
    SUDO=(sudo)
fi

# -- system packages -----------------------------------------------------------------------
command -v "$PYTHON" >/dev/null || die "$PYTHON not found: this project needs Python 3.11 (Debian 12's python3)"

missing=()
# libmariadb-java: MariaDB Connector/J for the Spark JDBC yardstick of `make bench`;
# percona-toolkit: pt-online-schema-change, which the online schema change tests run;
# chromium: the headless browser the CDC page's test opens the page in.
for package in mariadb-server mariadb-client libmariadb-java percona-toolkit chromium; do
    have_package "$package" || missing+=("$package")
done
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
# PostgreSQL for the metadata-DB tests (LocalPostgres runs initdb/postgres from Debian's
# /usr/lib/postgresql/<version>/bin, not on PATH, as the `postgres` OS user the package adds).
have_postgres() {
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null \
        || { command -v initdb >/dev/null && command -v pg_ctl >/dev/null; }
}
if ! have_postgres || ! id -u postgres >/dev/null 2>&1; then
    missing+=(postgresql)
fi
if ! command -v uv >/dev/null && ! python3 -m uv --version >/dev/null 2>&1 \
    && ! python3 -m pip --version >/dev/null 2>&1; then
    missing+=(python3-pip)  # only to install uv
fi

if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get: install them by hand"
    if [ "${#SUDO[@]}" -gt 0 ] && ! command -v sudo >/dev/null; then
        die "missing ${missing[*]}: run this script as root (or install sudo)"
    fi
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Slim images lack this folder and openjdk's postinst fails without it.
    "${SUDO[@]}" mkdir -p /usr/share/man/man1
    # Keep package scripts from starting the system MariaDB or PostgreSQL (exit 101 = "not
    # allowed"): tests and the demo run their own servers on free ports.
    policy=/usr/sbin/policy-rc.d
    own_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
        "${SUDO[@]}" chmod 755 "$policy"
        own_policy=1
        trap '"${SUDO[@]}" rm -f "$policy"' EXIT
    fi
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ "$own_policy" -eq 1 ]; then
        "${SUDO[@]}" rm -f "$policy"
        trap - EXIT
    fi
else
    say "system packages present (MariaDB, PostgreSQL, Java, Connector/J, Percona Toolkit, Chromium)"
fi

# -- uv ------------------------------------------------------------------------------------
if command -v uv >/dev/null; then
    UV=(uv)
elif python3 -m uv --version >/dev/null 2>&1; then
    UV=(python3 -m uv)
else
    say "installing uv $UV_VERSION"
    # Debian marks its Python as externally managed; uv is one self-contained binary.
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --disable-pip-version-check \
        "uv==$UV_VERSION"
    if command -v uv >/dev/null; then UV=(uv); else UV=(python3 -m uv); fi
fi

# -- virtualenv and packages -----------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    say "creating $VENV with $PYTHON"
    rm -rf "$VENV"
    "${UV[@]}" venv --quiet --python "$PYTHON" "$VENV"
fi

# "bytecode": venvs synced before packages were compiled are synced again.
wanted="$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1) $("$VENV/bin/python" -V 2>&1) bytecode"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$wanted" ] \
    && "$VENV/bin/python" -c 'import airflow_cdc' >/dev/null 2>&1; then
    say "Python packages up to date (requirements.lock unchanged)"
else
    say "syncing $VENV with requirements.lock (first time: a few minutes)"
    rm -f "$STAMP"
    # Compiled now: with PYTHONDONTWRITEBYTECODE (set on these machines) no .pyc is ever
    # written, and every Spark worker, Airflow task and test process would recompile its
    # imports from source (1-3 s each).
    "${UV[@]}" pip sync --quiet --compile-bytecode --python "$VENV/bin/python" requirements.lock
    "${UV[@]}" pip install --quiet --python "$VENV/bin/python" --no-deps -e .
    printf '%s\n' "$wanted" >"$STAMP"
fi
# The repository's own tools (devtools/: local servers, the demo) are not in
# the wheel; the venv finds them, as do the Spark and Airflow processes tests start with it.
site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
printf '%s\n' "$PWD" >"$site/airflow_cdc_repository.pth"
say "ready"
