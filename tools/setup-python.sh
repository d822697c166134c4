#!/usr/bin/env bash
# The development and CI Python: a virtual environment at $1 (the Makefile
# passes .setup/venv) from Debian's Python 3.11, with the pinned set in
# tools/python-dev-requirements.txt. The Makefile chooses it explicitly
# with RETICULATE_PYTHON; nothing registers it for other R sessions, so a
# user's keras3 Python is never outranked by it.
# Usage: tools/setup-python.sh ENV_DIR
set -euo pipefail
env_dir=$1
requirements="$(dirname "$0")/python-dev-requirements.txt"
if [ ! -x "$env_dir/bin/python" ]; then
  /usr/bin/python3.11 -m venv "$env_dir"
fi
"$env_dir/bin/python" -m pip install --quiet --upgrade pip
"$env_dir/bin/python" -m pip install --quiet -r "$requirements"
