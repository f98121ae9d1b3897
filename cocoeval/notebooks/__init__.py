"""The notebooks: the run context a notebook opens (``context.open_run``), their headless
execution with papermill (``execute.execute_notebooks``), the conversation viewer (``widgets``)
and the annotator (``annotator``). The ``.ipynb`` files live in the checkout's top-level
``notebooks/`` (shipped in the wheel as ``cocoeval.notebooks.shipped``), written from the analysis
registry by ``python -m cocoeval.notebooks.generate``.

Names load on first use: importing this package does not import ipywidgets or Altair."""

from cocoeval import lazy_exports

_WHERE = {
    "open_run": "cocoeval.notebooks.context",
    "RunContext": "cocoeval.notebooks.context",
    "copy_notebooks": "cocoeval.notebooks.execute",
    "execute_notebooks": "cocoeval.notebooks.execute",
    "ConversationViewer": "cocoeval.notebooks.widgets",
    "Annotator": "cocoeval.notebooks.annotator",
}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
