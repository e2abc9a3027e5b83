"""Container images from a stack's manifest and lock.

- `pins`: images/base-images.toml, base images pinned by digest with their tags;
- `recipe`: the inputs of an image and the Containerfile rendered from images/*.j2;
- `context`: the build context, assembled from named files only;
- the engines (Docker Engine SDK, buildah, podman) are stackgate.containers, shared with the
  validators that run images;
- `build`: manifest + lock -> image, and the reproducibility check.

The layout inside an image is defined in `stackgate.containers.run` (validators read it too).
"""
