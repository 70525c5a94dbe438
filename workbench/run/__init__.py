"""Running a spec: the plan (:mod:`.plan`), the parent that starts a worker process per variant and
is the single writer of the store (:mod:`.execute`), the worker (:mod:`.worker`) with its event
records (:mod:`.events`), the runner that times every trial (:mod:`.runner`, :mod:`.clock`), the
metrics derived from the steps (:mod:`.metrics`), and what the worker measures of the machine
(:mod:`.environment`, :mod:`.bandwidth`).
"""
