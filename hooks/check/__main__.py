"""``python -m hooks.check``: see the package's docstring."""

import sys

from hooks.check import main

sys.exit(main())
