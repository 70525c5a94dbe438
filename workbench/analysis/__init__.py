"""From recorded trials to answers, headless (numpy, no Qt, no torch): statistics primitives
(:mod:`.stats`, a leaf), summaries per variant × workload (:mod:`.summary`), where the time goes
(:mod:`.phases`), the decode roofline (:mod:`.roofline`), one run analysed and serialised
(:mod:`.run`), and two runs compared (:mod:`.compare`).
"""
