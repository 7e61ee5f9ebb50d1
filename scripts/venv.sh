# Sourced by scripts/test and scripts/bench: makes .venv hold the pinned Python peers
# (scripts/requirements.txt) and exports SLUICE_PYTHON.
python=${PYTHON:-python3}
stamp=.venv/.requirements.sha256
wanted=$(sha256sum scripts/requirements.txt | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "== installing the Python peers into .venv"
  "$python" -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
  echo "$wanted" > "$stamp"
fi
export SLUICE_PYTHON="$PWD/.venv/bin/python"
