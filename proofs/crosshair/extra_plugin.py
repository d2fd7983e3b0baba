"""The file ``crosshair check --extra_plugin`` executes: installs :mod:`.plugin`."""

from proofs.crosshair.plugin import install

install()
