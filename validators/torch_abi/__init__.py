"""Which versions of a binary package load beside which torch, decided from the facts the
pre-install reader (validators.lockcheck) extracts from byte ranges of the wheels."""
