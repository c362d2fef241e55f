"""Only the C extensions; everything else about the package is in pyproject.toml.

`optional=True`: where no C compiler is at hand the install still succeeds, and edgesync/buffer_checks.py
checks with torch instead (slower on small messages, docs/benchmarks.md); edgesync/model_passes.py the same."""
from setuptools import Extension, setup

setup(ext_modules=[
    Extension("edgesync._buffer_checks", ["edgesync/_buffer_checks.c"], optional=True, extra_compile_args=["-O3"]),
    # -ffp-contract=off: x + a*y rounded twice on every machine, not fused where a machine can (model_passes.py)
    Extension("edgesync._model_passes", ["edgesync/_model_passes.c"], optional=True,
              extra_compile_args=["-O3", "-ffp-contract=off", "-fno-math-errno"]),  # errno-free: sqrtf inlined
])
