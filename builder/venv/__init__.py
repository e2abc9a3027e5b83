"""uv.lock -> an environment: the interpreter, the uv install commands, the all-or-nothing folder
swap, what got installed, the tree hash and the build record's facts."""
