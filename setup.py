"""Only the one C extension; everything else about the package is in pyproject.toml.

`optional=True`: where no C compiler is at hand the install still succeeds, and edgesync/buffer_checks.py
checks with torch instead (slower on small messages, docs/benchmarks.md)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("edgesync._buffer_checks", ["edgesync/_buffer_checks.c"], optional=True,
                             extra_compile_args=["-O3"])])
