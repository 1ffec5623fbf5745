"""``python -m hooks.smoke``: re-run a generated model's smoke in its checkout and update MIGRATION.md."""

from hooks import exit_now
from hooks.smoke.run import main

exit_now(main())
