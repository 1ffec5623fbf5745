"""Render: what copier asks and writes. The extension copier loads (``copier_ext``: which filter each question
calls, how a failed check stops a copy), the answers' own checks (``validators``, pure), the probe session
(``session``: every run of the training interpreter a question needs, each waited for), the copy-time data
evidence (``evidence``), rendering helpers (``files``), the migration of older answers (``migrate``) and the
stale-framework stop of a plain ``copier update`` (``stale``).
"""
