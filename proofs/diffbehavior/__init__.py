"""Drivers that CrossHair's ``diffbehavior`` compares: the spec against the manager."""
