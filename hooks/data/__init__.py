"""The data path: what reaches the model's forward, checked against the model's own processor.

``parity`` compares MindSpeed-MM's encoding of a sample with the model's own chat template and
processor; ``sample`` writes the smoke's generated data when the user gives none.
"""
