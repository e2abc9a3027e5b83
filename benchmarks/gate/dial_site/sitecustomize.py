"""Put this folder first on PYTHONPATH with STACKGATE_DIAL=0.03 to make the SGLang server 3%
slower per forward step (benchmarks/gate/regression_dial.py; STACKGATE_DIAL_FILE to change it
while the server runs); without STACKGATE_DIAL it does nothing."""

import os
import sys

if os.environ.get("STACKGATE_DIAL"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import regression_dial

    regression_dial.install_from_env()
