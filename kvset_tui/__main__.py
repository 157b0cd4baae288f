"""`python -m kvset_tui`: the same as `kvset-top`."""

import sys

from kvset_tui.cli import main

sys.exit(main())
