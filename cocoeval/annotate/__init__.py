"""Human annotations: the blind export of what to annotate (``sample``: the draw, as in the
paper's B.1; ``exchange``: export and import), and the reading of annotation rows (``rows``).
Imported labels become judgments with the annotator as judge (``human:<annotator>``), kept in
the run's human stores (``cocoeval.run.humans``)."""

from .exchange import (
    AnnotatorImport,
    ExportReport,
    ImportReport,
    export_items,
    format_export,
    format_report,
    import_annotations,
    import_into_run,
)

__all__ = [
    "AnnotatorImport",
    "ExportReport",
    "ImportReport",
    "export_items",
    "format_export",
    "format_report",
    "import_annotations",
    "import_into_run",
]
