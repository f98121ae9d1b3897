"""Offline metadata M and extractive summary S for an instance (method: extractive).

An LLM-made M and S come through the LLM layer; this is the default that needs no model.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from cocoeval.core.schema import Conversation, Metadata, Summary, Turn

_SENT = re.compile(r"(?<=[.?!])\s+(?=[\"“A-Z0-9])")
_WORD = re.compile(r"[a-z][a-z'’-]+")
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "let",
        "me",
        "more",
        "most",
        "my",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "really",
        "right",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "us",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "yeah",
        "yes",
        "you",
        "your",
        "yours",
        "okay",
        "ok",
        "oh",
        "um",
        "uh",
        "mm",
        "hmm",
        "well",
        "like",
        "know",
        "think",
        "going",
        "gonna",
        "get",
        "got",
        "thing",
        "things",
        "one",
        "actually",
        "kind",
        "sort",
        "mean",
        "maybe",
        "just",
        "said",
        "say",
        "says",
    ]
)


def _content_words(text: str) -> list[str]:
    return [w for w in (m.strip("'’-") for m in _WORD.findall(text.lower())) if len(w) > 2 and w not in STOPWORDS]


class SummaryIndex:
    """Sentences and word counts of a conversation's turns, analysed once, so that summaries of
    many prefixes of the same conversation are cheap."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = turns
        self._sentences: list[list[tuple[str, set[str]]]] = []
        self._counts: list[Counter[str]] = []
        for t in turns:
            sents: list[tuple[str, set[str]]] = []
            counts: Counter[str] = Counter()
            for s in _SENT.split(t.text):
                words = _content_words(s)
                counts.update(words)
                if len(s.split()) >= 6 and len(set(words)) >= 3:
                    sents.append((s.strip(), set(words)))
            self._sentences.append(sents)
            self._counts.append(counts)

    def summary(self, upto: int, *, max_sentences: int = 6, max_words: int = 150) -> Summary:
        """Extractive summary of turns[:upto]: the most central sentences, in their order.

        Centrality: mean log-damped frequency (over those turns) of a sentence's distinct content
        words; near-duplicates (Jaccard > 0.5 on content words) are skipped."""
        prior = self.turns[:upto]
        if not prior:
            return Summary(text="", covers_turns=0)
        tf: Counter[str] = Counter()
        for c in self._counts[:upto]:
            tf.update(c)
        sentences = [(self.turns[i].speaker, s, ws) for i in range(upto) for s, ws in self._sentences[i]]
        speakers = list(dict.fromkeys(t.speaker for t in prior))
        head = (
            f"{len(prior)} turns precede this excerpt, by {len(speakers)} speaker"
            f"{'s' if len(speakers) != 1 else ''} ({', '.join(speakers[:8])}"
            f"{', ...' if len(speakers) > 8 else ''})."
        )
        if not sentences:
            return Summary(text=head, covers_turns=len(prior))
        log = {w: math.log1p(n) for w, n in tf.items()}
        # fsum is exact, so a score (and the ties between equal ones) does not depend on the order
        # of the word set, which changes with PYTHONHASHSEED
        scored = sorted(
            range(len(sentences)), key=lambda k: (-math.fsum(log[w] for w in sentences[k][2]) / len(sentences[k][2]), k)
        )
        chosen: list[int] = []
        words = 0
        for k in scored:
            ws = sentences[k][2]
            if any(len(ws & sentences[c][2]) / len(ws | sentences[c][2]) > 0.5 for c in chosen):
                continue
            n = len(sentences[k][1].split())
            if chosen and words + n > max_words:
                continue
            chosen.append(k)
            words += n
            if len(chosen) >= max_sentences:
                break
        body = " ".join(f"{sentences[k][0]}: “{sentences[k][1]}”" for k in sorted(chosen))
        return Summary(text=f"{head} Key sentences, in order: {body}", covers_turns=len(prior))


def extractive_summary(prior: list[Turn], **kw) -> Summary:
    """Extractive summary of ``prior`` (the turns before the history)."""
    return SummaryIndex(prior).summary(len(prior), **kw)


def extractive_metadata(conv: Conversation, history: list[Turn]) -> Metadata:
    """Goals and participants from the data itself."""
    extra: dict = {}
    topics = conv.meta.get("topics")
    if topics:
        idx = {t.source_index for t in history if t.source_index is not None}
        current = [t["topic"] for t in topics if any(a <= i <= b for a, b in t.get("spans", []) for i in idx)]
        if current:
            extra["topics_in_history"] = current
    if "motion" in conv.meta:
        extra["motion"] = conv.meta["motion"]
    return Metadata(goals=list(conv.goals), participants=list(conv.participants), extra=extra)
