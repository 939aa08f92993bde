"""Build the Spark source's optional C decoder; everything else is in pyproject.toml.

The extension is ``optional``: without a C compiler ``pip install`` still succeeds and the
Spark source reads through its row path (it logs one line saying so).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "moldau.spark._kafka_batches",
            ["src/moldau/spark/_kafka_batches.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
