#!/usr/bin/env bash
# Create .venv (once) and install marin into it: `setup.sh demo` only what the demo needs (the
# evaluation step runs lm-eval-harness: the `eval` extra), plain `setup.sh` every extra the tests use.
# Idempotent: a second call costs a second only, unless pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
ALL_EXTRAS="ray,hf,eval,plot,ui,dev,infra,curation,quality,scaling,gcs,s3"
case "${1:-all}" in
  demo) extras="eval" stamp=.venv/.marin-installed-demo ;;
  all) extras="$ALL_EXTRAS" stamp=.venv/.marin-installed ;;
  *) echo "usage: scripts/setup.sh [demo|all]" >&2; exit 2 ;;
esac
up_to_date() { [ -f "$1" ] && [ ! pyproject.toml -nt "$1" ]; }
# Everything the tests need covers the demo too.
if up_to_date "$stamp" || up_to_date .venv/.marin-installed; then
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# The torch pin comes first, so that a CPU machine with the local wheel gets the small CPU build
# and elsewhere PyPI serves the CUDA build of the same release: an open `torch` requirement alone
# would pull a multi-GB CUDA build even where no GPU exists.
torch="torch==${MARIN_TORCH_VERSION:-2.13.0}"
log=.venv/setup.log
echo "setting up .venv with marin[$extras] (the installer's output: $log)" >&2

# uv installs the ~100 packages in parallel, several times faster than pip; it is itself a pip
# install. It reads none of pip's configuration, so pip's own indexes, wheel folders and
# constraints (environment or pip.conf) are handed to it, and uv, like pip, takes the best
# version any of them has. Unlike pip, uv writes no bytecode unless asked: where
# PYTHONDONTWRITEBYTECODE is set (as in many containers), every fresh interpreter would then compile
# what it imports from source (gcsfs and its google-auth and requests chain: seconds per process).
pip_setting() {
  sed -n "s/^[^.]*\.$1='\(.*\)'$/\1/p" <<<"$pip_config" | tail -n 1
}
install_with_uv() {
  .venv/bin/python -m pip install --quiet uv || return 1
  pip_config=$(.venv/bin/python -m pip config list 2>/dev/null || true)  # read once: each call starts pip
  local pair key var value
  for pair in find-links:FIND_LINKS index-url:INDEX_URL extra-index-url:EXTRA_INDEX_URL constraint:CONSTRAINT; do
    key=${pair%%:*} var=${pair#*:}
    uv_name=UV_$var pip_name=PIP_$var
    value=${!uv_name:-${!pip_name:-$(pip_setting "$key")}}
    if [ -n "$value" ]; then export "$uv_name=$value"; fi
  done
  UV_INDEX_STRATEGY=unsafe-best-match \
    .venv/bin/python -m uv pip install --compile-bytecode --python .venv/bin/python "$torch" -e ".[$extras]"
}
install_with_pip() {
  .venv/bin/python -m pip install --upgrade pip
  .venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install "$torch"
  .venv/bin/python -m pip install -e ".[$extras]"
}
{
  install_with_uv || { echo "uv is not available here; installing with pip" && install_with_pip; }
} >"$log" 2>&1 || { tail -n 40 "$log" >&2; echo "setup failed; the whole log is $log" >&2; exit 1; }
touch "$stamp"
