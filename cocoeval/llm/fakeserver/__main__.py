"""``python -m cocoeval.llm.fakeserver --port 0``: run the fake server (prints ``PORT <n>``)."""

from . import main

main()
