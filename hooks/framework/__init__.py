"""The target checkout, shared by every stage: what it registers and reads (``checkout``, parsed from its
files, never imported) and how to run it (``environment``: its MindSpeed, the CPU bridges, devices, ranks).

Not a pipeline stage: the data evidence, the render and the smoke all ask the same checkout the same
questions, so the answers live before them.
"""
