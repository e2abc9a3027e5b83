"""ELF and GPU-code facts of one object and their caches: static and lockcheck read them."""
