"""copier glue: the validators and frozen facts behind the questions (``copier_ext``), the
post-generation task (``postgen``: show the plan, run the smoke and parity) and the sections it
writes into the generated MIGRATION.md (``report``).
"""
