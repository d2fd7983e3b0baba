"""Shared by every test folder: this folder is on ``sys.path`` (pytest's rootdir-relative
conftest import), so helpers such as :mod:`vllm_releases` import by their plain name."""
