"""Running a spec: the plan (:mod:`.plan`) and its order in time (:mod:`.design`), the parent that keeps
the designs and the control (:mod:`.execute`) with its worker processes (:mod:`.process`), its store
writes (:mod:`.recording`: the parent is the single writer) and its checks (:mod:`.preflight`), the
worker (:mod:`.worker`) with its event records (:mod:`.events`), the runner that times every trial
(:mod:`.runner`, :mod:`.clock`), the metrics derived from the steps (:mod:`.metrics`), and what the
worker measures of the machine (:mod:`.environment`, :mod:`.bandwidth`, :mod:`.disturbance`).
"""
