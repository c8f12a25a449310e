"""AMemGym environment generation by a model (the reference's ``env/gen.py`` chain).

One user at a time, stage by stage: ``base`` (context, bounded validated asks, check-and-refine),
the stage modules, ``stages`` (the ordered chain), ``runner`` (stage checkpoints, failures),
``assemble`` (the reference's ``data.json`` user). Knows ``llm`` and ``data``, nothing above.
"""
