"""``python -m hooks.smoke``: re-run a generated model's smoke in its checkout and update MIGRATION.md.

An entry point, not a stage module: it runs the smoke with its report (``hooks.report.smoke``)."""

from hooks import exit_now
from hooks.report.smoke import main

exit_now(main())
