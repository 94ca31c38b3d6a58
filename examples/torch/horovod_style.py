"""Moved into the package: `python -m byteps_native.examples.horovod_style` runs it from anywhere.
This path keeps working for existing commands and scripts."""
import runpy

runpy.run_module("byteps_native.examples.horovod_style", run_name="__main__", alter_sys=True)
