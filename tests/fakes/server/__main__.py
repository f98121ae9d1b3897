"""``python -m tests.fakes.server --port 0``: run the fake server (prints ``PORT <n>``)."""

from . import main

main()
