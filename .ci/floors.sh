#!/usr/bin/env bash
# The floors pyproject.toml states must be true: install exactly the lowest
# versions it allows (.ci/floors.py pins each NAME>=X as NAME==X) in a venv of
# their own, and run a short subset under them: every module imports, the
# committed stubs load and a real server answers, config, errors, mail. A
# floor that does not exist, conflicts with another, or is older than the
# code needs fails here. About a minute, mostly downloads.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
floors=$(mktemp -d)
trap 'rm -rf "$floors"' EXIT
python3 -m pip install -q packaging      # floors.py reads the requirements with it
python3 .ci/floors.py > "$floors/floors.txt"
# the test tools the subset needs, at their floors too
python3 .ci/floors.py test | grep -E '^(pytest|pytest-timeout|grpcio-tools)==' >> "$floors/floors.txt"
python3 -m venv "$floors/venv"
"$floors/venv/bin/pip" install -q -r "$floors/floors.txt"
"$floors/venv/bin/pip" install -q --no-deps -e .
"$floors/venv/bin/pip" check
echo "floors: $(tr '\n' ' ' < "$floors/floors.txt")"
"$floors/venv/bin/python" -m pytest -q -p no:cacheprovider \
  tests/test_imports.py tests/test_contract.py tests/test_config.py tests/test_config_errors.py \
  tests/lingjund/test_error_info.py tests/lingjund/test_mail.py tests/test_layers.py
