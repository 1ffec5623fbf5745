"""The smoke: one forward -> loss -> backward -> step loop, judged on a real training signal.

``run`` picks the mode: the real MindSpeed-MM trainer where the framework runs (``hooks.framework``
says where and with what; ``trainer_run`` launches and parses it; ``bridges`` stand in for the
accelerator on CPU), otherwise the ``contract`` smoke under torch's own ``fully_shard`` (``ranks``
starts and watches its processes). ``verdict`` judges both the same way; the run with its report is
``hooks.report.smoke``.

``python -m hooks.smoke .copier-answers/<model_id>.yml [--dest CHECKOUT]``
"""
