"""Croissant 1.1 metadata of an exported benchmark (``croissant.json`` beside the parquet splits
that ``cocoeval bench-export`` writes), with the responsible-AI fields of Croissant RAI.

Beyond the paper. Croissant (MLCommons) describes a dataset so that tools load it without
reading its card: ``mlcroissant.Dataset(jsonld="DIR/croissant.json")`` validates it and reads the
records of each split (``records(record_set="eval")``). One ``FileObject`` per parquet split, named
by its path relative to the folder and its SHA-256; one ``RecordSet`` per split with the
instances' scalar fields (id, dataset, split, kind, the summary S's text, the conversation, the
source file and the first turn's index). The turn lists (history x, reference r), the metadata M
and the rest of the provenance stay in the parquet (nested columns, as the card's features list).

The RAI fields say how the instances were collected and made (from the build report: sources,
options, how M, S and the turns' text were made), what is known of their biases, limitations and
personal information (the paper's own statements, its A.1 and Ethics section), and each dataset's
licence as ``export.SOURCE_LICENCES`` records it. No path of the building machine goes in: the
sources are named as the build report records them (relative, ``build.portable``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["CONFORMS_TO", "CONTEXT", "croissant"]

CONFORMS_TO = "http://mlcommons.org/croissant/1.1"
CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
"""The standard Croissant JSON-LD context (mlcroissant warns on any other)."""
PAPER_URL = "https://arxiv.org/abs/2603.17094"
CITATION = (
    "@article{cocoeval2026, title={CoCoEval: evaluating inconsistent and uncollaborative behaviours of "
    "LLM-simulated multi-party conversations}, journal={arXiv preprint arXiv:2603.17094}, year={2026}}"
)
_FIELDS: tuple[tuple[str, str, str, str | None, str], ...] = (
    ("id", "sc:Text", "id", None, "the instance id: dataset/conversation/first turn"),
    ("dataset", "sc:Text", "dataset", None, "the dataset the conversation comes from"),
    ("split", "sc:Text", "split", None, "eval or train"),
    ("kind", "sc:Text", "kind", None, "multiparty or human_ai"),
    ("summary", "sc:Text", "summary", "text", "the summary S of the turns before the history"),
    ("conversation_id", "sc:Text", "provenance", "conversation_id", "the source conversation"),
    ("source_file", "sc:Text", "provenance", "source_file", "the source file, relative to the source folder"),
    ("start_index", "sc:Integer", "provenance", "start_index", "the first turn's index in the conversation"),
)
"""(name, data type, parquet column, JSON path inside it or None, description) of each record field."""


def _field(split: str, name: str, dtype: str, column: str, path: str | None, description: str) -> dict[str, Any]:
    source: dict[str, Any] = {"fileObject": {"@id": f"{split}.parquet"}, "extract": {"column": column}}
    if path:
        source["transform"] = {"jsonPath": path}
    return {
        "@type": "cr:Field",
        "@id": f"{split}/{name}",
        "name": name,
        "description": description,
        "dataType": dtype,
        "source": source,
    }


def _today() -> str:
    """The export's date (UTC), or that of ``SOURCE_DATE_EPOCH`` when set (a reproducible export)."""
    import os
    from datetime import UTC, datetime

    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    when = datetime.fromtimestamp(int(epoch), UTC) if epoch.isdigit() else datetime.now(UTC)
    return when.date().isoformat()


