# Sourced by the scripts: the Python cuxla is installed into. PYTHON names an
# interpreter to use as it is; otherwise the checkout's own virtual
# environment, .venv, which scripts/setup makes (a system Python may refuse
# pip installs, PEP 668). Its bin/ goes first on PATH for cmake and ninja.
CUXLA_VENV=${CUXLA_VENV:-}
if [ -z "${PYTHON:-}" ]; then
  PYTHON=$PWD/.venv/bin/python
  CUXLA_VENV=$PWD/.venv
  PATH=$CUXLA_VENV/bin:$PATH
fi
export PYTHON PATH CUXLA_VENV
