import sys

from cocoeval.cli import main

sys.exit(main())
