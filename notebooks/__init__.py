"""The papermill notebooks, one per analysis question, opened from here in a checkout
(``jupyter lab notebooks/``) and shipped in the wheel as the package data
``cocoeval.notebooks.shipped`` (pyproject.toml maps this folder). Written from the analysis
registry by ``python -m cocoeval.notebooks.generate``; edit the registry, not the files."""
