"""stackgate: reproducible GPU inference stacks, validated before they are called good.

The `stackgate` package is the door both rooms use: the manifest model, the compatibility
rules, one error hierarchy with exit codes, and one runner for external programs.
`builder` turns a manifest into an environment; `validators` judges an environment.
"""

__version__ = "0.1.0"
