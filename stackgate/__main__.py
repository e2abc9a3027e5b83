"""`python -m stackgate`: the same CLI as the `stackgate` script, for an interpreter that has
stackgate installed but no script on PATH."""

import sys

from stackgate.cli import main

sys.exit(main())
