"""`python -m kvset_tui`: the same as `kvset-top`."""

import sys

from kvset_tui.app import main

sys.exit(main())
