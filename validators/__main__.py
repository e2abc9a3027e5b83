import sys

from stackgate.cli import main_for

sys.exit(
    main_for(["validators"], "python -m validators", "Judge an environment built from a stack.")
)
