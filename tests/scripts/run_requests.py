"""Run N numbered requests through the runner (used by the kill -9 resume test).

run_requests.py CACHE BASE_URL N [PROCESSES]
"""

import sys

from cocoeval.llm import Call, GenerateRequest, LLMConfig, Message, Runner

cache, base_url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
processes = int(sys.argv[4]) if len(sys.argv) > 4 else 1
calls = [
    Call(
        model=f"openai-compatible/fake@{base_url}",
        request=GenerateRequest(messages=[Message(role="user", content=f"request {i}")], max_tokens=20),
    )
    for i in range(n)
]
out = Runner(LLMConfig(cache=cache, concurrency=8, progress=False, processes=processes)).run(calls)
print(sum(r.status == "ok" for r in out), "ok")
