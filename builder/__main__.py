import sys

from stackgate.cli import main_for

sys.exit(main_for(["builder"], "python -m builder", "Turn a stack manifest into an environment."))
