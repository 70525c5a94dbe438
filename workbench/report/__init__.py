"""What people read: number formatting (:mod:`.formatting`), the Markdown and HTML reports
(:mod:`.documents`) and the export of a run's charts and data (:mod:`.export`; the PNG/SVG renderer is
handed in by the caller, so this package never imports Qt).
"""
