"""Container engines behind one interface, for building images (builder image) and running
them (validators run --image): Docker Engine (SDK), buildah, podman.

base.py     ContainerEngine (build, tag, export, run), BuildSpec/RunSpec, the one ENGINES order
buildah.py  buildah and podman (same containers/storage CLI)
docker.py   Docker Engine through the docker SDK
select.py   open_engine: the engine asked for, or the first usable one
run.py      the layout inside a stack image and run_in_image

Adding a container engine is one module with a ContainerEngine subclass (its capabilities,
can_run_gpus and reproducible, are class attributes), its name in base.EngineName, its class
in select.ENGINE_CLASSES (checked against each other on import), and its tests.
"""
