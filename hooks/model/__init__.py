"""Model facts and plans: what the model is (probe, on the meta device) and how to train it (plan).

``probe`` reads config, module tree, forward signature and processor; ``plan`` derives the FSDP2 units,
recompute, expert-parallel and freeze plans from that table; ``matching`` is the module-name pattern
language both speak; ``shrink`` writes a tiny random copy with the same structure for the smoke.
"""
