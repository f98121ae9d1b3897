"""Human–AI chat logs, for the generalization study: user/assistant turns.

Accepted per conversation: a list of messages ``[{role|from, content|value}]`` (ShareGPT /
ShareChat style), or an object with ``messages`` (OpenAI) or ``conversations`` (ShareGPT), with an
optional ``id``. A file holds one conversation, a JSON list of them, or JSONL (one per line).
Roles are normalised to ``user`` and ``assistant``; system messages go to the metadata.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cocoeval.core.errors import InputError
from cocoeval.core.jsonio import iter_jsonl, read_json
from cocoeval.core.schema import Conversation, Participant, Turn

from ._registry import SourceReport, sorted_files, source
from ._text import normalise_space

ROLE_ALIASES = {
    "user": "user",
    "human": "user",
    "prompter": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "ai": "assistant",
    "claude": "assistant",
    "system": "system",
    "developer": "system",
}


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text"]
        return "\n".join(x for x in parts if isinstance(x, str))
    return None


def _messages(obj: Any) -> tuple[str | None, list]:
    if isinstance(obj, list):
        return None, obj
    if isinstance(obj, dict):
        for key in ("messages", "conversations", "conversation", "items"):
            if isinstance(obj.get(key), list):
                cid = obj.get("id") or obj.get("conversation_id")
                return (str(cid) if cid is not None else None), obj[key]
    raise ValueError("expected a list of messages or an object with 'messages'/'conversations'")


def _is_single_conversation(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(m, dict) and ("role" in m or "from" in m) for m in data)
    )


@source("chat")
class ChatLoader:
    def files(self, path: Path) -> list[Path]:
        if path.is_file():
            return [path]
        return list(dict.fromkeys(sorted_files(path, "*.json") + sorted_files(path, "*.jsonl")))

    def load_file(self, path: Path, dataset: str | None, report: SourceReport) -> Iterator[Conversation]:
        if path.suffix == ".jsonl":
            records = [(f"line {n}", obj) for n, obj in iter_jsonl(path)]
        else:
            data = read_json(path)
            if _is_single_conversation(data) or isinstance(data, dict):
                records = [("conversation 0", data)]
            elif isinstance(data, list):
                records = [(f"conversation {i}", obj) for i, obj in enumerate(data)]
            else:
                raise InputError(
                    "expected a conversation or a list of conversations",
                    file=str(path),
                    hint="see the chat source's docstring for the layouts",
                )
        for record, obj in records:
            try:
                cid, msgs = _messages(obj)
            except ValueError as e:
                raise InputError(
                    str(e),
                    file=str(path),
                    record=record,
                    hint="each conversation is [{role, content}, ...] or {id, messages: [...]}",
                ) from None
            turns, system = [], []
            for i, m in enumerate(msgs):
                if not isinstance(m, dict):
                    raise InputError(
                        f"message {i} is not an object",
                        file=str(path),
                        record=record,
                        hint='messages look like {"role": "user", "content": "..."}',
                    )
                role_raw = m.get("role", m.get("from"))
                text = _content_text(m.get("content", m.get("value")))
                if not isinstance(role_raw, str) or text is None:
                    raise InputError(
                        f"message {i} needs a string role/from and content/value",
                        file=str(path),
                        record=record,
                        hint='messages look like {"role": "user", "content": "..."}',
                    )
                role = ROLE_ALIASES.get(role_raw.strip().lower())
                if role is None:
                    report.drop(f"unknown chat role {role_raw!r}")
                    continue
                if role == "system":
                    system.append(text)
                    continue
                if not text.strip():
                    report.drop("empty message")
                    continue
                turns.append(Turn(speaker=role, text=text.strip(), source_index=i))
            yield Conversation(
                id=cid or f"{path.stem}-{record.replace(' ', '')}",
                dataset=dataset or "chat",
                source_format="chat",
                kind="human_ai",
                source_file=str(path),
                participants=[
                    Participant(name="user", role="human user"),
                    Participant(name="assistant", role="AI assistant"),
                ],
                goals=[],
                turns=turns,
                meta={"system": [normalise_space(s) for s in system]} if system else {},
            )
