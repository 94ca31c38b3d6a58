"""Moved into the package: `python -m byteps_native.examples.mirrored_digits` runs it from anywhere.
This path keeps working for existing commands and scripts."""
import runpy

runpy.run_module("byteps_native.examples.mirrored_digits", run_name="__main__", alter_sys=True)
