"""msmm-migrate hooks: probe, plan, shrink, data parity, smoke (framework / contract) and report.

Every user-facing step has a ``python -m hooks.<step>`` entry. Modules import
torch/transformers lazily so that copier can import this package cheaply.
"""
