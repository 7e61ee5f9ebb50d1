# Sourced by scripts/test: makes .venv-dbt hold dbt-core and dbt-postgres as pinned in
# scripts/requirements-dbt.txt (a venv of its own: dbt's pins conflict with .venv's) and exports
# SLUICE_DBT for server/tests/it/dbt.rs.
python=${PYTHON:-python3}
stamp=.venv-dbt/.requirements.sha256
wanted=$(sha256sum scripts/requirements-dbt.txt | cut -d' ' -f1)
if [ ! -x .venv-dbt/bin/dbt ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "== installing dbt into .venv-dbt"
  "$python" -m venv .venv-dbt
  .venv-dbt/bin/pip install --quiet --disable-pip-version-check -r scripts/requirements-dbt.txt
  echo "$wanted" > "$stamp"
fi
export SLUICE_DBT="$PWD/.venv-dbt/bin/dbt"