class Licence(Protocol):
    """What the metadata says of a dataset's source (``export.SourceLicence``)."""

    @property
    def licence(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def url(self) -> str: ...


def croissant(
    counts: dict[str, int],
    lic: Mapping[str, Licence],
    report: dict[str, Any],
    hashes: dict[str, str],
    version: str,
) -> dict[str, Any]:
    """The Croissant JSON-LD of an export: instances per split (``counts``, its keys the splits),
    each dataset's source licence (``lic``), the build ``report``, the files' SHA-256 (``hashes``,
    as ``export_bench`` lists them)."""
    datasets = sorted(lic)
    splits = list(counts)
    cfg = report.get("config") or {}
    ctx = report.get("context") or {}
    sources = [str(s.get("source")) for s in report.get("sources", [])]
    models = sorted(
        {str(v) for k, v in ((report.get("llm_context") or {}).get("options") or {}).items() if v and k != "batch"}
    )
    committee = [d for d in datasets if d in ("qmsum_committee", "ncpc")]
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CONFORMS_TO,
        "name": "cocoeval-benchmark",
        "description": "CoCoEval benchmark instances (beyond the paper: exported by cocoeval "
        f"{version}): real multi-party conversations cut into metadata M, a summary S, a history x of "
        f"{cfg.get('history_turns', '?')} turns and the reference r, the {cfg.get('reference_turns', '?')} turns "
        f"the humans said next. {counts.get('eval', 0)} eval and {counts.get('train', 0)} train instances "
        f"from {len(datasets)} dataset(s): {', '.join(datasets) or 'none'}.",
        "url": PAPER_URL,
        "citeAs": CITATION,
        "version": version,
        "datePublished": _today(),
        "creator": {"@type": "sc:Organization", "name": "cocoeval (bench-export)"},
        "license": [f"{d}: {lic[d].licence}" for d in datasets]
        + ["the benchmark as a whole: CC BY-SA 4.0 according to the CoCoEval paper (A.1)"],
        "rai:dataCollection": "Excerpts of public conversation corpora, cut by cocoeval build (builder "
        f"version {report.get('builder_version', 'unknown')}, seed {cfg.get('seed', '?')}) from the sources "
        f"{', '.join(sources) or '(the build report was not found)'}: windows of consecutive turns after at "
        f"least {cfg.get('min_prior_turns', '?')} earlier turns, whole conversations assigned to eval or "
        "train so the splits share none. " + " ".join(f"{k}: {v}." for k, v in ctx.items()),
        "rai:dataCollectionType": ["Secondary data: excerpts of existing public corpora"],
        "rai:dataCollectionRawData": "; ".join(f"{d}: {lic[d].source} ({lic[d].url})" for d in datasets),
        "rai:dataPreprocessingProtocol": [
            f"turn text: {ctx.get('turns', 'the loaders rule-based artefact removal')}",
            "speaker labels naming one person in several ways merged (listed in report.json)",
            f"consecutive turns of one speaker merged: {bool(cfg.get('merge_same_speaker'))}",
        ],
        "rai:dataAnnotationProtocol": "No human annotation is added: the metadata M is "
        f"{ctx.get('metadata', 'unknown')} and the summary S {ctx.get('summary', 'unknown')}; every "
        "instance's provenance records how.",
        "rai:machineAnnotationTools": models or ["none (extractive M and S, rule-based clean-up)"],
        "rai:dataBiases": [
            "English only; professional settings (product-design, academic and parliamentary meetings, "
            "Oxford-style debates) as the sources hold them, not everyday conversation",
            "transcription conventions differ by corpus (disfluencies, fillers, speaker naming); the "
            "windows start at random points of conversations long enough to hold one",
            "per dataset a fixed number of eval instances, so small datasets weigh as much as large ones",
        ],
        "rai:dataLimitations": [
            "an excerpt, not a whole conversation: S summarises only the turns before the history",
            "extractive M and S (cocoeval's offline default) are not the paper's o4-mini ones unless the "
            "build says a model made them",
            "counts per dataset are those of this build (see the card); small builds support no conclusion",
        ],
        "rai:dataUseCases": [
            "eval split: measuring how human LLM simulations of multi-party conversations are (CoCoEval)",
            "train split: fine-tuning simulators on held-out conversations (no conversation is in both)",
        ],
        "rai:dataSocialImpact": "Meant to show where simulated conversations differ from human ones; a "
        "simulator tuned on it imitates real speakers' styles, which should not be used to impersonate them.",
        "rai:personalSensitiveInformation": [
            "speakers' names and roles as the sources give them; cocoeval adds no personal information",
            "the CoCoEval paper (Ethics): no information uniquely identifying people is expected, except "
            "politicians in governmental meetings (QMSum Committee and NCPC)"
            + (f"; present here: {', '.join(committee)}" if committee else "; none of them is in this build"),
        ],
        "rai:dataReleaseMaintenancePlan": "Not maintained as a release: rebuilt from the sources by "
        "cocoeval build and bench-export; the SHA-256 of each file (here and in README.md) identify this export.",
        "distribution": [
            {
                "@type": "cr:FileObject",
                "@id": f"{s}.parquet",
                "name": f"{s}.parquet",
                "description": f"the {s} split ({counts.get(s, 0)} instances)",
                "contentUrl": f"{s}.parquet",
                "encodingFormat": "application/x-parquet",
                "sha256": hashes[f"{s}.parquet"],
            }
            for s in splits
        ],
        "recordSet": [
            {
                "@type": "cr:RecordSet",
                "@id": s,
                "name": s,
                "description": f"the {s} split's instances",
                "field": [_field(s, *f) for f in _FIELDS],
            }
            for s in splits
        ],
    }
