# Sourced by the lent-H200 drivers (benchmarks/gate_h200*.sh, h200_sglang.sh) once stackgate's
# own wheels are in /tmp/site: the tool's environment, the image's Python (MPY) and its
# site-packages (SITE), the validators CLI (SG), and a `python` beside the image venv's
# `python3` (the runtime probes start `python`). Needs REPO (the checkout the driver runs in).
export PYTHONPATH="/tmp/site:$REPO" PATH="/tmp/site/bin:$PATH"
export STACKGATE_STATE_DIR=/tmp/sg/state STACKGATE_VENV_ROOT=/tmp/sg/envs
MPY=$(python3 -c 'import sys; print(sys.executable)')
SITE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
SG="python3 -m validators"
TORCH_ENV=$(dirname "$(dirname "$MPY")")
[ -e "$TORCH_ENV/bin/python" ] || ln -s python3 "$TORCH_ENV/bin/python"
