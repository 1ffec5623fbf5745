"""The last stage: what a copy did, for the person and the reviewer.

``postgen`` is copier's post-generation task (the model's code copied beside the plugin, the data
check, the smoke, their verdicts); ``smoke`` re-runs the smoke on an existing scaffold
(``python -m hooks.smoke``); ``data_check`` checks the generated data path first; ``document`` writes REPORT.md
whole.
"""
