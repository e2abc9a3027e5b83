"""The static verdict before install: ELF facts read from byte ranges of the locked wheels."""
