# Sourced by scripts/run and scripts/check: make .venv and install odradek with the extras asked
# for (ODRADEK_EXTRAS, comma-separated; default dev,spark -- scripts/run asks for none, so the
# first run of the demo installs only what a broker and the CLI need). Idempotent: each set of
# extras is installed once, and again only when pyproject.toml, setup.py or the C accelerator
# (protocol/_speedups.c, compiled by the install) changed since. pip's output goes
# to .venv/install.log and is shown only if the install fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"
python="${PYTHON:-python3}"
extras="${ODRADEK_EXTRAS-dev,spark}"
if [ ! -x "$venv/bin/python" ]; then
    echo "odradek: creating $venv" >&2
    "$python" -m venv "$venv"
fi
stamp="$venv/.installed-${extras//,/-}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] ||
   [ protocol/_speedups.c -nt "$stamp" ]; then
    echo "odradek: installing ${extras:-the broker and CLI} into .venv (log: .venv/install.log)" >&2
    target="."
    [ -n "$extras" ] && target=".[$extras]"
    if ! { "$venv/bin/python" -m pip install --quiet --upgrade pip &&
           "$venv/bin/python" -m pip install --quiet -e "$target"; } >"$venv/install.log" 2>&1; then
        echo "odradek: the install failed; the end of .venv/install.log:" >&2
        tail -n 30 "$venv/install.log" >&2
        exit 1
    fi
    touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
