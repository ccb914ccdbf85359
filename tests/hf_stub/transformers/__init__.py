# SPDX-License-Identifier: MIT
"""A stand-in for transformers 5 in the tests (the real one is not in Debian): only what
dmafs.enable() touches, with the same shape as transformers 5.17's loader."""
__version__ = "5-stub"
