"""A stack's uv.lock as both sides read it: uvlock.py parses it, state.py says whether it is
current, pins.py whether it holds the manifest's pins, install.py and wheels.py what it
installs on the target, torch_abi.py the torch ABI verdicts of its binary wheels."""
