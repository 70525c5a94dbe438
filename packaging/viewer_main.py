"""Entry point of the packaged viewer (PyInstaller runs this file): `workbench-viewer [DATABASE]`."""

import multiprocessing

from workbench.cli import viewer_main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    viewer_main()
