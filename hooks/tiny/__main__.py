"""``python -m hooks.tiny``: build a tiny model folder or the demo data set, or list the architectures."""

from hooks import exit_now
from hooks.tiny import main

exit_now(main())
