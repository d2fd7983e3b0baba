from proofs.crosshair.plugin import install; install()
