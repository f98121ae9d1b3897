"""Run N numbered requests in batch mode (used by the kill -9 batch resume test).

python run_batch.py CACHE MODEL N POLL_SECONDS   -> prints "<ok> ok <sent> sent <batched> batched"
"""

import logging
import sys

from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner

cache, model, n, poll = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
logging.basicConfig(level=logging.INFO, format="%(message)s")
calls = [
    Call(model=model, request=GenerateRequest(messages=[Message(role="user", content=f"request {i}")], max_tokens=20))
    for i in range(n)
]
runner = Runner(LLMConfig(cache=cache, progress=False, batch=True, batch_poll_s=poll))
out = runner.run(calls)
print(sum(r.status == "ok" for r in out), "ok", runner.sent, "sent", runner.batched, "batched")
