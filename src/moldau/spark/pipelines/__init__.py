"""Example pipelines built on the ``moldau`` data source (``moldau pipeline ...``)."""
