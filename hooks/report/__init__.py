"""The last stage: what a copy did, for the person and the reviewer.

``postgen`` is copier's post-generation task (the model's code copied beside the plugin, the data
check, the smoke, their verdicts); ``smoke`` re-runs the smoke on an existing scaffold
(``python -m hooks.smoke``); ``migration`` writes their sections into MIGRATION.md.
"""
