# Sourced by scripts/run and scripts/check: make .venv and install odradek with its extras.
# Idempotent: re-running only reinstalls when pyproject.toml changed since the last install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    echo "odradek: creating $venv" >&2
    "$python" -m venv "$venv"
fi
stamp="$venv/.installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "odradek: installing dependencies into .venv" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    "$venv/bin/python" -m pip install --quiet -e ".[${ODRADEK_EXTRAS:-dev,spark}]" >&2
    touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
